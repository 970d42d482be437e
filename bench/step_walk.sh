#!/bin/sh
# Walks one bf16 training step of gpt2-124m (micro-batch 64, seq 1024) and
# llama-1b (micro-batch 8, seq 2048) on one rank through the emulated
# shardtrain of tests/gpu/emu/build_shardtrain.sh in record-only mode
# (ST_EMU_RECORD_ONLY=1, tests/gpu/emu/devmem.c): every kernel launch,
# cuBLASLt product, copy and memset is recorded with its grid, block and
# sizes, checked, and not executed, so the full-size step takes seconds.
# Each model is walked for 1 and for 2 steps: bench/step_model.py takes
# the difference of the two records, which is exactly one step's
# operations whatever the set-up and the final weights cost.
# gpt2-124m is walked again on several ranks (mpirun, one emulated device
# each, parallel.backend = nccl, micro-batch 64 per rank): on 8 ranks with
# full_shard (one node), and on 16 with hybrid_shard in shard groups of 8
# (two nodes of 8, each replicating the other); llama-1b the same two
# ways (micro-batch 8 per rank).  Rank 0's record then holds
# its collectives, the world ranks of their groups, and their event
# ordering too, for bench/step_overlap.py.
# Usage: bench/step_walk.sh EMU_SHARDTRAIN SHARDTRAIN OUTDIR [top_srcdir]
# Writes OUTDIR/MODEL.steps1.rec and OUTDIR/MODEL.steps2.rec, and
# OUTDIR/gpt2-124m.r8.steps{1,2}.rec, OUTDIR/gpt2-124m.r16h8.steps{1,2}.rec,
# OUTDIR/llama-1b.r8.steps{1,2}.rec and OUTDIR/llama-1b.r16h8.steps{1,2}.rec.
# Record-only ranks hold no device memory: the 16-rank llama-1b walk
# peaks at about 1.6 GB of host memory in all (measured 2026-12-01).
set -eu
emu=$1 st=$2 out=$3 top=${4:-.}
mkdir -p "$out"
. "$top/bench/walk_data.sh"
walk_data step_walk.sh
walk() { # MODEL MICRO_BATCH [RANKS [SHARD_SIZE]]: the walk's name is MODEL,
    # MODEL.rRANKS (full_shard), or MODEL.rRANKShSHARD_SIZE (hybrid_shard)
    ranks=${3:-1} shard=${4:-} name=$1 backend=mpi strategy=full_shard
    [ "$ranks" -gt 1 ] && name=$1.r$ranks backend=nccl
    [ -n "$shard" ] && name=$name"h$shard" strategy=hybrid_shard
    cat >"$out/$name.ini" <<EOC
[model]
preset = $1
[data]
train = $out/data/sh_train_*.bin
[train]
device = cuda
precision = bf16
micro_batch = $2
global_batch = $(($2 * ranks))
[parallel]
backend = $backend
strategy = $strategy
shard_size = ${shard:-0}
EOC
    for n in 1 2; do
        rm -f "$out/$name.steps$n.rec"*
        set -- train -s train.steps=$n -s log.dir="$out/$name.$n/logs" \
            -s checkpoint.dir="$out/$name.$n/ckpt" "$out/$name.ini"
        if [ "$ranks" -eq 1 ]; then
            ST_EMU_RECORD="$out/$name.steps$n.rec" ST_EMU_RECORD_ONLY=1 OMP_NUM_THREADS=1 \
                "$emu" "$@" >"$out/$name.steps$n.log" 2>&1
        else
            # every rank records (record-only needs a record), each to its
            # own file; rank 0's is kept
            mpirun --oversubscribe -np "$ranks" -x OMP_NUM_THREADS=1 -x ST_EMU_RECORD_ONLY=1 \
                -x ST_EMU_DEVICES="$ranks" sh -c 'ST_EMU_RECORD="$0.$OMPI_COMM_WORLD_RANK" \
                exec "$@"' "$out/$name.steps$n.rec" "$emu" "$@" >"$out/$name.steps$n.log" 2>&1 &&
                mv "$out/$name.steps$n.rec.0" "$out/$name.steps$n.rec" &&
                rm -f "$out/$name.steps$n.rec."*
        fi || {
            echo "step_walk.sh: the walk of $name ($n steps) failed:" >&2
            tail -n 5 "$out/$name.steps$n.log" >&2
            exit 1
        }
        rm -rf "$out/$name.$n" # final weights of nothing: zeros
    done
}
walk gpt2-124m 64
walk llama-1b 8
walk gpt2-124m 64 8
walk gpt2-124m 64 16 8
walk llama-1b 8 8
walk llama-1b 8 16 8
