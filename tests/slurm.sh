#!/bin/sh
# The job scripts of sbatch/ on a real Slurm cluster (tests/slurm_cluster.sh:
# munged, slurmctld and two slurmd on this machine): the single-node script
# on 4 tasks, the multi-node script on 2 nodes x 2 tasks (shard groups are
# the nodes), salloc + srun and the mpirun script outside Slurm all
# reproduce the one-rank run's losses and weights; the preemptible script
# forwards SIGUSR1 to every task and is requeued and restarted (with a
# stand-in for shardtrain's checkpointing); srun without PMIx fails loudly;
# a job step cancelled by Slurm fails its job without hanging; and the
# cluster stops without leaving a process behind and starts again.  A cluster that cannot start
# is a failure: install-deps.sh provides slurm-wlm and munge.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/slurm_cluster.sh"
require command -v mpirun

slurm_test_begin slurm
SB=$top_srcdir/sbatch

# cfg NAME [STEPS]: a config whose logs and weights go to $W/NAME
cfg() { slurm_test_cfg "$1" "${2:-3}"; }

# same A B: losses of every step and final weights of runs A and B agree
# within 1e-5 relative (the reduction order differs between layouts).
same() { compare_runs "$W/$1" "$W/$2" 1e-5; }

# job NAME SCRIPT [SBATCH-OPTION...]: sbatch --wait with a hang guard;
# status in $st, the job's output in $W/NAME.out.
job() {
    name=$1 script=$2
    shift 2
    cfg "$name"
    (cd "$W" && timeout 300 sbatch --wait --quiet -o "$W/$name.out" "$@" \
        "$SB/$script" "$W/$name.ini") >"$W/$name.sub" 2>&1
    st=$?
    [ "$st" -eq 124 ] && diag "$name: timed out (hang)"
    return 0
}
show() { diag "exit status $st" "$(cat "$W/$1.sub" "$W/$1.out" 2>/dev/null | tail -n 15)"; }
idents() { grep '^shardtrain: rank ' "$W/$1.out"; }

# ---- the reference: one rank, no launcher --------------------------------
cfg ref
timeout 300 "$SHARDTRAIN" train -s train.micro_batch=8 "$W/ref.ini" >"$W/ref.out" 2>&1
check "one-rank reference run" test -s "$W/ref/ckpt/final/model.safetensors"

# ---- 1: single node, 4 tasks, full_shard ---------------------------------
job single single-node.sbatch
if [ "$st" -eq 0 ]; then ok "single-node.sbatch: job completes"
else not_ok "single-node.sbatch: job completes"; show single; fi
if [ "$(idents single | grep -c ' local [0-3]/4 node 0 .* identity pmix shard [0-3]/4 (ranks 0-3) ')" -eq 4 ]; then
    ok "single-node.sbatch: 4 ranks from srun's PMIx on one node, one shard group"
else
    not_ok "single-node.sbatch: 4 ranks from srun's PMIx on one node, one shard group"; show single
fi
if same single ref; then ok "single-node.sbatch: losses and weights equal the 1-rank run"
else not_ok "single-node.sbatch: losses and weights equal the 1-rank run"; fi

# ---- 2: two nodes x 2 tasks, hybrid_shard --------------------------------
job multi multi-node.sbatch --ntasks-per-node=2
if [ "$st" -eq 0 ]; then ok "multi-node.sbatch: job completes"
else not_ok "multi-node.sbatch: job completes"; show multi; fi
good=1
for r in 0 1 2 3; do
    n=$((r / 2)) lo=$((r / 2 * 2))
    want=" rank $r/4 .* local $((r % 2))/2 node $n .* identity pmix shard $((r % 2))/2 (ranks $lo-$((lo + 1))) replicate $n/2 "
    [ "$(idents multi | grep -c "$want")" -eq 1 ] || good=0
done
grep -q '^shardtrain: hybrid_shard over 4 rank(s) (shard group 2 x replicate group 2)' \
    "$W/multi.out" || good=0
if [ "$good" -eq 1 ]; then ok "multi-node.sbatch: the shard groups are the nodes (ranks 0-1, 2-3)"
else not_ok "multi-node.sbatch: the shard groups are the nodes (ranks 0-1, 2-3)"; show multi; fi
if same multi ref; then ok "multi-node.sbatch: losses and weights equal the 1-rank run"
else not_ok "multi-node.sbatch: losses and weights equal the 1-rank run"; fi

# ---- 4: salloc + srun interactively, and mpirun outside Slurm ------------
cfg salloc
(cd "$W" && timeout 300 salloc --quiet -N1 -n4 --gpus-per-task=1 \
    srun --mpi=pmix "$SHARDTRAIN" train "$W/salloc.ini") >"$W/salloc.out" 2>&1
st=$?
if [ "$st" -eq 0 ] && [ "$(idents salloc | grep -c ' identity pmix shard [0-3]/4 ')" -eq 4 ]; then
    ok "salloc + srun --mpi=pmix: 4 ranks train"
else
    not_ok "salloc + srun --mpi=pmix: 4 ranks train"; diag "exit status $st" "$(tail -n 15 "$W/salloc.out")"
fi
check "salloc + srun: losses and weights equal the 1-rank run" same salloc ref

cfg mpirun
timeout 300 "$SB/mpirun.sh" "$W/mpirun.ini" -np 4 --oversubscribe >"$W/mpirun.out" 2>&1
st=$?
if [ "$st" -eq 0 ] && [ "$(idents mpirun | grep -c ' shard [0-3]/4 (ranks 0-3) ')" -eq 4 ]; then
    ok "sbatch/mpirun.sh -np 4 outside Slurm: 4 ranks train"
else
    not_ok "sbatch/mpirun.sh -np 4 outside Slurm: 4 ranks train"; diag "exit status $st" "$(tail -n 15 "$W/mpirun.out")"
fi
check "mpirun.sh: losses and weights equal the 1-rank run" same mpirun ref
check "salloc + srun and mpirun.sh reach the same result" same salloc mpirun

# ---- 5: a step cancelled by Slurm fails the job, no hang -----------------
# Long enough that it is still training when cancelled; the cancel comes
# once a step has been logged, so the tasks are really in the loop.
cfg killed 100000
(cd "$W" && timeout 300 sbatch --wait -o "$W/killed.out" "$SB/single-node.sbatch" \
    "$W/killed.ini") >"$W/killed.sub" 2>&1 &
waiter=$!
jobid= i=0
while [ $i -lt 1200 ]; do
    jobid=$(sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' "$W/killed.sub")
    [ -n "$jobid" ] && grep -q '^step 2/' "$W/killed.out" 2>/dev/null && break
    i=$((i + 1))
    sleep 0.25
done
if [ -n "$jobid" ] && grep -q '^step 2/' "$W/killed.out" 2>/dev/null; then
    scancel "$jobid.0"
    wait "$waiter"
    st=$?
    state=$(scontrol show job "$jobid" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && [ "$state" = FAILED ]; then
        ok "scancel of the training step: job FAILED, sbatch --wait exits $st, no hang"
    else
        not_ok "scancel of the training step: job FAILED, sbatch --wait exits $st, no hang"
        diag "job state ${state:-unknown}"; show killed
    fi
else
    not_ok "scancel of the training step: the job started training"
    kill "$waiter" 2>/dev/null
    st=-; show killed
fi

# ---- 3 (the script's part): preemptible.sbatch forwards and requeues -----
# shardtrain's side (checkpoint, requeue, resume) is tests/slurm_preempt.sh;
# here a stand-in program with the agreed behaviour shows what the script
# and Slurm do: SIGUSR1 to the batch shell alone (`--batch`, as
# --signal=B: does) reaches every task only through the script's trap;
# rank 0's `scontrol requeue` and exit 3 requeue the job, which runs again
# with SLURM_RESTART_COUNT=1 and ends COMPLETED.
mkdir -p "$W/stub"
cat >"$W/stub/shardtrain" <<'EOS'
#!/bin/sh
# Stand-in for shardtrain: records its arguments and the signals it got.
f=$STUB_DIR/run${SLURM_RESTART_COUNT:-0}.rank$SLURM_PROCID
echo "args $*" >"$f"
[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] && { echo resumed >>"$f"; exit 0; }
got=0
trap 'got=$((got + 1))' USR1
i=0
while [ "$got" -eq 0 ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
echo "usr1 $got" >>"$f"
# Like shardtrain, requeue only once every rank is done: the requeue kills
# the step.
if [ "$SLURM_PROCID" -eq 0 ]; then
    i=0
    while [ "$(cat "$STUB_DIR"/run0.rank* | grep -c '^usr1')" -lt "$SLURM_NTASKS" ] &&
          [ $i -lt 300 ]; do
        sleep 0.1; i=$((i + 1))
    done
    scontrol requeue "$SLURM_JOB_ID"
fi
exit 3
EOS
chmod +x "$W/stub/shardtrain"
jobid=$(cd "$W" && STUB_DIR=$W/stub SHARDTRAIN=$W/stub/shardtrain sbatch --parsable \
    -o "$W/stub.out" "$SB/preemptible.sbatch" "$W/stub.ini" 2>"$W/stub.sub")
i=0
while [ "$(ls "$W/stub" | grep -c '^run0\.rank')" -lt 4 ] && [ $i -lt 600 ]; do
    i=$((i + 1)); sleep 0.1
done
scancel --signal=USR1 --batch "$jobid"
state= restarts= i=0
while [ $i -lt 600 ]; do
    info=$(scontrol show job "$jobid" 2>/dev/null)
    state=$(printf '%s\n' "$info" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    restarts=$(printf '%s\n' "$info" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
    i=$((i + 1)); sleep 0.25
done
stubshow() { diag "job ${jobid:-?} state ${state:-?} restarts ${restarts:-?}" \
    "$(cd "$W/stub" && grep . run* 2>/dev/null)" "$(tail -n 8 "$W/stub.out" "$W/stub.sub")"; }
if [ "$(cat "$W"/stub/run0.rank* 2>/dev/null | grep -c '^usr1 [1-9]')" -eq 4 ]; then
    ok "preemptible.sbatch: SIGUSR1 to the batch shell reaches all 4 tasks"
else
    not_ok "preemptible.sbatch: SIGUSR1 to the batch shell reaches all 4 tasks"; stubshow
fi
if [ "$state" = COMPLETED ] && [ "$restarts" = 1 ] &&
   [ "$(cat "$W"/stub/run1.rank* 2>/dev/null | grep -c '^resumed$')" -eq 4 ] &&
   grep -q "^shardtrain: job $jobid start 1$" "$W/stub.out"; then
    ok "preemptible.sbatch: requeued once, runs again with SLURM_RESTART_COUNT=1, completes"
else
    not_ok "preemptible.sbatch: requeued once, runs again with SLURM_RESTART_COUNT=1, completes"; stubshow
fi
if [ "$(cat "$W"/stub/run*.rank* 2>/dev/null |
        grep -cx "args train -s checkpoint.resume=auto -s checkpoint.requeue=true $W/stub.ini")" -eq 8 ]; then
    ok "preemptible.sbatch: runs train with checkpoint.resume=auto, checkpoint.requeue=true"
else
    not_ok "preemptible.sbatch: runs train with checkpoint.resume=auto, checkpoint.requeue=true"; stubshow
fi

# ---- srun without --mpi=pmix: a loud failure, never N silent copies ------
# Debian's Open MPI cannot start without PMIx under srun: every task must
# fail at once rather than train alone as rank 0 of 1.
cfg nopmix
(cd "$W" && timeout 120 srun -N1 -n2 "$SHARDTRAIN" train "$W/nopmix.ini") >"$W/nopmix.out" 2>&1
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && ! grep -q '^step ' "$W/nopmix.out" &&
   [ ! -e "$W/nopmix/logs/metrics.jsonl" ]; then
    ok "srun without --mpi=pmix: the tasks fail (status $st) and train nothing"
else
    not_ok "srun without --mpi=pmix: the tasks fail and train nothing"
    diag "exit status $st" "$(tail -n 8 "$W/nopmix.out")"
fi

# ---- the harness: stops everything, and starts again ---------------------
left=$(slurm_cluster_pids "$CLUSTER")
slurm_cluster_stop "$CLUSTER"
alive=
for p in $left; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
if [ -n "$left" ] && [ -z "$alive" ]; then ok "stopping the cluster leaves none of its processes"
else not_ok "stopping the cluster leaves none of its processes"; diag "pids '$left', alive '$alive'"; fi
rm -rf "$CLUSTER"
CLUSTER=${top_builddir:-.}/tests/tmp/slurm.$$.again
if slurm_cluster_start "$CLUSTER" &&
   [ "$(timeout 60 srun -N2 -n2 hostname 2>/dev/null | wc -l)" -eq 2 ]; then
    ok "the cluster starts again after a stop and runs a step"
else
    not_ok "the cluster starts again after a stop and runs a step"
fi
