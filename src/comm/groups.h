/* Process groups of the FSDP strategies.  The world is a grid of S x R
 * ranks: a shard group (S consecutive ranks) holds one copy of the model
 * split S ways; the R shard groups are replicas of each other, and the
 * ranks holding the same piece in each replica form a replicate group that
 * averages gradients.  The layout is a pure function of the world and its
 * node map so it can be unit-tested without MPI and so every rank, given
 * the same gathered node map, reaches the same verdict without talking. */
#ifndef ST_GROUPS_H
#define ST_GROUPS_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "config/config.h"
#include "runtime/runtime.h"

typedef struct {
    int world_size, rank;
    int shard_size, replicate_size;   /* S and R, S * R = world */
    int shard_rank, replicate_rank;   /* this rank's position in each */
    int shard_group, replicate_group; /* which shard group / replicate group this rank is in */
} st_layout;

/* Pure function (no MPI): the layout for `strategy` (enum st_strategy) and
 * cfg shard_size (0 = ranks of one node).  node_of_rank[r] is rank r's node
 * (any non-negative numbering).
 *   full_shard, shard_grad_op: S = world, R = 1 (shard_size ignored).
 *   no_shard: S = 1, R = world (shard_size ignored).
 *   hybrid_shard: S = shard_size if > 0 else the ranks of one node; every
 *   node must have the same number of ranks and, when S comes from nodes,
 *   a node's ranks must be consecutive.
 * Shard group g = ranks [g*S, (g+1)*S); replicate group = ranks with the
 * same rank % S.  Errors (shard_size not dividing the world or larger than
 * it, nodes with different task counts, non-consecutive node ranks) return
 * ST_EXIT_USAGE with a one-line "what is wrong; hint" message in err. */
int st_layout_compute(int world, int rank, const int *node_of_rank, int strategy,
                      int64_t shard_size, st_layout *out, char *err, size_t errn);

typedef struct {
    st_layout layout;
    int backend;                         /* resolved: ST_BACKEND_MPI or ST_BACKEND_NCCL */
    st_comm *world, *shard, *replicate;  /* configured backend; groups of size 1 still exist */
    st_comm *host_world;                 /* always mpi: host-side scalars (loss, norms) */
} st_groups;

/* Gathers every rank's node index, computes the layout (an error is printed
 * at the config line of parallel.shard_size, or parallel.strategy when the
 * size comes from the nodes, and returned as ST_EXIT_USAGE on every rank
 * before any other collective), resolves parallel.backend (auto: nccl when
 * this rank has a device and NCCL is built in, on every rank; nccl without
 * either is ST_EXIT_USAGE), splits MPI_COMM_WORLD into the shard and
 * replicate groups and creates their communicators (labels "world",
 * "shard", "replicate").  compute_stream goes to the nccl communicators
 * (st_comm_nccl_create) and to the staged mpi ones
 * (st_comm_mpi_create_staged): the stream of the kernels instance whose
 * memory they carry, or NULL.  Collective over MPI_COMM_WORLD.  Returns an exit
 * status; g is safe to destroy whatever it returned. */
int st_groups_create(st_groups *g, const st_runtime *rt, const st_config *cfg,
                     void *compute_stream);
void st_groups_destroy(st_groups *g);

/* "2/4 (ranks 0-3)": this rank's position / group size, then the group's
 * world ranks ("rank 5" for a group of one, "ranks 1,3,5" for a strided
 * replicate group, elided past 8 members). */
void st_groups_describe(const st_groups *g, char *shard, char *replicate, size_t n);

#endif
