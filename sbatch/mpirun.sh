#!/bin/sh
# Training without Slurm: the same run through Open MPI's mpirun (a
# workstation, or a cluster with a hostfile).  Options after CONFIG go to
# mpirun, so the launch shape is mpirun's own syntax:
#
#   sbatch/mpirun.sh CONFIG -np 4                                # one host
#   sbatch/mpirun.sh CONFIG -np 16 --hostfile hosts --map-by ppr:8:node
#
# shardtrain reads its identity from mpirun's PMIx server (checked against
# OMPI_COMM_WORLD_*), finds nodes by MPI's shared-memory split and binds
# GPU OMPI_COMM_WORLD_LOCAL_RANK itself; -x passes OMP_NUM_THREADS to
# remote hosts, which mpirun does not do by default.  SHARDTRAIN names the
# binary when it is not on PATH.
set -eu
config=${1:?usage: mpirun.sh CONFIG [MPIRUN-OPTION...]}
shift
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OMP_NUM_THREADS
exec mpirun -x OMP_NUM_THREADS "$@" "${SHARDTRAIN:-shardtrain}" train "$config"
