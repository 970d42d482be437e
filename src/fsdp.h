/* The FSDP engine: sharded parameters, gradients and optimizer state, and
 * the unit-by-unit gather / compute / free / reduce-scatter schedule.
 *
 * Each unit's parameters (model.h) form one flat buffer, padded to a
 * multiple of the shard group size S.  A rank stores only its contiguous
 * slice of the fp32 master parameters, the gradients and AdamW's two
 * moments.  Before a unit computes, its slices are all-gathered over the
 * shard group (in the compute dtype); after its backward, the full gradient
 * is reduce-scattered back to the slices and, for hybrid sharding,
 * all-reduced across the replicate group.  The strategies are points of
 * one mechanism:
 *
 *   full_shard     S = world, regather in backward (ZeRO-3)
 *   shard_grad_op  S = world, keep gathered units from forward to backward (ZeRO-2)
 *   hybrid_shard   S = a node (or shard_size), all-reduce over R = world / S
 *   no_shard       S = 1, every rank holds everything, all-reduce over the world (DDP)
 *
 * The engine talks to other ranks only through comm.h, so it does not know
 * which backend carries the bytes.  With groups == NULL it runs one rank
 * with no communication at all (tests, tools). */
#ifndef ST_FSDP_H
#define ST_FSDP_H

#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "groups.h"
#include "model.h"

/* Where each unit stands in the gather schedule. */
typedef enum { UNIT_SHARDED, UNIT_GATHERING, UNIT_GATHERED } st_unit_state;

typedef struct {
    int64_t numel;           /* unpadded element count */
    int64_t padded;          /* numel rounded up to a multiple of S */
    int64_t shard;           /* padded / S: elements this rank owns */
    int64_t lo;              /* first element of this rank's slice */
    float *params, *grads, *adam_m, *adam_v;   /* [shard], fp32 */
    /* Gathered parameters in the compute dtype (bf16 values are stored as
     * rounded floats for the CPU kernels). */
    float *full;
    st_unit_state state;
    st_comm_req gather_req;
    uint16_t *gather_send, *gather_recv;       /* bf16 staging */
    /* Full-size gradient being accumulated (no_sync, tied embeddings). */
    float *full_grad;
} st_fsdp_unit;

typedef struct {
    const st_model *model;
    const st_config *cfg;
    st_groups *groups;       /* NULL: one rank, no communication */
    int S, R;                /* shard and replicate group sizes */
    int shard_rank;
    int reshard_after_forward;
    int bf16;                /* compute dtype */
    int reduce_bf16;         /* reduce_dtype */
    int64_t B;
    int n_units;
    st_fsdp_unit *units;
    float *res;              /* residual stream: n_layer + 1 buffers of [B*T, C] */
    float *acts;             /* block activations: n_layer sets, or one when recomputing */
    float *scratch;
    float *dres_a, *dres_b;
    int64_t opt_steps;
    int in_flight;           /* gathers issued and not yet waited */
} st_fsdp;

/* Allocate this rank's shards and initialise them (random from the seed,
 * or this rank's slice of model.init's weights).  Returns an exit status. */
int st_fsdp_create(st_fsdp *f, const st_model *m, const st_config *cfg, st_groups *groups);
void st_fsdp_destroy(st_fsdp *f);

void st_fsdp_zero_grads(st_fsdp *f);
/* Forward and backward of one micro-batch on this rank; gradients land in
 * the shards (reduced over every rank) unless no_sync defers it to the
 * micro-batch with last_micro set.  Returns this rank's summed loss. */
int st_fsdp_forward_backward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                             float grad_scale, int last_micro, double *loss);
/* Forward only (evaluation, sampling): this rank's summed loss; logits_out
 * [B*T, V] when not NULL. */
int st_fsdp_forward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                    float *logits_out, double *loss);
/* Global L2 norm of the gradient, each element counted once. */
int st_fsdp_grad_norm(st_fsdp *f, double *norm);
void st_fsdp_optimizer_step(st_fsdp *f, double lr, double grad_scale);
/* The full fp32 master parameters of unit u into out[numel] on every rank
 * of the shard group (a collective).  Returns an exit status. */
int st_fsdp_gather_master(st_fsdp *f, int u, float *out);

#endif
