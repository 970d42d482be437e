#!/bin/sh
# Behaviour-preservation check for refactors: runs the same configurations
# with two shardtrain binaries (say, the build of main before a change and
# after it) and demands byte-identical results: every metrics.jsonl line
# (without the wall-clock fields tokens_per_s, time_ms and mfu), every file
# a checkpoint writes, the final weights, an export, and the output of
# check, estimate and sample.  Not part of `make check` (it needs a second
# binary); run it by hand:
#
#   tests/same_outputs.sh OLD_SHARDTRAIN NEW_SHARDTRAIN
#
# SAME_OUTPUTS_IGNORE="FIELD ...": metrics fields left out of the comparison
# too, for a change that moves the memory accounting on purpose (say
# "peak_bytes state_bytes" for one that adds or resizes a buffer): every
# other byte must still match.
# TAP output; exit status 0 when every setup matched.
set -u
old=$1 new=$2
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
SHARDTRAIN=$new
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

prepare_test_data

# The base of tests/lib.sh with evaluation and checkpoints, in the file
# itself: every command of both binaries below reads this one file.
write_base_ini "$TMP/base.ini" data.val="$TMP/data/sh_val_*.bin" train.micro_batch=1 \
    train.seed=7 train.eval_every=2 train.eval_batches=2 checkpoint.every=2

# Both binaries run in the same directory $TMP/run (the manifest records
# the paths), which is then moved to $TMP/old or $TMP/new.
mkdir -p "$TMP/old" "$TMP/new"
# both NAME NP [-s ...]: the same run with each binary into $TMP/{old,new}/NAME
both() {
    name=$1 np=$2
    shift 2
    for which in old new; do
        eval "bin=\$$which"
        d=$TMP/run/$name
        mkdir -p "$d"
        ranks "$np" 300 "$bin" train -s log.dir="$d/logs" -s checkpoint.dir="$d/ckpt" "$@" \
            "$TMP/base.ini" >"$d/out" 2>"$d/err" || echo "exit $?" >>"$d/status"
        mv "$d" "$TMP/$which/$name"
    done
    same "$name"
}

# same NAME: metrics (less timings), exit statuses and every checkpoint file agree
same() {
    o=$TMP/old/$1 n=$TMP/new/$1
    strip="del_fields = ('tokens_per_s', 'time_ms', 'mfu') + tuple('${SAME_OUTPUTS_IGNORE:-}'.split())"
    for d in "$o" "$n"; do
        python3 -c "
import json, sys
$strip
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k in del_fields: r.pop(k, None)
    print(json.dumps(r, sort_keys=True))" "$d/logs/metrics.jsonl" >"$d/metrics.cmp" 2>/dev/null ||
            echo missing >"$d/metrics.cmp"
        (cd "$d/ckpt" 2>/dev/null && find . -type f | sort) >"$d/files"
    done
    if ! cmp -s "$o/metrics.cmp" "$n/metrics.cmp"; then
        not_ok "$1: metrics differ"; diag "$(diff "$o/metrics.cmp" "$n/metrics.cmp" | head -n 6)"; return
    fi
    if ! cmp -s "$o/files" "$n/files" || [ ! -s "$n/files" ]; then
        not_ok "$1: checkpoint files differ"; diag "$(diff "$o/files" "$n/files" | head -n 6)"; return
    fi
    if [ "$(cat "$o/status" 2>/dev/null)" != "$(cat "$n/status" 2>/dev/null)" ]; then
        not_ok "$1: exit status differs"; return
    fi
    while read -r f; do
        cmp -s "$o/ckpt/$f" "$n/ckpt/$f" || { not_ok "$1: $f differs"; return; }
    done <"$n/files"
    ok "$1: metrics ($(wc -l <"$n/metrics.cmp") lines) and $(wc -l <"$n/files") checkpoint files identical"
}

both one_rank 1
both full_shard_x4 4 -s parallel.strategy=full_shard
both hybrid_2x2 4 -s parallel.strategy=hybrid_shard -s parallel.shard_size=2
both shard_grad_op_x2 2 -s parallel.strategy=shard_grad_op
both no_shard_x2_nosync 2 -s parallel.strategy=no_shard -s parallel.no_sync=true
both llama_gqa_bf16_x2 2 -s model.arch=llama -s model.n_kv_head=2 -s train.precision=bf16 \
    -s parallel.reduce_dtype=bf16 -s train.activation_checkpointing=full
both untied_prefetch0_x4 4 -s model.tie_embeddings=false -s parallel.prefetch=0

# A resumed run: 4 steps, then 6 with the same directories (resume = auto),
# at another world size for the second half.
for which in old new; do
    eval "bin=\$$which"
    d=$TMP/run/resumed
    mkdir -p "$d"
    ranks 2 300 "$bin" train -s log.dir="$d/logs" -s checkpoint.dir="$d/ckpt" \
        "$TMP/base.ini" >"$d/out1" 2>"$d/err1" || echo "first exit $?" >>"$d/status"
    ranks 4 300 "$bin" train -s log.dir="$d/logs" -s checkpoint.dir="$d/ckpt" \
        -s train.steps=6 "$TMP/base.ini" >"$d/out" 2>"$d/err" || echo "exit $?" >>"$d/status"
    mv "$d" "$TMP/$which/resumed"
done
same resumed

# The other commands on the same configuration and checkpoints.
for which in old new; do
    eval "bin=\$$which"
    d=$TMP/run
    mkdir -p "$d" && mv "$TMP/$which/one_rank" "$d/"
    "$bin" check "$TMP/base.ini" >"$d/check.out" 2>&1; echo "rc $?" >>"$d/check.out"
    "$bin" estimate --nodes 2 --tasks-per-node 4 --device-mem 80 "$TMP/base.ini" \
        >"$d/estimate.out" 2>&1; echo "rc $?" >>"$d/estimate.out"
    "$bin" estimate --json --time --tflops 100 "$TMP/base.ini" >"$d/estimate_json.out" 2>&1
    echo "rc $?" >>"$d/estimate_json.out"
    "$bin" export "$d/one_rank/ckpt" "$d/export" >"$d/export.out" 2>&1; echo "rc $?" >>"$d/export.out"
    (cd "$d/export" && find . -type f | sort | xargs md5sum) >>"$d/export.out" 2>&1
    "$bin" sample --weights "$d/one_rank/ckpt/final/model.safetensors" --prompt "ROMEO:" \
        --tokens 40 --seed 3 "$TMP/base.ini" >"$d/sample.out" 2>&1; echo "rc $?" >>"$d/sample.out"
    "$bin" check -s train.steps=0 "$TMP/base.ini" >"$d/bad.out" 2>&1; echo "rc $?" >>"$d/bad.out"
    "$bin" train >"$d/usage.out" 2>&1; echo "rc $?" >>"$d/usage.out"
    mv "$d/one_rank" "$TMP/$which/one_rank"
    mv "$d"/*.out "$TMP/$which/"
    rm -rf "$d"
done
for c in check estimate estimate_json export sample bad usage; do
    if cmp -s "$TMP/old/$c.out" "$TMP/new/$c.out"; then ok "$c: output identical"
    else not_ok "$c: output differs"; diag "$(diff "$TMP/old/$c.out" "$TMP/new/$c.out" | head -n 8)"; fi
done
[ "$tap_fail" -eq 0 ]
