#!/bin/sh
# Non-finite steps: SHARDTRAIN_TEST_NONFINITE_STEPS poisons the gradient of
# chosen steps on the last rank only.  Every rank must skip the same step
# with a warning and go on; a skipped step must leave the parameters
# exactly as they were and must not count as an optimizer step; and
# train.nonfinite_limit skips in a row must stop every rank with exit
# status 5 and one error line each, without a hang.  Layouts: one rank,
# full_shard on 2 (the norm is reduced over the shard group) and no_shard
# on 2 (each rank's norm is local: only the agreement tells rank 0).  The
# agreement and the skip are decided on the backend (the step verdict) and
# read by the host where it logs: with log.every = 10, a stop found late
# must still save the state of the last good step.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v python3
export OMP_NUM_THREADS=1
unset SHARDTRAIN_TEST_NONFINITE_STEPS

prepare_test_data

# Constant learning rate, no weight decay and a negligible AdamW epsilon, so
# that the steps before a skip do not depend on train.steps and AdamW's
# first update has a known size (see the optimizer check below).
LR=1e-3
write_base_ini "$TMP/base.ini"
sets="-s train.seed=7 -s optim.lr=$LR -s optim.schedule=constant -s optim.warmup_steps=0 \
    -s optim.weight_decay=0 -s optim.eps=1e-20"

# run NAME LAYOUT STEPS POISON [-s ...]: LAYOUT is np1, full2 or nosh2;
# POISON the step list ("" for none).  Status in $st.
run() {
    name=$1 layout=$2 steps=$3 poison=$4
    shift 4
    set -- train $sets -s train.steps="$steps" -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$@"
    case $layout in
    np1) set -- timeout 120 "$SHARDTRAIN" "$@" ;;
    full2) set -- timeout 120 mpirun --oversubscribe -np 2 "$SHARDTRAIN" "$@" \
               -s parallel.strategy=full_shard ;;
    nosh2) set -- timeout 120 mpirun --oversubscribe -np 2 "$SHARDTRAIN" "$@" \
               -s parallel.strategy=no_shard ;;
    esac
    SHARDTRAIN_TEST_NONFINITE_STEPS=$poison "$@" "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    [ "$st" -eq 124 ] && diag "$name: hit the hang guard"
    return 0
}

weights() { echo "$TMP/$1/ckpt/final/model.safetensors"; }
show() { diag "$1: exit status $st" "$(tail -n 5 "$TMP/$1.err")"; }

for L in np1 full2 nosh2; do
    # A skip at step 3 of 3 must leave the weights of step 2 bit for bit,
    # against a run that simply stops after 2 steps (same layout, so the
    # same rounding).
    run "ref2_$L" "$L" 2 ""
    run "skip3_$L" "$L" 3 3
    if [ "$st" -eq 0 ]; then ok "$L: a poisoned step does not stop the run"
    else not_ok "$L: a poisoned step does not stop the run"; show "skip3_$L"; fi
    # Only rank 0 warns; with full_shard the NaN reaches both ranks' norms.
    n=$(grep -c '^shardtrain: warning: step 3: the loss or gradient norm is not finite on [12] of [12] rank(s); the update is skipped on every rank (1 in a row, train.nonfinite_limit = 5)$' "$TMP/skip3_$L.err")
    check "$L: one warning names the skipped step ($n)" test "$n" -eq 1
    check "$L: metrics mark step 3 skipped" \
        grep -q '^{"step":3,"skipped":"nonfinite","nonfinite_ranks":[12],"in_a_row":1,' \
        "$TMP/skip3_$L/logs/metrics.jsonl"
    check "$L: steps 1-2 logged as in the unpoisoned run" \
        compare_runs --exact --only metrics "$TMP/skip3_$L" "$TMP/ref2_$L"
    check "$L: the skipped step leaves the parameters exactly unchanged" \
        cmp -s "$(weights "skip3_$L")" "$(weights "ref2_$L")"
done

# The optimizer does not count a skipped step.  Skipping step 1 and
# training step 2 makes step 2 AdamW's first update, t = 1, where the bias
# corrections make m/sqrt(v) = g/|g|: every parameter with a non-zero
# gradient moves by exactly lr (eps is negligible, no weight decay).  Had
# the skip advanced t to 2 with zero moments, the move would be 0.73 lr;
# had it fed the NaN into the moments, the weights would be NaN.  The
# weights before step 2 are those of a run whose only step is skipped.
for L in np1 nosh2; do
    run "init_$L" "$L" 1 1
    run "first_$L" "$L" 2 1
    if python3 - "$(weights "init_$L")" "$(weights "first_$L")" "$LR" <<'EOF2'
import json, math, struct, sys
from array import array
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            a = array("f")
            a.frombytes(raw[8 + n + b:8 + n + e])
            out[k] = a
    return out
w0, w1, lr = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
moved = bad = 0
for k in w0:
    for x, y in zip(w0[k], w1[k]):
        if not math.isfinite(y):
            bad += 1
        elif y != x:
            moved += 1
            # fp32 rounding of p - lr * 1: relative error ~ 6e-8 * |p| / lr
            if abs(abs(y - x) / lr - 1.0) > 1e-3 + 1e-6 * abs(x) / lr:
                bad += 1
print("# %d parameters moved, %d not by lr" % (moved, bad))
sys.exit(not (moved > 50000 and bad == 0))
EOF2
    then ok "$L: after a skipped first step, the next update is AdamW's first (every move = lr)"
    else not_ok "$L: after a skipped first step, the next update is AdamW's first (every move = lr)"; fi
done

# Whole runs with a skip in the middle: two ranks match one rank (losses
# and final weights within 1e-5, as for any layout): every rank skipped
# the same step and all went on together.  AdamW's usual eps here: with
# 1e-20 it would blow the rounding noise of gradients that are exactly
# zero in theory (attention's key bias) up to moves of lr.
run skip_mid_np1 np1 5 3 -s optim.eps=1e-8
for L in full2 nosh2; do
    run "skip_mid_$L" "$L" 5 3 -s optim.eps=1e-8
    if [ "$st" -eq 0 ] && compare_runs --steps 1,2,4,5 "$TMP/skip_mid_$L" "$TMP/skip_mid_np1" 1e-5
    then ok "$L: a run skipping step 3 matches one rank skipping it"
    else not_ok "$L: a run skipping step 3 matches one rank skipping it"; show "skip_mid_$L"; fi
done

# train.nonfinite_limit skips in a row: exit 5, one error line (every rank
# stops, the lowest says why), a checkpoint of the last good state, no
# final weights, no hang.
for L in np1 full2; do
    run "limit_$L" "$L" 6 2,3 -s train.nonfinite_limit=2
    check "$L: 2 skips in a row with nonfinite_limit = 2 exit with status 5 ($st)" test "$st" -eq 5
    n_err=$(grep -c '^shardtrain: error: ' "$TMP/limit_$L.err")
    check "$L: one error line ($n_err)" test "$n_err" -eq 1
    check "$L: rank 0 names the steps and the limit" grep -q "^shardtrain: error: rank 0: steps 2-3: 2 steps in a row had a non-finite loss or gradient norm and were skipped (train.nonfinite_limit = 2); stopping; hint: " "$TMP/limit_$L.err"
    check "$L: no final weights after the stop" test ! -e "$(weights "limit_$L")"
    # The stop saves the last good state: a checkpoint of step 3 whose
    # weights are those of one trained step (steps 2 and 3 changed nothing).
    check "$L: latest names the checkpoint of step 3" \
        grep -qx 'step_00000003' "$TMP/limit_$L/ckpt/latest"
    run "one_$L" "$L" 1 ""
    "$SHARDTRAIN" export "$TMP/limit_$L/ckpt" "$TMP/limit_$L/hf" >/dev/null 2>&1
    check "$L: its weights equal a 1-step run's, bit for bit" \
        same_tensors "$TMP/limit_$L/hf/model.safetensors" "$(weights "one_$L")"
done

# The host reads the steps' verdicts only where it logs (engine/
# step_verdict.c): with log.every = 10 it learns of steps 2-8 together,
# after step 8.  The stop at the limit must still name steps 2-3, save the
# state of step 1, and log nothing after step 3: the device's gate let no
# update apply after the stop it had not yet reported (steps 4-8 are
# finite and would have trained without the gate's stop).
for L in np1 full2; do
    run "limit_late_$L" "$L" 8 2,3 -s train.nonfinite_limit=2 -s log.every=10
    check "$L, read late: the stop at steps 2-3 exits with status 5 ($st)" test "$st" -eq 5
    check "$L, read late: rank 0 names steps 2-3" grep -q "^shardtrain: error: rank 0: steps 2-3: 2 steps in a row " "$TMP/limit_late_$L.err"
    check "$L, read late: latest names the checkpoint of step 3" \
        grep -qx 'step_00000003' "$TMP/limit_late_$L/ckpt/latest"
    check "$L, read late: metrics end with skipped step 3" \
        sh -c 'tail -n 1 "$1" | grep -q "^{\"step\":3,\"skipped\":\"nonfinite\""' - \
        "$TMP/limit_late_$L/logs/metrics.jsonl"
    "$SHARDTRAIN" export "$TMP/limit_late_$L/ckpt" "$TMP/limit_late_$L/hf" >/dev/null 2>&1
    check "$L, read late: the checkpoint's weights equal a 1-step run's, bit for bit" \
        same_tensors "$TMP/limit_late_$L/hf/model.safetensors" "$(weights "one_$L")"
done

# Reading late changes nothing trained or logged.  The references read
# after every step (a checkpoint every step reads the verdicts first), the
# late runs only at the end; both log the same steps (the first and the
# last, and the skip).  A skip in the middle, and 40 steps read once (the
# device's record buffer grows from 16 to 64 on the way): the same losses,
# the same weights bit for bit.
run skip_mid_ref np1 5 3 -s optim.eps=1e-8 -s log.every=100 -s checkpoint.every=1
run skip_mid_late np1 5 3 -s optim.eps=1e-8 -s log.every=100
check "a skip in the middle, read at the end: the losses and weights of reading every step" \
    compare_runs --exact --steps 1,5 "$TMP/skip_mid_late" "$TMP/skip_mid_ref"
check "... and step 3 logged as skipped" \
    grep -q '^{"step":3,"skipped":"nonfinite",' "$TMP/skip_mid_late/logs/metrics.jsonl"
run every40 np1 40 "" -s optim.eps=1e-8 -s log.every=1000 -s checkpoint.every=1
run late40 np1 40 "" -s optim.eps=1e-8 -s log.every=1000
check "40 steps read once: the losses and weights of reading every step" \
    compare_runs --exact --steps 1,40 "$TMP/late40" "$TMP/every40"

# Skips that are not consecutive do not add up.
run apart np1 6 2,4 -s train.nonfinite_limit=2
check "skips at steps 2 and 4 with nonfinite_limit = 2 complete ($st)" test "$st" -eq 0
check "... and write the final weights" test -s "$(weights apart)"

# The testing aid itself refuses a malformed list, in one line.
run badenv np1 2 "3,x"
check "a malformed SHARDTRAIN_TEST_NONFINITE_STEPS is exit status 2 ($st)" test "$st" -eq 2
check "... with one error line" test "$(grep -c '^shardtrain: error: SHARDTRAIN_TEST_NONFINITE_STEPS: ' "$TMP/badenv.err")" -eq 1
exit 0
