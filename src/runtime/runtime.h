/* Process runtime: MPI start-up and shutdown and this process's identity
 * (world rank, rank on its node, node index, bound device).  The launcher
 * (PMIx server, srun, mpirun) and MPI each have an opinion on who this
 * process is; a job launched with a mismatched launcher/MPI pair silently
 * runs N copies of rank 0, so start-up asks both and refuses to continue
 * when they disagree.  Everything above asks this layer, never MPI
 * directly, for the identity. */
#ifndef ST_RUNTIME_H
#define ST_RUNTIME_H

#include <stdint.h>

typedef struct {
    int rank, world;
    char host[256];
    int local_rank, local_size;  /* position among the ranks of this node */
    int node, n_nodes;           /* nodes numbered in order of their lowest world rank */
    const char *identity_source; /* "pmix", "slurm", "ompi" or "mpi": who told us first */
    int device;                  /* CUDA device ordinal; -1 = CPU (set by st_device_bind) */
} st_runtime;

/* Reads the launcher's identity (PMIx server, else SLURM_* / OMPI_*
 * variables), then MPI_Init_thread (FUNNELED: only the main thread calls
 * MPI; OpenMP threads compute), derives the identity from MPI alone and
 * cross-checks the two.  argc/argv may be NULL.  Returns an exit status:
 * ST_EXIT_USAGE on an identity mismatch, on every rank (the check ends in a
 * collective so no rank runs on alone).  Call st_runtime_finalize whatever
 * the result. */
int st_runtime_init(st_runtime *rt, int *argc, char ***argv);
void st_runtime_finalize(void);
/* Every rank's status becomes the worst one (a collective over the world),
 * so that a failure found on one rank stops all of them at the same point
 * instead of leaving the others waiting in the next collective.  It also
 * settles who prints the error lines ranks hold under several ranks
 * (base/log.h, st_log_hold, which st_runtime_init turns on): the lowest
 * rank that failed and holds lines prints them, the other failed ranks
 * drop theirs.  st_runtime_finalize does the same for any rank still
 * holding lines, so a failure that every rank returns without an
 * agreement is still one line. */
int st_runtime_agree(int rc);
/* The training step under way, named by the agreement's watchdog message
 * if it never completes (0, the default, reads "during start-up"). */
void st_runtime_set_step(int64_t step);
/* Rank 0 receives every rank's send[count] in rank order into recv
 * (world x count; recv may be NULL elsewhere).  Collective over the world;
 * returns an exit status.  For checkpoint checksums. */
int st_runtime_gather_u64(const unsigned long long *send, unsigned long long *recv, int count);
/* 0 when an MPI call returned MPI_SUCCESS; otherwise prints one error line
 * naming the call and returns 1. */
int st_mpi_failed(int mpi_rc, const char *what);
/* Abort every rank with status (a rank that fails alone must not leave the
 * others waiting). */
void st_runtime_abort(int status) __attribute__((noreturn));

/* One line per rank on stderr, written with a single fprintf:
 *   shardtrain: rank R/W host H local L/LS node N device cpu|cuda:K
 *   identity SOURCE shard DESC replicate DESC
 * (on one line).  The descriptions come from st_groups_describe; NULL
 * prints "-". */
void st_runtime_log_identity(const st_runtime *rt, const char *shard_desc,
                             const char *replicate_desc);

#endif
