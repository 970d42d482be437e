#!/bin/sh
# Preemption through sbatch/preemptible.sbatch on the test cluster
# (tests/slurm_cluster.sh): SIGUSR1 sent to the running job (`scancel
# --signal=USR1 --full`, what Slurm does before the time limit) must make
# shardtrain checkpoint at the next step boundary and requeue the job; the
# requeued job (SLURM_RESTART_COUNT=1) resumes from the checkpoint and
# finishes every step, with exactly the losses and final weights of an
# uninterrupted run of the same layout.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm_cluster.sh"
steps=120
slurm_test_begin slurm-preempt
cfg() { slurm_test_cfg "$1" "$steps" checkpoint.every=25; }

cfg ref
# The reference is the same layout uninterrupted (4 ranks, outside Slurm):
# over 120 steps fp32 rounding differences between layouts grow to ~1e-3,
# so only the same layout can be held to exact equality.
timeout 300 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train "$W/ref.ini" >"$W/ref.out" 2>&1
check "uninterrupted 4-rank reference run" test -s "$W/ref/ckpt/final/model.safetensors"

cfg pre
jobid=$(cd "$W" && sbatch --parsable -o "$W/pre.out" "$top_srcdir/sbatch/preemptible.sbatch" \
    "$W/pre.ini" 2>"$W/pre.sub")
jobid=${jobid%%;*}
# Mid-run: once step 10 is logged, well before the last.
i=0
until grep -q '^step 10/' "$W/pre.out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 1200 ] && break
    sleep 0.25
done
if grep -q '^step 10/' "$W/pre.out" 2>/dev/null; then
    ok "preemptible.sbatch: job $jobid is training"
else
    not_ok "preemptible.sbatch: job ${jobid:-?} is training"
    diag "$(cat "$W/pre.sub" "$W/pre.out" 2>/dev/null | tail -n 15)"
    exit 1
fi
scancel --signal=USR1 --full "$jobid"

# The job ends (any final state) or the hang guard gives up after 5 min.
state= restarts= exitcode= i=0
while [ $i -lt 1200 ]; do
    info=$(scontrol show job "$jobid" 2>/dev/null)
    state=$(printf '%s\n' "$info" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    restarts=$(printf '%s\n' "$info" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
    exitcode=$(printf '%s\n' "$info" | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    case "$state" in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) break ;;
    esac
    i=$((i + 1))
    sleep 0.25
done
shown=0
show() { [ "$shown" -eq 1 ] && return 0; shown=1; diag "state ${state:-?} restarts ${restarts:-?} exit ${exitcode:-?}" "$(tail -n 20 "$W/pre.out")"; }

if [ "$state" = COMPLETED ] && [ "$exitcode" = 0:0 ]; then
    ok "the preempted job completes with exit 0"
else
    not_ok "the preempted job completes with exit 0"; show
fi
if [ "$restarts" = 1 ] && [ "$(grep -c "^shardtrain: job $jobid start 0$" "$W/pre.out")" -eq 1 ] &&
   [ "$(grep -c "^shardtrain: job $jobid start 1$" "$W/pre.out")" -eq 1 ]; then
    ok "requeued once: the second run has SLURM_RESTART_COUNT=1"
else
    not_ok "requeued once: the second run has SLURM_RESTART_COUNT=1"; show
fi
# The first run stopped early: its part of the log never reaches the end.
if sed -n "/^shardtrain: job $jobid start 0$/,/^shardtrain: job $jobid start 1$/p" "$W/pre.out" |
       grep -q "^step $steps/$steps "; then
    not_ok "the first run stopped before the last step"; show
elif grep -q "^shardtrain: job $jobid start 1$" "$W/pre.out"; then
    ok "the first run stopped before the last step"
else
    not_ok "the first run stopped before the last step"; show
fi

# Every step's loss (the last logged, if a step was logged twice) and the
# final weights equal the uninterrupted run's.
if compare_runs --exact --only metrics --last --steps "1-$steps" "$W/pre" "$W/ref"
then ok "every step logged, losses equal the uninterrupted run exactly"
else not_ok "every step logged, losses equal the uninterrupted run exactly"; fi
check "final weights equal the uninterrupted run exactly" \
    same_tensors "$W/pre/ckpt/final/model.safetensors" "$W/ref/ckpt/final/model.safetensors"
