/* The FSDP engine (see fsdp.h).  It executes the events of the schedule
 * (schedule.h), which owns the step list and decides when each unit is
 * gathered, released and reduced; here each event becomes buffers and
 * collectives: a gather allocates the full unit and all-gathers into it, a
 * release frees it, a reduction reduce-scatters (and, hybrid or DDP,
 * all-reduces) the full gradient into the shard.  Training in bf16, each
 * shard keeps a bf16 copy of its parameters that the optimizer writes with
 * the update (one adamw_unit call per unit, on segments made at set-up), so
 * a gather sends the words as they are instead of packing the shard.
 *
 * Unit memory is the kernels backend's (kernels.h): every op, copy and
 * reduction on it goes through f->k, and values the host needs (initial
 * weights, the loss, the norm) cross through to_host/from_host.  Whether a
 * step's update applies is decided in backend memory too (step_verdict.c).  What the
 * engine does is set by its options (f->opt), never by the configuration
 * directly, and it opens no files. */
#include "engine/fsdp.h"
#include "engine/fsdp_impl.h"
#include "base/alloc.h"
#include "base/log.h"

#include <math.h>
#include <string.h>

static int recompute(const st_fsdp *f)
{
    return f->opt.recompute;
}

static int head_unit(const st_fsdp *f) { return f->n_units - 1; }

/* ---- gathering ------------------------------------------------------- */

/* bf16 compute on a backend that reads bf16 words: the gathered unit is
 * the words as they arrive, never widened to fp32. */
static int keeps_words(const st_fsdp *f) { return f->pdt == ST_DT_BF16; }

/* The shard's bf16 copy (bf16 training), packed here only when something
 * other than the optimizer wrote the fp32 shard since (set-up, a
 * checkpoint, an import): every other gather finds the optimizer's words
 * and sends them without a pass over the shard. */
static uint16_t *shard_words(st_fsdp *f, st_fsdp_unit *x)
{
    if (!x->params16_fresh) {
        f->k->ops->pack_bf16(f->k, x->params16, x->params, x->shard);
        x->params16_fresh = 1;
    }
    return x->params16;
}

/* One flat buffer's gather, for both parts of a unit.  src is this rank's
 * shard as it travels: bf16 words in bf16 compute, else fp32.  With one
 * rank in the shard group the shard is the unit: the words as they are
 * (a backend that reads them), widened (unpacking packed words gives
 * round_bf16's bits), or the fp32 shard itself. */
static void *buf_local(st_fsdp *f, void *src, int64_t padded)
{
    if (!f->bf16 || keeps_words(f))
        return src;
    /* Raw: the unpack writes it whole (so do the collectives every raw
     * buffer of this file receives, and the packs). */
    float *w = f->k->ops->alloc_raw(f->k, sizeof(float) * (size_t)padded, ST_MEM_COMM);
    f->k->ops->unpack_bf16(f->k, w, src, padded);
    return w;
}

static int buf_gather_start(st_fsdp *f, const void *src, int64_t shard, int64_t padded,
                            void **full, uint16_t **recv, st_comm_req *req, const char *what,
                            int u)
{
    st_kernels *k = f->k;
    if (!keeps_words(f))
        *full = k->ops->alloc_raw(k, sizeof(float) * (size_t)padded, ST_MEM_COMM);
    if (f->bf16) {
        *recv = k->ops->alloc_raw(k, sizeof(uint16_t) * (size_t)padded, ST_MEM_COMM);
        return st_comm_allgather(f->groups->shard, src, *recv, shard, ST_DT_BF16, req,
                                 st_desc(what, u));
    }
    return st_comm_allgather(f->groups->shard, src, *full, shard, ST_DT_F32, req,
                             st_desc(what, u));
}

static int buf_gather_wait(st_fsdp *f, int64_t padded, void **full, uint16_t **recv,
                           st_comm_req *req)
{
    int rc = st_comm_wait(req);
    if (f->bf16) {
        if (keeps_words(f)) {
            *full = *recv;
        } else {
            f->k->ops->unpack_bf16(f->k, *full, *recv, padded);
            f->k->ops->free(f->k, *recv);
        }
        *recv = NULL;
    }
    return rc;
}

/* The frozen part (LoRA's base weights) is started and waited with the
 * trained part; its shard is stored in the compute dtype, so it is sent
 * as it is. */
static int frozen_gather_start(st_fsdp *f, int u)
{
    st_fsdp_frozen *z = &f->units[u].frozen;
    if (!z->numel)
        return 0;
    if (f->S == 1) {
        z->full = buf_local(f, z->store, z->padded);
        return 0;
    }
    return buf_gather_start(f, z->store, z->shard, z->padded, &z->full, &z->gather_recv,
                            &z->gather_req, "frozen unit", u);
}

static int frozen_gather_wait(st_fsdp *f, int u)
{
    st_fsdp_frozen *z = &f->units[u].frozen;
    if (!z->numel || f->S == 1)
        return 0;
    return buf_gather_wait(f, z->padded, &z->full, &z->gather_recv, &z->gather_req);
}

static void frozen_release(st_fsdp *f, int u)
{
    st_fsdp_frozen *z = &f->units[u].frozen;
    if (z->full != z->store)
        f->k->ops->free(f->k, z->full);
    z->full = NULL;
}

static int gather_start(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    if (x->state != UNIT_SHARDED)
        return 0;
    int frc = frozen_gather_start(f, u);
    if (!x->numel) {
        /* Nothing trains here (LoRA's embedding and head). */
        x->state = f->S == 1 || !x->frozen.numel ? UNIT_GATHERED : UNIT_GATHERING;
        return frc;
    }
    /* bf16 compute sends (or, alone, computes on) the shard's bf16 copy. */
    void *src = f->bf16 ? (void *)shard_words(f, x) : (void *)x->params;
    if (f->S == 1) {
        x->full = buf_local(f, src, x->padded);
        x->state = UNIT_GATHERED;
        return frc;
    }
    int rc = buf_gather_start(f, src, x->shard, x->padded, &x->full, &x->gather_recv,
                              &x->gather_req, "unit", u);
    x->state = UNIT_GATHERING;
    return frc ? frc : rc;
}

static int gather_wait(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    if (x->state != UNIT_GATHERING)
        return 0;
    int frc = frozen_gather_wait(f, u);
    int rc = x->numel ? buf_gather_wait(f, x->padded, &x->full, &x->gather_recv,
                                        &x->gather_req)
                      : 0;
    x->state = UNIT_GATHERED;
    return frc ? frc : rc;
}

int st_fsdp_release_unit(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    int rc = gather_wait(f, u);
    /* The shard itself or its bf16 copy (one rank) is not the gather's. */
    if (x->state == UNIT_GATHERED && x->full != x->params && x->full != x->params16)
        f->k->ops->free(f->k, x->full);
    if (x->state == UNIT_GATHERED)
        frozen_release(f, u);
    x->full = NULL;
    x->state = UNIT_SHARDED;
    return rc;
}

/* ---- gradient reduction ---------------------------------------------- */

#define GRAD_OF "the gradient of unit"

/* Where backward accumulates unit u's gradient.  One rank alone adds
 * straight into its (whole-unit) shard; otherwise into a full-size buffer
 * that is reduced when the unit's backward is complete. */
static float *grad_target(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    if (f->S == 1 && f->R == 1)
        return x->grads;
    if (!x->full_grad)
        x->full_grad = f->k->ops->alloc(f->k, sizeof(float) * (size_t)x->padded, ST_MEM_COMM);
    return x->full_grad;
}

/* A reduction in flight: reduce-scatter over the shard group, then (hybrid,
 * DDP) all-reduce over the replicate group, then add into the shard.
 * The replicate all-reduce of unit u is issued when u's reduce-scatter is
 * waited for (reduce_finish), and finished (waited for, added into the
 * shard) one reduction later, just before the next unit's all-reduce is
 * issued, or at the micro-step's end (replicate_finish).  Unit u's
 * reduce-scatter is waited for after unit u-1's backward, so its all-reduce
 * runs on the wire while unit u-2's backward computes instead of stalling
 * the compute stream; one replicate all-reduce at most is in flight.
 * Order across groups: every rank walks the same schedule, so every rank
 * issues the two groups' collectives in one and the same sequence (u's
 * all-reduce after u's reduce-scatter and after the next unit's
 * reduce-scatter).  The nccl backend runs all of them on one stream in
 * that sequence (comm_nccl.c), which is what keeps the two communicators
 * from deadlocking; changing this order means changing it on every rank.
 * no_shard (S == 1) has no reduce-scatter to wait for, so there the
 * all-reduce is issued at once, in reduce_start, and is itself the
 * reduction reduce_finish waits for: unit u's runs while unit u-1's
 * backward computes, one unit earlier than the hybrid order allows, and
 * the replicate group is the only group, so no order across groups
 * arises. */
typedef struct {
    int unit;                /* -1: none */
    int allreduced;          /* no_shard: req is the all-reduce itself */
    st_comm_req req;
    float *shard_sum;        /* [shard] */
    uint16_t *send16, *recv16;
} pending_reduce;

static int reduce_start(st_fsdp *f, int u, pending_reduce *p)
{
    st_kernels *k = f->k;
    st_fsdp_unit *x = &f->units[u];
    memset(p, 0, sizeof *p);
    p->unit = u;
    if ((f->S == 1 && f->R == 1) || !x->numel)
        return 0;
    int rc = 0;
    if (f->reduce_bf16) {
        p->send16 = k->ops->alloc_raw(k, sizeof(uint16_t) * (size_t)x->padded, ST_MEM_COMM);
        p->recv16 = k->ops->alloc_raw(k, sizeof(uint16_t) * (size_t)x->shard, ST_MEM_COMM);
        k->ops->pack_bf16(k, p->send16, x->full_grad, x->padded);
        k->ops->free(k, x->full_grad);
        x->full_grad = NULL;
        if (f->S > 1)
            rc = st_comm_reduce_scatter(f->groups->shard, p->send16, p->recv16, x->shard,
                                        ST_DT_BF16, &p->req, st_desc(GRAD_OF, u));
        else
            k->ops->copy(k, p->recv16, p->send16, sizeof(uint16_t) * (size_t)x->shard);
    } else if (f->S > 1) {
        p->shard_sum = k->ops->alloc_raw(k, sizeof(float) * (size_t)x->shard, ST_MEM_COMM);
        rc = st_comm_reduce_scatter(f->groups->shard, x->full_grad, p->shard_sum, x->shard,
                                    ST_DT_F32, &p->req, st_desc(GRAD_OF, u));
    } else {
        /* S == 1: the full gradient is the shard; hand the buffer over. */
        p->shard_sum = x->full_grad;
        x->full_grad = NULL;
    }
    if (!rc && f->S == 1 && f->R > 1) {
        void *sum = f->reduce_bf16 ? (void *)p->recv16 : (void *)p->shard_sum;
        rc = st_comm_allreduce(f->groups->replicate, sum, x->shard,
                               f->reduce_bf16 ? ST_DT_BF16 : ST_DT_F32, &p->req,
                               st_desc(GRAD_OF, u));
        p->allreduced = 1;
    }
    return rc;
}

/* Adds a reduced shard sum into the unit's shard and frees the buffers. */
static void reduce_add(st_fsdp *f, pending_reduce *p)
{
    st_kernels *k = f->k;
    st_fsdp_unit *x = &f->units[p->unit];
    if (f->reduce_bf16 && p->recv16) {
        p->shard_sum = k->ops->alloc_raw(k, sizeof(float) * (size_t)x->shard, ST_MEM_COMM);
        k->ops->unpack_bf16(k, p->shard_sum, p->recv16, x->shard);
        k->ops->add_inplace(k, x->grads, p->shard_sum, x->shard);
    } else if (p->shard_sum) {
        k->ops->add_inplace(k, x->grads, p->shard_sum, x->shard);
    }
    k->ops->free(k, p->shard_sum);
    k->ops->free(k, p->send16);
    k->ops->free(k, p->recv16);
    memset(p, 0, sizeof *p);
    p->unit = -1;
}

/* The replicate all-reduce in flight, if any: waited for and added. */
static int replicate_finish(st_fsdp *f, pending_reduce *rep)
{
    if (rep->unit < 0)
        return 0;
    int rc = st_comm_wait(&rep->req);
    reduce_add(f, rep);
    return rc;
}

/* Waits for p's reduce-scatter.  One group (R == 1): adds the sum into the
 * shard.  Otherwise finishes the replicate all-reduce in flight (rep),
 * issues p's, and hands p over to rep. */
static int reduce_finish(st_fsdp *f, pending_reduce *p, pending_reduce *rep)
{
    if (p->unit < 0)
        return 0;
    st_kernels *k = f->k;
    st_fsdp_unit *x = &f->units[p->unit];
    if (!x->numel) {
        p->unit = -1;
        return 0;
    }
    int rc = st_comm_wait(&p->req);
    if (p->allreduced) {     /* no_shard: the all-reduce was the reduction */
        reduce_add(f, p);
        return rc;
    }
    if (f->S > 1 && !f->reduce_bf16) {
        k->ops->free(k, x->full_grad);
        x->full_grad = NULL;
    }
    void *sum = f->reduce_bf16 ? (void *)p->recv16 : (void *)p->shard_sum;
    if (!rc && f->R > 1 && sum) {
        rc = replicate_finish(f, rep);
        /* the reduce-scatter's send buffer is spent */
        k->ops->free(k, p->send16);
        p->send16 = NULL;
        if (!rc)
            rc = st_comm_allreduce(f->groups->replicate, sum, x->shard,
                                   f->reduce_bf16 ? ST_DT_BF16 : ST_DT_F32, &p->req,
                                   st_desc(GRAD_OF, p->unit));
        *rep = *p;
        memset(p, 0, sizeof *p);
        p->unit = -1;
        return rc;
    }
    reduce_add(f, p);
    return rc;
}

/* ---- executing the schedule ------------------------------------------ */

static void *res_at(const st_fsdp *f, int64_t l)
{
    return (char *)f->res +
           (size_t)l * (size_t)(f->B * f->model->T * f->model->C) * (size_t)f->k->act_bytes;
}

static void *block_acts_mem(const st_fsdp *f, int64_t layer)
{
    return (char *)f->acts + (recompute(f) ? 0 : (size_t)layer * f->acts_bytes);
}

typedef struct {
    int train;               /* the walk has the backward: the head computes gradients */
    float grad_scale;
    float *logits_out;       /* backend memory, or NULL */
} step_args;

/* With LoRA the base weights are the frozen part and have no gradient;
 * without it they are the trained part. */
static int frozen_base(const st_fsdp *f) { return f->model->lora.rank > 0; }

static const void *base_params(const st_fsdp *f, int u)
{
    return frozen_base(f) ? f->units[u].frozen.full : f->units[u].full;
}

static float *base_grad(st_fsdp *f, int u)
{
    return frozen_base(f) ? NULL : grad_target(f, u);
}

/* The block's adapters for one call: NULL without LoRA; dropout only in
 * training. */
static const st_lora_args *lora_for(st_fsdp *f, int64_t layer, int train, st_lora_args *la)
{
    if (!frozen_base(f))
        return NULL;
    const int u = (int)layer + 1;
    *la = (st_lora_args){f->units[u].full, train ? grad_target(f, u) : NULL, layer,
                         train ? f->model->lora.dropout : 0.0, f->sample.seed,
                         f->sample.step, f->sample.first_seq};
    return la;
}

static void run_head(st_fsdp *f, const step_args *a)
{
    const st_model *m = f->model;
    const int H = head_unit(f);
    /* The schedule reduces the head's gradient after every training head
     * step, so a training walk always has one to reduce. */
    float *hg = a->train ? base_grad(f, H) : NULL;
    float *eg = a->train && m->tied ? base_grad(f, 0) : NULL;
    f->k->ops->head_forward_backward(f->k, m, base_params(f, H), m->tied ? base_params(f, 0) : NULL,
                                f->pdt, hg, eg, f->B, res_at(f, m->L), f->targets,
                                a->grad_scale, f->dres_a, a->logits_out, f->scratch,
                                &f->sums[ST_FSDP_LOSS + f->n_losses]);
}

static void run_block_backward(st_fsdp *f, int64_t l)
{
    const st_model *m = f->model;
    st_kernels *k = f->k;
    void *acts = block_acts_mem(f, l);
    /* Rebuild this block's activations from its saved input; the output
     * lands in a buffer nothing reads any more. */
    st_lora_args la;
    const st_lora_args *lora = lora_for(f, l, 1, &la);
    if (recompute(f))
        k->ops->block_forward(k, m, base_params(f, (int)l + 1), f->pdt, lora, f->B,
                              res_at(f, l), res_at(f, l + 1), acts, f->scratch);
    /* dres ping-pongs: block L-1 reads dres_a (from the head). */
    int flip = (int)((m->L - 1 - l) % 2);
    void *dout = flip ? f->dres_b : f->dres_a, *din = flip ? f->dres_a : f->dres_b;
    k->ops->block_backward(k, m, base_params(f, (int)l + 1), f->pdt, base_grad(f, (int)l + 1),
                           lora, f->B, res_at(f, l), acts, dout, din, f->scratch);
}

static void run_step(st_fsdp *f, const st_sched_step *s, const step_args *a)
{
    const st_model *m = f->model;
    st_kernels *k = f->k;
    switch (s->kind) {
    case ST_STEP_EMBED_FWD:
        k->ops->embed_forward(k, m, base_params(f, 0), f->pdt, f->inputs, f->B, res_at(f, 0));
        break;
    case ST_STEP_BLOCK_FWD: {
        st_lora_args la;
        k->ops->block_forward(k, m, base_params(f, (int)s->layer + 1), f->pdt,
                              lora_for(f, s->layer, a->train, &la), f->B, res_at(f, s->layer),
                              res_at(f, s->layer + 1), block_acts_mem(f, s->layer), f->scratch);
        break;
    }
    case ST_STEP_HEAD: run_head(f, a); break;
    case ST_STEP_BLOCK_BWD: run_block_backward(f, s->layer); break;
    case ST_STEP_EMBED_BWD: {
        /* A frozen embedding (LoRA) has no gradient to make. */
        const void *dout = m->L % 2 ? f->dres_b : f->dres_a;
        if (!frozen_base(f))
            k->ops->embed_backward(k, m, grad_target(f, 0), f->inputs, f->B, dout);
        break;
    }
    }
}

/* What the walk hands each event: the steps, the compute's arguments, the
 * reductions held (the schedule keeps at most two), and the replicate
 * all-reduce in flight. */
typedef struct {
    st_fsdp *f;
    const st_sched_step *steps;
    const step_args *a;
    pending_reduce held[ST_SCHED_MAX_REDUCING];
    pending_reduce replicating;
} executor;

/* The held reduction of unit u (-1: a free slot). */
static pending_reduce *held_reduce(executor *x, int u)
{
    for (int i = 0; i < ST_SCHED_MAX_REDUCING; i++)
        if (x->held[i].unit == u)
            return &x->held[i];
    /* The walk holds at most ST_SCHED_MAX_REDUCING and finishes only
     * what it started: no slot is a broken schedule. */
    st_bug("no reduction slot for unit %d", u);
}

/* Whether the event finds work to do: the trace records what the engine
 * did, so a schedule that asks for a gather of a gathered unit shows. */
static int acts_on(const st_fsdp *f, st_sched_op op, int u)
{
    switch (op) {
    case ST_SCHED_GATHER_START: return f->units[u].state == UNIT_SHARDED;
    case ST_SCHED_GATHER_WAIT: return f->units[u].state == UNIT_GATHERING;
    case ST_SCHED_RELEASE: return f->units[u].state != UNIT_SHARDED;
    default: return 1;
    }
}

static int execute(void *ctx, st_sched_op op, int arg)
{
    executor *x = ctx;
    st_fsdp *f = x->f;
    if (f->trace && acts_on(f, op, arg))
        st_sched_trace_add(f->trace, op, arg);
    switch (op) {
    case ST_SCHED_GATHER_START: return gather_start(f, arg);
    case ST_SCHED_GATHER_WAIT: return gather_wait(f, arg);
    case ST_SCHED_COMPUTE: run_step(f, &x->steps[arg], x->a); return 0;
    case ST_SCHED_REDUCE_START: return reduce_start(f, arg, held_reduce(x, -1));
    case ST_SCHED_REDUCE_FINISH:
        return reduce_finish(f, held_reduce(x, arg), &x->replicating);
    case ST_SCHED_RELEASE: return st_fsdp_release_unit(f, arg);
    default: return 0;
    }
}

/* One micro-step: the step list (counted memory, as estimate.c expects)
 * walked with each event executed. */
static int run_micro_step(st_fsdp *f, int sync, const step_args *a)
{
    st_sched_step *steps =
        st_alloc(sizeof(st_sched_step) * (size_t)st_sched_max_steps(f->model->L), ST_MEM_OTHER);
    int n = st_sched_build_steps(&f->sched, a->train, steps);
    executor x = {.f = f, .steps = steps, .a = a};
    for (int i = 0; i < ST_SCHED_MAX_REDUCING; i++)
        x.held[i].unit = -1;
    x.replicating.unit = -1;
    /* The trace is the engine's own record of what it acted on, not the
     * walk's. */
    int rc = st_sched_walk(&f->sched, steps, n, sync, execute, &x, NULL);
    /* The last unit's replicate all-reduce: the step's gradient is whole
     * only after it (a failed walk leaves it, as it leaves the others: the
     * ranks may no longer agree on what is in flight). */
    if (!rc)
        rc = replicate_finish(f, &x.replicating);
    st_free(steps);
    return rc;
}

/* The micro-batch's tokens into backend memory, and its loss slot (the
 * n_losses-th, made room for) cleared.  Each micro-batch keeps its own
 * sum, which the host adds up in order after the step's one read: the
 * same additions, so the same bits, as reading each micro-batch's. */
static void begin_micro(st_fsdp *f, const int32_t *inputs, const int32_t *targets)
{
    size_t bytes = sizeof(int32_t) * (size_t)(f->B * f->model->T);
    f->k->ops->from_host(f->k, f->inputs, inputs, bytes);
    f->k->ops->from_host(f->k, f->targets, targets, bytes);
    if (f->n_losses == f->loss_cap) {
        int cap = 2 * f->loss_cap;
        size_t old = sizeof(double) * (size_t)(ST_FSDP_LOSS + f->loss_cap);
        double *sums = f->k->ops->alloc(f->k, sizeof(double) * (size_t)(ST_FSDP_LOSS + cap),
                                        ST_MEM_OTHER);
        f->k->ops->copy(f->k, sums, f->sums, old);
        f->k->ops->free(f->k, f->sums);
        f->sums = sums;
        f->loss_cap = cap;
    }
    f->k->ops->zero(f->k, &f->sums[ST_FSDP_LOSS + f->n_losses], sizeof(double));
}

/* Forward only: its loss crosses to the host at once, after the whole
 * schedule is queued. */
static void end_micro(st_fsdp *f, double *loss)
{
    f->k->ops->to_host(f->k, loss, &f->sums[ST_FSDP_LOSS], sizeof(double));
}

static int norm_sumsq_start(st_fsdp *f);

int st_fsdp_forward_backward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                             float grad_scale, int last_micro, double *loss)
{
    step_args a = {1, grad_scale, NULL};
    begin_micro(f, inputs, targets);
    f->norm_fresh = ST_NORM_STALE;
    int rc = run_micro_step(f, !f->opt.no_sync || last_micro, &a);
    f->n_losses++;
    if (loss)
        *loss = 0.0;
    if (rc || !last_micro)
        return rc;
    /* The step's gradients are complete (queued): their norm is queued
     * behind them.  Without a loss wanted, everything stays queued for
     * the step verdict; else the norm's sums and every micro-batch's loss,
     * adjacent in sums, cross to the host in one read. */
    rc = norm_sumsq_start(f);
    f->grads_from_host = 0;
    if (!loss) {
        f->norm_fresh = rc ? ST_NORM_STALE : ST_NORM_QUEUED;
        return rc;
    }
    const int n = ST_FSDP_LOSS + f->n_losses;
    double *all = st_alloc(sizeof(double) * (size_t)n, ST_MEM_OTHER);
    f->k->ops->to_host(f->k, all, f->sums, sizeof(double) * (size_t)n);
    f->norm_sumsq = all[0];
    f->norm_local = all[1];
    for (int i = ST_FSDP_LOSS; i < n; i++)
        *loss += all[i];
    st_free(all);
    f->norm_fresh = rc ? ST_NORM_STALE : ST_NORM_READ;
    f->n_losses = 0;
    return rc;
}

int st_fsdp_forward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                    float *logits_out, double *loss)
{
    const st_model *m = f->model;
    size_t logit_bytes = sizeof(float) * (size_t)(f->B * m->T * m->V);
    step_args a = {0, 0.0f, logits_out ? f->k->ops->alloc(f->k, logit_bytes, ST_MEM_OTHER) : NULL};
    /* Not inside a training step: its own loss, in the first slot. */
    f->n_losses = 0;
    begin_micro(f, inputs, targets);
    int rc = run_micro_step(f, 0, &a);
    /* Evaluation keeps nothing gathered afterwards. */
    for (int u = 0; u < f->n_units; u++)
        rc = rc ? rc : st_fsdp_release_unit(f, u);
    end_micro(f, loss);
    if (logits_out) {
        f->k->ops->to_host(f->k, logits_out, a.logits_out, logit_bytes);
        f->k->ops->free(f->k, a.logits_out);
    }
    return rc;
}

/* ---- optimizer and norms (set-up and host access: fsdp_state.c) ------- */

/* The gradient's sum of squares into sums[0] and this rank's part of it
 * into sums[1], queued (backend memory throughout; no wait). */
static int norm_sumsq_start(st_fsdp *f)
{
    /* Shards partition each unit inside a shard group, and every replicate
     * holds the same reduced shard, so summing over the shard group counts
     * each element once. */
    double *ss = &f->sums[0];
    f->k->ops->zero(f->k, ss, sizeof(double));
    for (int u = 0; u < f->n_units; u++)
        f->k->ops->sumsq(f->k, f->units[u].grads, f->units[u].shard, ss);
    f->k->ops->copy(f->k, &f->sums[1], ss, sizeof(double));
    if (f->S > 1)
        return st_comm_allreduce_now(f->groups->shard, ss, 1, ST_DT_F64,
                                     st_desc("the gradient norm", -1));
    return 0;
}

/* Every rank takes the same branch at the collective: norm_fresh changes
 * only in calls every rank makes.  grads_from_host is one rank's: its
 * part of the sum is recomputed and swapped in, locally (a NaN written
 * there reaches this rank's norm, and through the train loop's agreement
 * every rank's verdict), and the device's sum with it, for the clip. */
int st_fsdp_grad_norm(st_fsdp *f, double *norm)
{
    int rc = 0;
    if (f->norm_fresh == ST_NORM_STALE) {
        rc = norm_sumsq_start(f);
        f->grads_from_host = 0;
        f->norm_fresh = ST_NORM_QUEUED;
    }
    if (f->norm_fresh == ST_NORM_QUEUED) {
        double both[2];
        f->k->ops->to_host(f->k, both, &f->sums[0], sizeof both);
        f->norm_sumsq = both[0];
        f->norm_local = both[1];
        f->norm_fresh = ST_NORM_READ;
    }
    if (f->grads_from_host) {
        double *local = &f->sums[1], now = 0.0;
        f->k->ops->zero(f->k, local, sizeof(double));
        for (int u = 0; u < f->n_units; u++)
            f->k->ops->sumsq(f->k, f->units[u].grads, f->units[u].shard, local);
        f->k->ops->to_host(f->k, &now, local, sizeof now);
        f->norm_sumsq += now - f->norm_local;
        f->norm_local = now;
        f->k->ops->from_host(f->k, &f->sums[0], &f->norm_sumsq, sizeof(double));
        f->grads_from_host = 0;
    }
    *norm = sqrt(f->norm_sumsq);
    return rc;
}

void st_fsdp_optimizer_step(st_fsdp *f, double lr, double clip)
{
    /* Gated, the device decides whether the update runs and counts it
     * (step_verdict.c); the host's count catches up when it reads. */
    const double *gate = f->gate_open ? f->verdicts : NULL;
    f->gate_open = 0;
    if (!gate)
        f->opt_steps++;
    /* The clip is read where the update runs, from the sum of squares that
     * the norm left in backend memory (sums[0]): no host value in the
     * update. */
    const st_adamw_args a = {lr, f->opt.adamw.beta1, f->opt.adamw.beta2, f->opt.adamw.eps,
                             f->opt.adamw.weight_decay, 1.0, f->opt_steps,
                             clip > 0.0 ? &f->sums[0] : NULL, clip, gate};
    /* One call per unit (one launch on a device).  A stale bf16 copy is
     * left stale, not updated in part: the next gather packs all of it. */
    for (int u = 0; u < f->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        if (x->n_segs)
            f->k->ops->adamw_unit(f->k, x->segs, x->n_segs, x->params, x->grads, x->adam_m,
                                  x->adam_v, x->params16_fresh ? x->params16 : NULL, &a);
    }
}
