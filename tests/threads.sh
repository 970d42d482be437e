#!/bin/sh
# Thread count never changes a result.  Whole training runs with 1, 2 and 3
# OpenMP threads must give the same losses and the same final weights bit
# for bit, for gpt2 and llama, on shapes whose matrix products span several
# tiles of the OpenBLAS tile grid (src/kernels/cpu_gemm_openblas.c: 128 rows
# x 768 columns): micro_batch 4 x seq 64 = 256 rows, d_ff 1024 columns.
# tests/train.sh checks the same on the tiny preset, where every product is
# one tile.
. "$top_srcdir/tests/lib.sh"

prepare_test_data
write_base_ini "$TMP/base.ini" model.preset model.n_layer=2 model.n_head=4 model.d_model=256 \
    model.d_ff=1024 model.seq_len=64 train.micro_batch=4 train.global_batch=8 train.steps=3

# run ARCH THREADS: trains into $TMP/ARCH-THREADS
run() {
    OMP_NUM_THREADS=$2 "$SHARDTRAIN" train -s model.arch="$1" -s log.dir="$TMP/$1-$2/logs" \
        -s checkpoint.dir="$TMP/$1-$2/ckpt" "$TMP/base.ini" >"$TMP/$1-$2.out" 2>"$TMP/$1-$2.err"
}

for arch in gpt2 llama; do
    if run $arch 1; then
        ok "$arch trains on 1 thread"
    else
        not_ok "$arch trains on 1 thread"
        diag "$(tail -n 5 "$TMP/$arch-1.err")"
        continue
    fi
    for t in 2 3; do
        run $arch $t || diag "$(tail -n 5 "$TMP/$arch-$t.err")"
        check "$arch: $t threads give the losses and final weights of 1 thread, bit for bit" \
            compare_runs --exact "$TMP/$arch-$t" "$TMP/$arch-1" 3
    done
done
