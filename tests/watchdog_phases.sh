#!/bin/sh
# Every phase of a run is watched: a rank that stops (SIGSTOP) or dies
# (SIGKILL) at a named point (SHARDTRAIN_TEST_FAULT, base/test_faults.h)
# of start-up, evaluation or a checkpoint write ends the whole job with
# status 4 within the hang guard, every survivor prints one line naming
# exactly the failed rank, and no process of the run is left.
#
# Launchers as in tests/watchdog.sh: plain mpirun ends the job as soon as a
# rank exits, so its cases check mpirun's status; --enable-recovery keeps
# the survivors running, so each rank runs under a sh wrapper that records
# its own status.  A fault before MPI_Init cannot be watched: the start-up
# deadline (SHARDTRAIN_STARTUP_TIMEOUT_S) ends the survivors, who cannot
# know which rank is missing and say so.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v pgrep
export OMP_NUM_THREADS=1

T=4   # parallel.timeout_s and SHARDTRAIN_STARTUP_TIMEOUT_S of every case

prepare_test_data
write_base_ini "$TMP/base.ini" "data.val=$TMP/data/sh_val_*.bin"
sets="-s train.micro_batch=1 -s train.global_batch=12 -s train.steps=6 -s checkpoint.every=2 -s train.eval_every=3 \
    -s parallel.timeout_s=$T"

# fault_case NAME NP plain|recovery RANK POINT stop|kill
fault_case() {
    name=$1 np=$2 launch=$3 victim=$4 point=$5 action=$6
    # Under plain mpirun the ranks run bare: a wrapper's own exit would
    # be the status mpirun reports.
    if [ "$launch" = recovery ]; then
        set -- --enable-recovery -x SHARDTRAIN_TEST_FAULT -x SHARDTRAIN_STARTUP_TIMEOUT_S \
            -np "$np" sh -c '"$0" "$@"; echo $? >"'"$TMP"'/'"$name"'.status.$OMPI_COMM_WORLD_RANK"'
    else
        set -- -x SHARDTRAIN_TEST_FAULT -x SHARDTRAIN_STARTUP_TIMEOUT_S -np "$np"
    fi
    SHARDTRAIN_TEST_FAULT=$victim:$point:$action SHARDTRAIN_STARTUP_TIMEOUT_S=$T \
        timeout -k 10 90 mpirun --oversubscribe "$@" "$SHARDTRAIN" train $sets -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    check "$name: not stopped by the hang guard ($st)" test "$st" -ne 124 -a "$st" -ne 137
    # Before MPI_Init, mpirun reports the ranks' exit in its own way.
    [ "$launch" = plain ] && [ "$point" != init ] &&
        check "$name: mpirun exits with status 4 ($st)" test "$st" -eq 4
    r=0
    while [ $r -lt "$np" ]; do
        if [ $r -ne "$victim" ]; then
            if [ "$point" = init ]; then
                check "$name: rank $r's start-up deadline says so" \
                    grep -q "^shardtrain: error: rank $r: MPI start-up .* did not complete within $T s; hint: " "$TMP/$name.err"
            else
                check "$name: rank $r names exactly rank $victim" \
                    test "$(grep -c "^shardtrain: error: rank $r: .*; ranks that did not arrive: $victim; .*hint: " "$TMP/$name.err")" -eq 1
            fi
            if [ "$launch" = recovery ]; then
                s=$(cat "$TMP/$name.status.$r" 2>/dev/null)
                check "$name: rank $r exits with status 4 (${s:-none})" test "${s:-none}" = 4
            fi
        fi
        r=$((r + 1))
    done
    check "$name: no rank blames another" \
        test "$(grep -c "ranks that did not arrive: .*[0-9]" "$TMP/$name.err")" -eq \
             "$(grep -c "ranks that did not arrive: $victim;" "$TMP/$name.err")"
    i=0
    while pgrep -f "log.dir=$TMP/$name/" >/dev/null && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if pgrep -f "log.dir=$TMP/$name/" >/dev/null; then
        not_ok "$name: no process of the run is left"
        pkill -CONT -f "log.dir=$TMP/$name/"
        pkill -9 -f "log.dir=$TMP/$name/"
    else
        ok "$name: no process of the run is left"
    fi
    diag "$(grep '^shardtrain: error' "$TMP/$name.err")"
}

fault_case ckpt_gather_stop 4 plain 1 ckpt_gather stop
fault_case ckpt_shard_kill 3 recovery 2 ckpt_shard kill
fault_case ckpt_publish_stop 2 recovery 0 ckpt_publish stop
fault_case eval_stop 3 plain 2 eval stop
fault_case eval_kill 2 recovery 0 eval kill
fault_case startup_kill 4 recovery 3 startup kill
fault_case startup_stop 2 plain 1 startup stop
fault_case init_kill 3 recovery 1 init kill
fault_case init_stop 2 plain 1 init stop
fault_case final_kill 3 recovery 1 final kill
exit 0
