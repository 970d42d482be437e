/* Constructors of the communication backends.  Only the code that builds
 * process groups includes this (it needs MPI); everything else uses
 * comm.h.  Each constructor takes a group's MPI communicator, which it
 * duplicates, so the caller may free its own. */
#ifndef ST_COMM_BACKENDS_H
#define ST_COMM_BACKENDS_H

#include <mpi.h>

#include "comm/comm.h"

/* Host buffers, MPI non-blocking collectives.  NULL on failure (message
 * printed). */
st_comm *st_comm_mpi_create(MPI_Comm group, const char *label);
/* The same on GPU buffers (staged != 0): each collective copies through
 * host memory (comm_mpi.c says how and why), ordered on compute_stream (a
 * cudaStream_t, as for nccl below) and waiting for it alone. */
st_comm *st_comm_mpi_create_staged(MPI_Comm group, const char *label, int staged,
                                   void *compute_stream);

/* Device buffers, NCCL on a dedicated stream of the current CUDA device.
 * compute_stream (a cudaStream_t; NULL: the legacy default stream) is the
 * stream whose work the collectives must follow and that waits for their
 * results.  Group rank 0 calls ncclGetUniqueId and MPI_Bcasts it over
 * `group`, then every member calls ncclCommInitRank.  NULL on failure
 * (message printed), and always NULL in a build without NCCL. */
st_comm *st_comm_nccl_create(MPI_Comm group, const char *label, void *compute_stream);
int st_comm_nccl_available(void);

#endif
