#!/bin/sh
# The kernels backend seam (src/kernels/kernels.h).  SHARDTRAIN_TEST_KERNELS=
# cpu-bf16params runs the engine's params_bf16 path (gathered units kept as
# bf16 words, as a GPU backend with bf16 kernels will take them) on CPU ops
# that widen the words first.  Widened words are exactly the rounded floats
# the ordinary path computes on, so every run must match the ordinary
# backend byte for byte: bf16 at 1 rank and at 4 ranks (full_shard, and
# hybrid_shard 2 x 2 with bf16 reduction), and fp32, where the hook must
# change nothing at all (peak_bytes included).  The comparison itself must
# catch a run that differs, and a bad hook value is one error line.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v python3
export OMP_NUM_THREADS=1   # 4 ranks on 2 cores
unset SHARDTRAIN_TEST_KERNELS

prepare_test_data

# Evaluation on, so the forward-only schedule runs on the backend too.
cat >"$TMP/cfg.ini" <<EOF2
[model]
preset = tiny
seq_len = 32
[data]
train = $TMP/data/sh_train_*.bin
val = $TMP/data/sh_val_*.bin
[train]
micro_batch = 2
global_batch = 8
steps = 4
seed = 5
eval_every = 2
eval_batches = 1
[optim]
lr = 3e-3
warmup_steps = 1
[log]
every = 1
EOF2

# run NAME NP KERNELS [-s ...]: train with SHARDTRAIN_TEST_KERNELS=KERNELS
run() {
    name=$1 np=$2 kern=$3
    shift 3
    set -- train -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        "$TMP/cfg.ini"
    SHARDTRAIN_TEST_KERNELS=$kern ranks "$np" 300 "$SHARDTRAIN" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# metrics NAME FIELDS...: metrics.jsonl without timing, one line per record
metrics() {
    name=$1
    shift
    python3 - "$TMP/$name/logs/metrics.jsonl" "$@" <<'EOF2'
import json, sys
keep = sys.argv[2:]
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: r[k] for k in keep if k in r}, sort_keys=True))
EOF2
}

# same NAME_A NAME_B FIELDS...: byte-identical metrics FIELDS and final weights
same() {
    a=$1 b=$2
    shift 2
    [ -s "$TMP/$a/ckpt/final/model.safetensors" ] && [ -s "$TMP/$b/ckpt/final/model.safetensors" ] &&
        [ "$(metrics "$a" "$@" | grep -c grad_norm)" -eq 4 ] &&
        [ "$(metrics "$a" "$@")" = "$(metrics "$b" "$@")" ] &&
        cmp -s "$TMP/$a/ckpt/final/model.safetensors" "$TMP/$b/ckpt/final/model.safetensors"
}

numbers="step loss lr grad_norm val_loss state_bytes"

# pair NAME NP [-s ...]: the same run on both backends; both must succeed
pair() {
    name=$1 np=$2
    shift 2
    run "$name" "$np" "" "$@" || { not_ok "$name: the cpu run failed"; diag "$(cat "$TMP/$name.err")"; }
    run "$name.b16" "$np" cpu-bf16params "$@" ||
        { not_ok "$name: the cpu-bf16params run failed"; diag "$(cat "$TMP/$name.b16.err")"; }
}

bf="-s train.precision=bf16"
pair bf_np1 1 $bf
check "bf16, 1 rank: identical metrics and final weights with cpu-bf16params" \
    same bf_np1 bf_np1.b16 $numbers
pair bf_full4 4 $bf -s parallel.strategy=full_shard
check "bf16, full_shard on 4: identical metrics and final weights with cpu-bf16params" \
    same bf_full4 bf_full4.b16 $numbers
pair bf_hyb4 4 $bf -s parallel.strategy=hybrid_shard -s parallel.shard_size=2 \
    -s parallel.reduce_dtype=bf16
check "bf16, hybrid_shard 2 x 2, bf16 reduction: identical metrics and final weights" \
    same bf_hyb4 bf_hyb4.b16 $numbers

# The words path was taken: gathered units of 2 bytes per element instead of
# 4 lower the peak when the units are really gathered.
p_cpu=$(metrics bf_full4 peak_bytes | grep peak | tail -n 1 | tr -dc 0-9)
p_b16=$(metrics bf_full4.b16 peak_bytes | grep peak | tail -n 1 | tr -dc 0-9)
check "full_shard on 4: bf16 words lower peak_bytes ($p_cpu -> $p_b16)" \
    test "${p_b16:-0}" -gt 0 -a "${p_b16:-0}" -lt "${p_cpu:-0}"

# fp32: the backend's bf16 path is never used, not even its memory.
pair fp_np1 1
check "fp32, 1 rank: the hook changes nothing (peak_bytes included)" \
    same fp_np1 fp_np1.b16 $numbers peak_bytes
pair fp_full4 4 -s parallel.strategy=full_shard
check "fp32, full_shard on 4: the hook changes nothing (peak_bytes included)" \
    same fp_full4 fp_full4.b16 $numbers peak_bytes

# The comparison can fail: fp32 against bf16, and a run one seed apart.
if same fp_np1 bf_np1.b16 $numbers; then
    not_ok "the comparison did not tell fp32 from bf16"
else
    ok "the comparison tells fp32 from bf16"
fi
run seed_np1 1 cpu-bf16params $bf -s train.seed=6
if same bf_np1 seed_np1 $numbers; then
    not_ok "the comparison did not tell a different seed"
else
    ok "the comparison tells a different seed"
fi

# A bad hook value: exit status 2 and one error line.
SHARDTRAIN_TEST_KERNELS=cuda-nope "$SHARDTRAIN" train -s log.dir="$TMP/bad/logs" \
    -s checkpoint.dir="$TMP/bad/ckpt" "$TMP/cfg.ini" >"$TMP/bad.out" 2>"$TMP/bad.err"
st=$?
check "a bad SHARDTRAIN_TEST_KERNELS is exit status 2 ($st)" test "$st" -eq 2
check "... with one error line naming the variable" \
    test "$(grep -c '^shardtrain: error: SHARDTRAIN_TEST_KERNELS: ' "$TMP/bad.err")" -eq 1
