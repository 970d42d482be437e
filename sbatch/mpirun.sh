#!/bin/sh
# Training without Slurm: the same run through Open MPI's mpirun (a
# workstation, or a cluster with a hostfile).  Options after CONFIG go to
# mpirun, so the launch shape is mpirun's own syntax:
#
#   sbatch/mpirun.sh CONFIG -np 4                                # one host
#   sbatch/mpirun.sh CONFIG -np 16 --hostfile hosts --map-by ppr:8:node
#
# Open MPI refuses to run as root without --allow-run-as-root (or
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1), and more ranks
# than cores without --oversubscribe:
#
#   sbatch/mpirun.sh CONFIG -np 4 --oversubscribe --allow-run-as-root
#
# shardtrain reads its identity from mpirun's PMIx server (checked against
# OMPI_COMM_WORLD_*), finds nodes by MPI's shared-memory split and binds
# GPU OMPI_COMM_WORLD_LOCAL_RANK itself; -x passes OMP_NUM_THREADS to
# remote hosts, which mpirun does not do by default.  SHARDTRAIN names the
# binary (see shardtrain_bin below).
set -eu
config=${1:?usage: mpirun.sh CONFIG [MPIRUN-OPTION...]}
# The binary: SHARDTRAIN when set; else the shardtrain `make install` put
# beside these scripts (it writes its bindir below; Slurm runs a copy of
# the script from its spool, so the script cannot look beside itself);
# else shardtrain on PATH; else ./shardtrain in the directory the job was
# submitted from (a build tree).  Each job script carries this lookup
# because Slurm runs it alone.
shardtrain_bin() {
    if [ -n "${SHARDTRAIN:-}" ]; then echo "$SHARDTRAIN"; return 0; fi
    for c in "@ST_BINDIR@/shardtrain" "$(command -v shardtrain 2>/dev/null || true)" \
             "${SLURM_SUBMIT_DIR:-$PWD}/shardtrain"; do
        if [ -n "$c" ] && [ -x "$c" ] && [ -f "$c" ]; then echo "$c"; return 0; fi
    done
    echo "shardtrain: error: no shardtrain binary (looked at SHARDTRAIN, the installed" \
         "bindir, PATH and ${SLURM_SUBMIT_DIR:-$PWD}); hint: make install, add its bindir to" \
         "PATH, or set SHARDTRAIN=/path/to/shardtrain" >&2
    return 1
}
st=$(shardtrain_bin) || exit 1
shift
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMP_NUM_THREADS
# Preemption: mpirun forwards SIGUSR1 to every rank, which checkpoints
# and exits 3, and mpirun exits 3.  SIGTERM it does not forward: it
# aborts the job (SIGTERM to the ranks, SIGKILL 1 s later, its
# odls_base_sigkill_timeout) and exits 1.  So a SIGTERM to this script
# (Slurm's at the time limit, scancel, kill) is passed on as SIGUSR1.
run=
forward() { [ -n "$run" ] && kill -s USR1 "$run" 2>/dev/null; return 0; }
trap forward USR1 TERM
mpirun -x OMP_NUM_THREADS "$@" "$st" train "$config" &
run=$!
# wait returns early (status > 128) whenever a trapped signal arrives:
# wait again until mpirun has really ended, then pass on its status.
set +e
while :; do
    wait "$run"
    status=$?
    kill -0 "$run" 2>/dev/null || break
done
exit "$status"
