#!/bin/sh
# The fault matrix: kill -9 and SIGSTOP at every phase of a 2-rank run
# (SHARDTRAIN_TEST_FAULT, base/test_faults.h: before MPI_Init, start-up, a
# step, evaluation, each point of a checkpoint write, the final save),
# each followed by a resume under checkpoint.resume = auto.  It counts
#   hangs:  the faulty run outlived its hang guard, or left a process;
#   silent wrong resumes:  the resume exited 0 but did not continue
#     bit-identically from the checkpoint `latest` named (or from scratch
#     when there was none), as tests/compare_runs.py --exact sees it;
#   failed resumes:  the resume neither matched nor refused with exit 2;
# and every count must be zero.  Kills run under --enable-recovery, so the
# survivor is left to the watchdog as srun leaves it; stops under plain
# mpirun.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v pgrep
require command -v python3
export OMP_NUM_THREADS=1

T=3
prepare_test_data
write_base_ini "$TMP/base.ini" "data.val=$TMP/data/sh_val_*.bin"
sets="-s train.micro_batch=4 -s train.steps=6 -s checkpoint.every=2 -s train.eval_every=3"

timeout -k 10 120 mpirun --oversubscribe -np 2 "$SHARDTRAIN" train $sets \
    -s log.dir="$TMP/ref/logs" -s checkpoint.dir="$TMP/ref/ckpt" "$TMP/base.ini" \
    >"$TMP/ref.out" 2>"$TMP/ref.err"
check "the uninterrupted run completes ($?)" test -s "$TMP/ref/ckpt/final/model.safetensors"

hangs=0 wrong=0 failed=0 cases=0
# one POINT[:N] ACTION RANK
one() {
    point=$1 action=$2 victim=$3
    name=$(echo "$point-$action" | tr : _)
    cases=$((cases + 1))
    fault=$victim:${point%%:*}:$action
    [ "$point" != "${point#*:}" ] && fault=$fault:${point#*:}
    # A kill under --enable-recovery leaves the survivor to the watchdog;
    # a stopped rank needs a launcher that ends it (plain mpirun, or srun)
    # when it stops before MPI_Init (shardtrain(1), FAULTS).
    rec=
    [ "$action" = kill ] && rec=--enable-recovery
    SHARDTRAIN_TEST_FAULT=$fault SHARDTRAIN_STARTUP_TIMEOUT_S=$T \
        timeout -k 5 60 mpirun --oversubscribe $rec -x SHARDTRAIN_TEST_FAULT \
        -x SHARDTRAIN_STARTUP_TIMEOUT_S -np 2 "$SHARDTRAIN" train $sets \
        -s parallel.timeout_s=$T -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" \
        "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    left=0
    i=0
    while pgrep -f "log.dir=$TMP/$name/" >/dev/null && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if pgrep -f "log.dir=$TMP/$name/" >/dev/null; then
        left=1
        pkill -CONT -f "log.dir=$TMP/$name/"
        pkill -9 -f "log.dir=$TMP/$name/"
    fi
    if [ "$st" -eq 124 ] || [ "$st" -eq 137 ] || [ $left -eq 1 ]; then
        hangs=$((hangs + 1))
        diag "$name: HANG (status $st, processes left: $left)"
    fi
    latest=$(sed -n 's/^step_0*\([0-9]\)/\1/p' "$TMP/$name/ckpt/latest" 2>/dev/null)
    timeout -k 5 120 mpirun --oversubscribe -np 2 "$SHARDTRAIN" train $sets \
        -s log.dir="$TMP/$name/logs2" -s checkpoint.dir="$TMP/$name/ckpt" "$TMP/base.ini" \
        >"$TMP/$name.out2" 2>"$TMP/$name.err2"
    rst=$?
    if grep -q "SHARDTRAIN_TEST_FAULT.*is not" "$TMP/$name.err"; then
        failed=$((failed + 1))
        diag "$name: the fault was not injected: $(grep -m1 SHARDTRAIN_TEST_FAULT "$TMP/$name.err")"
    elif [ $rst -eq 2 ]; then
        diag "$name: the resume refused (exit 2): $(grep -m1 'error' "$TMP/$name.err2")"
    elif [ $rst -ne 0 ]; then
        failed=$((failed + 1))
        diag "$name: the resume failed (exit $rst): $(grep -v '^shardtrain: \(rank\|step\|summary\)' "$TMP/$name.err2" | tail -n 8)"
    elif [ -n "$latest" ] && [ "$latest" -lt 6 ] 2>/dev/null; then
        compare_runs --exact --files --logs-a logs2 --resumed-at "$latest" \
            --steps "$((latest + 1))-6" "$TMP/$name" "$TMP/ref" >"$TMP/$name.cmp" 2>&1 || {
            wrong=$((wrong + 1)); diag "$name: WRONG resume from step $latest: $(tail -n 3 "$TMP/$name.cmp")"; }
    elif [ -z "$latest" ]; then
        compare_runs --exact --files --logs-a logs2 --steps 1-6 "$TMP/$name" "$TMP/ref" \
            >"$TMP/$name.cmp" 2>&1 || {
            wrong=$((wrong + 1)); diag "$name: WRONG fresh start: $(tail -n 3 "$TMP/$name.cmp")"; }
    else
        # The fault came after the last checkpoint (the final save): the
        # resume has nothing to train and its weights are the reference's.
        cmp -s "$TMP/$name/ckpt/final/model.safetensors" "$TMP/ref/ckpt/final/model.safetensors" || {
            wrong=$((wrong + 1)); diag "$name: WRONG final weights after resuming at step $latest"; }
    fi
    diag "$name: fault status $st, latest ${latest:-none}, resume status $rst"
}

for action in kill stop; do
    for point in init startup step:3 eval ckpt_begin:2 ckpt_shard:2 ckpt_gather:2 final; do
        if [ $action = kill ]; then one $point $action 1; else one $point $action 0; fi
    done
    one ckpt_publish:2 $action 0
done
echo "# fault matrix: $cases cases, $hangs hangs, $wrong silent wrong resumes, $failed failed resumes"
check "fault matrix: zero hangs in $cases cases ($hangs)" test $hangs -eq 0
check "fault matrix: zero silent wrong resumes ($wrong)" test $wrong -eq 0
check "fault matrix: zero resumes that neither continue nor refuse ($failed)" test $failed -eq 0
exit 0
