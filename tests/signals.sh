#!/bin/sh
# Signals across the whole life of the process (issue 17, class 5):
# SIGUSR1 or SIGTERM before the train loop runs (at the top of main,
# before MPI; at the end of set-up) ends the process at once with exit
# status 3, one warning and no checkpoint, alone and on 2 ranks under
# mpirun; once the loop runs, the same signal checkpoints at the step
# boundary (tests/checkpoint.sh covers that path).  SHARDTRAIN_TEST_PAUSE
# (base/test_faults.h) holds the process at a named point so the signal
# lands exactly there.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt" \
    train.steps=20 checkpoint.every=1
cp "$TMP/base.ini" "$TMP/sigmark.ini"

# paused NAME NP POINT SIGNAL: run train paused at POINT, send SIGNAL to
# every rank once each has printed that it paused; status in NAME.rc.
paused() {
    name=$1 np=$2 point=$3 sig=$4
    rm -rf "$TMP/ckpt" "$TMP/logs"
    ( SHARDTRAIN_TEST_PAUSE=$point ranks "$np" 60 "$SHARDTRAIN" train "$TMP/sigmark.ini" \
          >"$TMP/$name.out" 2>"$TMP/$name.err"
      echo $? >"$TMP/$name.rc" ) &
    i=0
    until [ "$(grep -c "paused at $point" "$TMP/$name.err" 2>/dev/null)" -ge "$np" ]; do
        i=$((i + 1)); [ $i -gt 600 ] && { diag "$name: never paused"; break; }; sleep 0.1
    done
    pkill "-$sig" -f "^$SHARDTRAIN train .*sigmark\.ini" || diag "$name: pkill found no rank"
    wait
}

# ended NAME NP SIG: exit 3, one warning per rank, no checkpoint (checkpoint.dir,
# made and probed at the start of set-up, holds no step directory), no error
ended() {
    name=$1 np=$2 sig=$3
    st=$(cat "$TMP/$name.rc")
    n=$(grep -c "^shardtrain: warning: $sig received before training started; exiting with status 3, no checkpoint written$" "$TMP/$name.err")
    # checkpoint.dir itself is made at start (it is probed for writing)
    if [ "$st" = 3 ] && [ "$n" -eq "$np" ] && ! ls -d "$TMP/ckpt/step_"* >/dev/null 2>&1 &&
        ! grep -q '^shardtrain: error:' "$TMP/$name.err"; then
        return 0
    fi
    diag "exit $st, $n warnings" "$(cat "$TMP/$name.err")"
    return 1
}

paused start1 1 start TERM
check "SIGTERM at the top of main, alone: exit 3, no checkpoint" ended start1 1 SIGTERM
paused setup1 1 setup USR1
check "SIGUSR1 at the end of set-up, alone: exit 3, no checkpoint" ended setup1 1 SIGUSR1
paused start2 2 start USR1
check "SIGUSR1 at the top of main on 2 ranks: mpirun exits 3, no checkpoint" ended start2 2 SIGUSR1
paused setup2 2 setup TERM
check "SIGTERM at the end of set-up on 2 ranks: mpirun exits 3, no checkpoint" ended setup2 2 SIGTERM

# Once the loop runs, the first signal waits for the step boundary; a
# process blocked where no boundary comes (the "deferred" pause stands for
# a blocked call: system calls are restarted) is ended by the second one,
# at once, with status 3 and one warning; one repeated at once (as
# `scancel --full` does) is still the first.
twice() {
    rm -rf "$TMP/ckpt" "$TMP/logs"
    ( SHARDTRAIN_TEST_PAUSE=deferred ranks 1 60 "$SHARDTRAIN" train "$TMP/sigmark.ini" \
          >"$TMP/twice.out" 2>"$TMP/twice.err"
      echo $? >"$TMP/twice.rc" ) &
    i=0
    until grep -q "paused at deferred" "$TMP/twice.err" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 600 ] && { diag "twice: never paused"; break; }; sleep 0.1
    done
    pkill -TERM -f "^$SHARDTRAIN train .*sigmark\.ini"
    pkill -TERM -f "^$SHARDTRAIN train .*sigmark\.ini"   # a repeat: still one signal
    sleep 3
    early=0
    if [ -e "$TMP/twice.rc" ]; then
        diag "the first signal ended the process: $(cat "$TMP/twice.err")"
        early=1
    fi
    pkill -TERM -f "^$SHARDTRAIN train .*sigmark\.ini"
    wait
    [ $early = 0 ] && [ "$(cat "$TMP/twice.rc")" = 3 ] &&
        grep -q '^shardtrain: warning: second preemption signal and still no step boundary; exiting with status 3' "$TMP/twice.err" ||
        { diag "exit $(cat "$TMP/twice.rc")" "$(cat "$TMP/twice.err")"; return 1; }
}
check "training blocked: a SIGTERM 3 s after the first ends it at once with exit 3, a repeat at once does not" twice

# mpirun aborts on SIGTERM (exit 1, SIGKILL to the ranks 1 s after its
# SIGTERM) but forwards SIGUSR1; sbatch/mpirun.sh passes a SIGTERM on as
# SIGUSR1, so the job checkpoints and ends with status 3.
viascript() {
    rm -rf "$TMP/ckpt" "$TMP/logs"
    write_base_ini "$TMP/script.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt" \
        train.steps=100000 checkpoint.every=0
    ( SHARDTRAIN=$SHARDTRAIN OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
          timeout -s KILL 120 sh "$top_srcdir/sbatch/mpirun.sh" "$TMP/script.ini" -np 2 \
          --oversubscribe >"$TMP/script.out" 2>"$TMP/script.err"
      echo $? >"$TMP/script.rc" ) &
    wait_logged_step "$TMP/logs" 2 || diag "mpirun.sh: no step 2"
    pkill -TERM -f "^sh $top_srcdir/sbatch/mpirun.sh $TMP/script.ini"
    wait
    [ "$(cat "$TMP/script.rc")" = 3 ] && [ -s "$TMP/ckpt/latest" ] &&
        [ "$(grep -c 'SIGUSR1 received; checkpoint of step' "$TMP/script.err")" -eq 2 ] ||
        { diag "exit $(cat "$TMP/script.rc")" "$(tail -n 5 "$TMP/script.err")"; return 1; }
}
check "SIGTERM to sbatch/mpirun.sh: both ranks checkpoint, the job exits 3 (not mpirun's 1)" viascript
