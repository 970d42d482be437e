#!/bin/sh
# The collective watchdog: a rank that dies (kill -9) or stalls (SIGSTOP)
# in the middle of training must not leave the others hanging.  Each
# survivor prints one line naming the collective, the step and the rank
# that did not arrive, and the job ends within twice parallel.timeout_s
# with a non-zero status; a normal run with a short timeout still succeeds.
#
# Launchers: plain mpirun kills the whole job the moment a rank dies by a
# signal (no hang, but no message either), so the kill -9 case runs under
# `mpirun --enable-recovery`, which keeps the survivors running as srun does
# by default (KillOnBadExit=0).  Open MPI 4.1's mpirun then exits 0 whatever
# the ranks did, so each rank runs under a small sh wrapper that records its
# own exit status.  A stopped rank is invisible to mpirun, so the SIGSTOP
# case needs neither and checks mpirun's own status.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v python3
export OMP_NUM_THREADS=1

T=5   # parallel.timeout_s of the fault runs

prepare_test_data

write_base_ini "$TMP/base.ini"
# The base in micro-batches of 1, seed 3, as many steps as the faults need,
# and the default learning rate (3e-4, no warmup).
sets="-s train.micro_batch=1 -s train.steps=100000 -s train.seed=3 -s optim.lr=3e-4 \
    -s optim.warmup_steps=0"

now() { date +%s.%N; }
elapsed_ok() { # START LIMIT: true while less than LIMIT seconds have passed
    python3 -c 'import sys, time; sys.exit(not (time.time() - float(sys.argv[1]) < float(sys.argv[2])))' "$1" "$2"
}

# pid_of NAME RANK: the shardtrain process of RANK in run NAME (its command
# line names the run's directory; mpirun puts the rank in its environment).
pid_of() {
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        [ "$(cat "$d/comm" 2>/dev/null)" = shardtrain ] || continue
        if tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^log.dir=$TMP/$1/" &&
           tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# wait_step NAME N: until metrics.jsonl shows step N (at most 60 s)
wait_step() {
    i=0
    while [ $i -lt 600 ]; do
        grep -q "^{\"step\":$2," "$TMP/$1/logs/metrics.jsonl" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# wait_gone PID LIMIT: until PID has exited, at most LIMIT seconds
wait_gone() {
    start=$(now)
    while kill -0 "$1" 2>/dev/null; do
        elapsed_ok "$start" "$2" || return 1
        sleep 0.1
    done
    return 0
}

# survivor_line NAME RANK VICTIM: RANK's one error line names a collective,
# a step >= 2 and VICTIM among the ranks that did not arrive (not as a rank
# that is merely behind).  The collective's description may hold an
# apostrophe ("the step's loss and verdict", engine/step_verdict.c): a
# survivor can be held in that all-reduce, as a CI run on 2026-11-29 showed.
survivor_line() {
    n=$(grep -c "^shardtrain: error: rank $2: " "$TMP/$1.err")
    [ "$n" -eq 1 ] &&
    grep -Eq "^shardtrain: error: rank $2: (all_gather|reduce_scatter|all_reduce) of [a-z' ]+( [0-9]+)? \((world|shard|replicate) group\) at step ([2-9]|[1-9][0-9]+) (did not complete within $T s|was abandoned after [0-9.]+ s because rank [0-9] gave up waiting); ranks that did not arrive: ([^;]*, )?$3[,;] .*hint: " "$TMP/$1.err"
}

# ---- kill -9 of rank 2 ------------------------------------------------------
# kill_case NAME [MPIRUN OPTIONS]: kill -9 rank 2 mid-run; the other three
# must report it and exit with status 4.
kill_case() {
    name=$1
    shift
    timeout 60 mpirun --oversubscribe --enable-recovery "$@" -np 4 \
        sh -c '"$0" "$@"; echo $? >"'"$TMP"'/'"$name"'.status.$OMPI_COMM_WORLD_RANK"' \
        "$SHARDTRAIN" train $sets -s parallel.timeout_s=$T -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    job=$!
    if wait_step $name 2 && victim=$(pid_of $name 2); then
        ok "$name: training runs on 4 ranks (rank 2 is pid $victim)"
        kill -9 "$victim"
        if wait_gone $job $((2 * T)); then ok "$name: the job ends within 2 x timeout_s"
        else not_ok "$name: the job ends within 2 x timeout_s"; fi
    else
        not_ok "$name: training runs on 4 ranks"
    fi
    wait $job
    st=$?
    check "$name: not stopped by the hang guard ($st)" test "$st" -ne 124
    for r in 0 1 3; do
        if survivor_line $name $r 2; then ok "$name: rank $r names the collective, the step and rank 2"
        else not_ok "$name: rank $r names the collective, the step and rank 2"; fi
        s=$(cat "$TMP/$name.status.$r" 2>/dev/null)
        check "$name: rank $r exits with status 4 (${s:-none})" test "${s:-none}" = 4
    done
    diag "$(grep '^shardtrain: error' "$TMP/$name.err")"
}
kill_case kill
# Over TCP a dead peer's connection breaks; Open MPI 4.1 prints its own
# "peer process has unexpectedly disconnected" notice, but the collective
# neither completes nor fails: the watchdog must still name the rank.
kill_case kill_tcp --mca btl tcp,self

# ---- SIGSTOP of rank 1 ------------------------------------------------------
name=stop
timeout 60 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train $sets -s parallel.timeout_s=$T \
    -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$TMP/base.ini" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
job=$!
victim=
if wait_step $name 2 && victim=$(pid_of $name 1); then
    ok "stop: training runs on 4 ranks (rank 1 is pid $victim)"
    kill -STOP "$victim"
    if wait_gone $job $((2 * T)); then ok "stop: the job ends within 2 x timeout_s"
    else not_ok "stop: the job ends within 2 x timeout_s"; fi
else
    not_ok "stop: training runs on 4 ranks"
fi
wait $job
st=$?
check "stop: mpirun exits with status 4 ($st)" test "$st" -eq 4
for r in 0 2 3; do
    if survivor_line $name $r 1; then ok "stop: rank $r names the collective, the step and rank 1"
    else not_ok "stop: rank $r names the collective, the step and rank 1"; fi
done
if [ -n "$victim" ]; then
    # The launcher kills the stopped rank once the others are gone.
    if wait_gone "$victim" 30; then ok "stop: the stopped rank does not outlive the job"
    else
        not_ok "stop: the stopped rank does not outlive the job"
        kill -CONT "$victim" 2>/dev/null
        kill -9 "$victim" 2>/dev/null
    fi
fi
diag "$(grep '^shardtrain: error' "$TMP/$name.err")"

# ---- kill -9, then resume: nothing before the last checkpoint is lost ------
# 40 steps with a checkpoint every 2; rank 2 dies after step 5.  The
# survivors stop with status 4; the same command (resume = auto) continues
# from the newest checkpoint, which must be at most 2 steps behind the last
# step logged before the kill, and ends with the uninterrupted run's losses
# and weights.
RES="-s train.steps=40 -s checkpoint.every=2"
timeout 300 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train $sets $RES \
    -s log.dir="$TMP/whole/logs" -s checkpoint.dir="$TMP/whole/ckpt" "$TMP/base.ini" \
    >"$TMP/whole.out" 2>"$TMP/whole.err"
check "resume: the uninterrupted 40-step run completes ($?)" test -s "$TMP/whole/ckpt/final/model.safetensors"
name=killres
timeout 60 mpirun --oversubscribe --enable-recovery -np 4 "$SHARDTRAIN" train $sets $RES \
    -s parallel.timeout_s=$T -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" \
    "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err" &
job=$!
if wait_step $name 5 && victim=$(pid_of $name 2); then
    kill -9 "$victim"
    ok "resume: rank 2 killed after step 5"
else
    not_ok "resume: rank 2 killed after step 5"
fi
wait $job
logged=$(python3 -c 'import json, sys; print(max(json.loads(l)["step"] for l in open(sys.argv[1])))' "$TMP/$name/logs/metrics.jsonl")
latest=$(sed 's/^step_0*//' "$TMP/$name/ckpt/latest" 2>/dev/null)
check "resume: the survivors did not finish the run" test ! -e "$TMP/$name/ckpt/final/model.safetensors"
check "resume: the newest checkpoint (step ${latest:-none}) is within 2 steps of the last logged step ($logged)" \
    test -n "$latest" -a "$((logged - ${latest:-0}))" -le 2
timeout 300 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train $sets $RES \
    -s log.dir="$TMP/$name/logs2" -s checkpoint.dir="$TMP/$name/ckpt" "$TMP/base.ini" \
    >"$TMP/$name.out2" 2>"$TMP/$name.err2"
check "resume: the same command completes the run ($?)" test -s "$TMP/$name/ckpt/final/model.safetensors"
check "resume: it starts right after the checkpoint and matches the uninterrupted run" \
    compare_runs --exact --files --logs-a logs2 --resumed-at "$latest" \
        --steps "$((${latest:-0} + 1))-40" "$TMP/$name" "$TMP/whole"

# ---- no false positive ----------------------------------------------------
# A short timeout that is still far above any wait of a healthy tiny run.
timeout 120 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train $sets -s parallel.timeout_s=3 \
    -s train.steps=6 -s log.dir="$TMP/short/logs" -s checkpoint.dir="$TMP/short/ckpt" \
    "$TMP/base.ini" >"$TMP/short.out" 2>"$TMP/short.err"
st=$?
check "a healthy run with parallel.timeout_s = 3 succeeds ($st)" test "$st" -eq 0
check "... without an error line" test "$(grep -c 'shardtrain: error' "$TMP/short.err")" -eq 0
check "... and writes its weights" test -s "$TMP/short/ckpt/final/model.safetensors"
exit 0
