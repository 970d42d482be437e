/* The FSDP engine: sharded parameters, gradients and optimizer state, and
 * the execution of the unit-by-unit gather / compute / free /
 * reduce-scatter schedule (the schedule itself is schedule.h's).
 *
 * Each unit's parameters (model.h) form one flat buffer, padded to a
 * multiple of the shard group size S.  A rank stores only its contiguous
 * slice of the fp32 master parameters, the gradients and AdamW's two
 * moments (and, training in bf16, a bf16 copy of its parameters that the
 * optimizer writes with each update, so that a gather sends it as it is).
 * Before a unit computes, its slices are all-gathered over the
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
 * The engine talks to other ranks only through comm.h and computes only
 * through kernels.h, so it knows neither which backend carries the bytes
 * nor where they live.  Every buffer below marked (backend) is kernels
 * memory: host code must not dereference it, but copy through the
 * st_fsdp_shard_* functions (or the backend's to_host/from_host).  With
 * groups == NULL it runs one rank with no communication at all (tests,
 * tools).
 *
 * The engine reads no configuration and no files: the layer above decides
 * its options (st_fsdp_options, train/engine_setup.c fills them from the
 * configuration) and fills the fresh shards with the initial weights
 * through st_fsdp_shard_from_host. */
#ifndef ST_FSDP_H
#define ST_FSDP_H

#include <stdint.h>

#include "comm/comm.h"
#include "comm/groups.h"
#include "engine/schedule.h"
#include "kernels/kernels.h"
#include "model/model.h"

/* Where each unit's buffers stand: sharded, all-gather in flight, or
 * gathered (the schedule's own record of the same is schedule.c's). */
typedef enum { UNIT_SHARDED, UNIT_GATHERING, UNIT_GATHERED } st_unit_state;

/* The frozen part of a unit (LoRA's base weights): sharded and gathered
 * like the trained part, but stored only in the compute dtype, with no
 * gradient and no optimizer state.  numel 0 without LoRA. */
typedef struct {
    int64_t numel, padded, shard, lo;
    void *store;             /* [shard]: bf16 words in bf16 compute, else fp32 (backend) */
    void *full;              /* gathered, of dtype st_fsdp.pdt (backend) */
    st_comm_req gather_req;
    uint16_t *gather_recv;
} st_fsdp_frozen;

/* A unit's trained part: the whole unit, or with LoRA its adapters (the
 * base weights are then `frozen`).  A unit whose part is empty (LoRA's
 * embedding and head) has numel 0: nothing is stored, gathered or
 * reduced for it. */
typedef struct {
    int64_t numel;           /* unpadded element count */
    int64_t padded;          /* numel rounded up to a multiple of S */
    int64_t shard;           /* padded / S: elements this rank owns */
    int64_t lo;              /* first element of this rank's slice */
    float *params, *grads, *adam_m, *adam_v;   /* [shard], fp32 (backend) */
    /* Gathered parameters in the compute dtype (backend), of dtype
     * st_fsdp.pdt: fp32, bf16 values stored as rounded floats, or, when the
     * backend takes them (params_bf16), the bf16 words themselves. */
    void *full;
    st_unit_state state;
    st_comm_req gather_req;
    uint16_t *gather_recv;   /* bf16 all-gather destination (backend) */
    /* AdamW's description of this shard (host memory), made once at
     * set-up: the parts of the unit's tensors inside [lo, lo + shard). */
    st_adamw_segment *segs;
    int n_segs;
    /* bf16 training: the shard's parameters packed to bf16 (backend,
     * [shard]), what the next gather sends (or, one rank with a backend
     * that keeps bf16 words, the gathered unit itself).  The optimizer
     * writes it with each update; anything else that writes params
     * (st_fsdp_shard_from_host) marks it stale, and the next gather packs
     * it afresh.  NULL in fp32. */
    uint16_t *params16;
    int params16_fresh;      /* params16 == st_pack_bf16(params), every element */
    /* Full-size gradient being accumulated (no_sync, tied embeddings). */
    float *full_grad;
    st_fsdp_frozen frozen;
} st_fsdp_unit;

/* How the engine runs, decided by the layer above (the strategy itself is
 * in the groups it is given, and in reshard_after_forward). */
typedef struct {
    int64_t micro_batch;         /* B: sequences per micro-batch */
    int reshard_after_forward;   /* free gathered units between forward and backward
                                  * (all strategies but shard_grad_op) */
    int bf16;                    /* compute in bf16 (train.precision) */
    int reduce_bf16;             /* reduce gradients in bf16 (parallel.reduce_dtype) */
    int64_t prefetch;            /* gathers in flight ahead of the compute */
    int no_sync;                 /* reduce gradients only on the last micro-batch */
    int recompute;               /* recompute each block's activations in backward
                                  * (activation checkpointing) instead of keeping them */
    struct {
        double beta1, beta2, eps, weight_decay;
    } adamw;
} st_fsdp_options;

typedef struct {
    const st_model *model;
    st_fsdp_options opt;
    st_groups *groups;       /* NULL: one rank, no communication */
    st_kernels *k;
    int S, R;                /* shard and replicate group sizes */
    int shard_rank;
    st_sched sched;          /* the gather / release / reduce schedule */
    int bf16;                /* compute dtype */
    int reduce_bf16;         /* reduce_dtype */
    st_dtype pdt;            /* what the ops read: bf16 words only with params_bf16 */
    int64_t B;
    int n_units;
    st_fsdp_unit *units;
    /* Activations (backend). */
    void *res;               /* residual stream: n_layer + 1 buffers of [B*T, C],
                              * elements of the backend's act_bytes */
    void *acts;              /* block activations: n_layer sets, or one when recomputing */
    size_t acts_bytes;       /* of one set */
    void *scratch;
    void *dres_a, *dres_b;   /* its gradient, ping-ponged; act_bytes elements */
    int32_t *inputs, *targets;   /* this micro-batch's tokens [B*T] (backend) */
    double *sums;            /* (backend) the gradient's sum of squares, this rank's
                              * part of it, then each micro-batch's loss: ST_FSDP_LOSS */
    int n_losses, loss_cap;  /* micro-batches of the open step; slots in sums */
    int norm_fresh;          /* enum st_fsdp_norm_state: where the step's norm is */
    int grads_from_host;     /* this rank's gradients were written since (a test hook) */
    double norm_sumsq, norm_local;   /* host copies of sums[0] and sums[1] */
    /* Applied updates.  Under the step verdict (step_verdict.c) the device
     * counts them (the gate) and this is brought up to date when the
     * verdicts are read; it loads the gate at the first verdict. */
    int64_t opt_steps;
    /* The step verdict (backend): the gate (ST_GATE_N doubles), then one
     * record (ST_VERDICT_N doubles) per step not yet read, so that one
     * read brings both. */
    double *verdicts;
    int n_verdicts, verdict_cap;
    int gate_live;           /* the gate holds opt_steps and the run so far */
    int gate_open;           /* a verdict awaits its optimizer step */
    struct st_fsdp_verdict *verdicts_host;   /* the last read's records */
    /* LoRA dropout's key for the next training micro-batch
     * (st_fsdp_set_sample). */
    struct {
        uint64_t seed, step;
        int64_t first_seq;
    } sample;
    /* Tests only: when set, each schedule event the engine acts on is
     * appended here.  NULL in every run of the tool. */
    st_sched_trace *trace;
} st_fsdp;

/* Where micro-batch i's loss sum lies in sums. */
#define ST_FSDP_LOSS 2

/* norm_fresh: the gradient's sum of squares since the gradients changed. */
enum st_fsdp_norm_state {
    ST_NORM_STALE,           /* not computed */
    ST_NORM_QUEUED,          /* computed in backend memory (sums[0], sums[1]) only */
    ST_NORM_READ             /* and read: norm_sumsq, norm_local */
};

/* One step's verdict as read by the host (step_gate.h's record). */
typedef struct st_fsdp_verdict {
    double loss_sum;         /* summed over every rank and micro-batch */
    double bad_ranks;        /* ranks whose loss or norm was not finite; 0: finite */
    double sumsq;            /* the gradient's global sum of squares */
    int applied;             /* the update ran (finite, and no stop before it) */
} st_fsdp_verdict;

/* Allocate this rank's shards on backend k, zeroed: the caller loads the
 * initial weights (st_fsdp_shard_from_host, ST_FSDP_PARAMS).  Returns an
 * exit status. */
int st_fsdp_create(st_fsdp *f, const st_model *m, const st_fsdp_options *opt,
                   st_groups *groups, st_kernels *k);
void st_fsdp_destroy(st_fsdp *f);

void st_fsdp_zero_grads(st_fsdp *f);
/* Which samples the next training micro-batch holds, for LoRA's dropout
 * mask: the run's seed, the 0-based step and the global index of its first
 * sequence (the others follow it). */
void st_fsdp_set_sample(st_fsdp *f, uint64_t seed, uint64_t step, int64_t first_seq);
/* Forward and backward of one micro-batch on this rank (inputs and targets
 * in host memory); gradients land in the shards (reduced over every rank)
 * unless no_sync defers it to the micro-batch with last_micro set.  The
 * last micro-batch also queues the gradient's norm.  The loss stays in
 * backend memory: with loss NULL it stays there for st_fsdp_step_verdict
 * (no host wait at all); otherwise *loss is 0 before the last micro-batch,
 * and there this rank's summed loss over the micro-batches since the
 * previous last one (so summing *loss over a step gives the step's), read
 * together with the norm in one device-to-host read. */
int st_fsdp_forward_backward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                             float grad_scale, int last_micro, double *loss);
/* Forward only (evaluation, sampling): this rank's summed loss; logits_out
 * [B*T, V] (host memory) when not NULL. */
int st_fsdp_forward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                    float *logits_out, double *loss);
/* Global L2 norm of the gradient, each element counted once: the value
 * read with the last micro-batch's loss when the gradients have not
 * changed since (no read), else computed and read now. */
int st_fsdp_grad_norm(st_fsdp *f, double *norm);
/* One AdamW update of every shard, the gradient clipped to norm clip (0:
 * not clipped) by st_clip_factor of the sum of squares that the last
 * st_fsdp_forward_backward or st_fsdp_grad_norm left in backend memory,
 * read there by the update, not by the host.  After st_fsdp_step_verdict
 * it is gated: it runs only where the verdict's gate lets it, and counts
 * itself on the device; else it always runs and counts opt_steps. */
void st_fsdp_optimizer_step(st_fsdp *f, double lr, double clip);

/* The step verdict (step_verdict.c, kernels/step_gate.h): after the step's
 * last st_fsdp_forward_backward (loss NULL), this rank's record of the
 * step (its loss sums, finite or not, the norm; force_bad: not finite
 * whatever the values), summed over every rank by a collective, then the
 * gate advanced (limit: train.nonfinite_limit).  All queued: the host
 * learns nothing yet.  Returns an exit status. */
int st_fsdp_step_verdict(st_fsdp *f, int force_bad, int64_t limit);
/* Steps whose verdict is queued and not yet read. */
int st_fsdp_verdicts_pending(const st_fsdp *f);
/* Read every pending record and the gate in one device-to-host read (the
 * host wait of a logged step): *out points at n records, oldest first,
 * valid until the next call; opt_steps becomes the gate's count.  Returns
 * n. */
int st_fsdp_read_verdicts(st_fsdp *f, const st_fsdp_verdict **out);
/* The full fp32 master parameters of unit u into out[numel] (host memory)
 * on every rank of the shard group (a collective).  out NULL: take part in
 * the gather (the group's other ranks need this rank's shard) and keep
 * nothing, for a rank that does not write.  Returns an exit status. */
int st_fsdp_gather_master(st_fsdp *f, int u, float *out);

/* The frozen base weights of unit u (LoRA): elements [off, off + n) of
 * this rank's shard from host fp32 (rounded to bf16 in bf16 compute), and
 * the whole unit, as computed with, into out[numel] on every rank of the
 * shard group (a collective; returns an exit status). */
void st_fsdp_frozen_from_host(st_fsdp *f, int u, int64_t off, int64_t n, const float *src);
int st_fsdp_gather_frozen(st_fsdp *f, int u, float *out);

/* Host access to this rank's shards (checkpoints, test hooks): elements
 * [off, off + n) of unit u's shard of one array, copied to or from host
 * memory.  Callers stage large shards in pieces of ST_FSDP_STAGE elements
 * so that the host buffer stays small whatever the model. */
typedef enum { ST_FSDP_PARAMS, ST_FSDP_GRADS, ST_FSDP_ADAM_M, ST_FSDP_ADAM_V } st_fsdp_array;
#define ST_FSDP_STAGE ((int64_t)1 << 18)
void st_fsdp_shard_to_host(const st_fsdp *f, int u, st_fsdp_array a, int64_t off, int64_t n,
                           float *dst);
void st_fsdp_shard_from_host(st_fsdp *f, int u, st_fsdp_array a, int64_t off, int64_t n,
                             const float *src);

#endif
