/* The FSDP engine (see fsdp.h).  A micro-step is a fixed list of steps:
 *
 *   embed fwd, block 0..L-1 fwd, head fwd+bwd, block L-1..0 bwd, embed bwd
 *
 * each needing some units gathered (the head also needs the embedding when
 * the output weight is tied).  Before step k computes, the units of steps
 * after it are gathered ahead, up to `prefetch` gathers in flight; after
 * it, a unit is freed when nothing needs it any more, or, with
 * reshard-after-forward, when the next step does not need it.  A unit's
 * gradient is reduced when its last backward contribution is in (the
 * embedding's after the embed backward, since the tied head adds to it),
 * one unit behind the compute so the reduction overlaps the next unit.
 *
 * Unit memory is the kernels backend's (kernels.h): every op, copy and
 * reduction on it goes through f->k, and values the host needs (initial
 * weights, the loss, the norm) cross through to_host/from_host.  What the
 * engine does is set by its options (f->opt), never by the configuration
 * directly, and it opens no files. */
#include "engine/fsdp.h"
#include "base/alloc.h"

#include <math.h>
#include <string.h>

enum step_kind { STEP_EMBED_FWD, STEP_BLOCK_FWD, STEP_HEAD, STEP_BLOCK_BWD, STEP_EMBED_BWD };

typedef struct {
    int kind;
    int layer;
} step;

static int recompute(const st_fsdp *f)
{
    return f->opt.recompute;
}

static int head_unit(const st_fsdp *f) { return f->n_units - 1; }

/* Units a step reads the parameters of; returns how many (at most 2). */
static int step_units(const st_fsdp *f, const step *s, int out[2])
{
    switch (s->kind) {
    case STEP_EMBED_FWD: out[0] = 0; return 1;
    case STEP_BLOCK_FWD:
    case STEP_BLOCK_BWD: out[0] = s->layer + 1; return 1;
    case STEP_HEAD:
        out[0] = head_unit(f);
        if (f->model->tied) {
            out[1] = 0;
            return 2;
        }
        return 1;
    default: return 0; /* the embedding's backward needs only tokens */
    }
}

static int step_needs(const st_fsdp *f, const step *s, int u)
{
    int us[2], n = step_units(f, s, us);
    for (int i = 0; i < n; i++)
        if (us[i] == u)
            return 1;
    return 0;
}

/* ---- gathering ------------------------------------------------------- */

/* bf16 compute on a backend that reads bf16 words: the gathered unit is
 * the words as they arrive, never widened to fp32. */
static int keeps_words(const st_fsdp *f) { return f->pdt == ST_DT_BF16; }

static int gather_start(st_fsdp *f, int u)
{
    st_kernels *k = f->k;
    st_fsdp_unit *x = &f->units[u];
    if (x->state != UNIT_SHARDED)
        return 0;
    if (f->S == 1) {
        /* Nothing to gather: the shard is the unit.  bf16 compute still
         * needs the rounded copy an all-gather would have delivered. */
        if (keeps_words(f)) {
            uint16_t *w = k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->padded, ST_MEM_COMM);
            k->ops->pack_bf16(k, w, x->params, x->padded);
            x->full = w;
        } else if (f->bf16) {
            x->full = k->ops->alloc(k, sizeof(float) * (size_t)x->padded, ST_MEM_COMM);
            k->ops->round_bf16(k, x->full, x->params, x->padded);
        } else {
            x->full = x->params;
        }
        x->state = UNIT_GATHERED;
        return 0;
    }
    if (!keeps_words(f))
        x->full = k->ops->alloc(k, sizeof(float) * (size_t)x->padded, ST_MEM_COMM);
    int rc;
    if (f->bf16) {
        x->gather_send = k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->shard, ST_MEM_COMM);
        x->gather_recv = k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->padded, ST_MEM_COMM);
        k->ops->pack_bf16(k, x->gather_send, x->params, x->shard);
        rc = st_comm_allgather(f->groups->shard, x->gather_send, x->gather_recv, x->shard,
                               ST_DT_BF16, &x->gather_req, st_desc("unit", u));
    } else {
        rc = st_comm_allgather(f->groups->shard, x->params, x->full, x->shard, ST_DT_F32,
                               &x->gather_req, st_desc("unit", u));
    }
    x->state = UNIT_GATHERING;
    f->in_flight++;
    return rc;
}

static int gather_wait(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    if (x->state != UNIT_GATHERING)
        return 0;
    int rc = st_comm_wait(&x->gather_req);
    if (f->bf16) {
        if (keeps_words(f)) {
            x->full = x->gather_recv;
        } else {
            f->k->ops->unpack_bf16(f->k, x->full, x->gather_recv, x->padded);
            f->k->ops->free(f->k, x->gather_recv);
        }
        f->k->ops->free(f->k, x->gather_send);
        x->gather_send = x->gather_recv = NULL;
    }
    x->state = UNIT_GATHERED;
    f->in_flight--;
    return rc;
}

static int release(st_fsdp *f, int u)
{
    st_fsdp_unit *x = &f->units[u];
    int rc = gather_wait(f, u);
    if (x->state == UNIT_GATHERED && x->full != x->params)
        f->k->ops->free(f->k, x->full);
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
 * DDP) all-reduce over the replicate group, then add into the shard. */
typedef struct {
    int unit;                /* -1: none */
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
    if (f->S == 1 && f->R == 1)
        return 0;
    int rc = 0;
    if (f->reduce_bf16) {
        p->send16 = k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->padded, ST_MEM_COMM);
        p->recv16 = k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->shard, ST_MEM_COMM);
        k->ops->pack_bf16(k, p->send16, x->full_grad, x->padded);
        k->ops->free(k, x->full_grad);
        x->full_grad = NULL;
        if (f->S > 1)
            rc = st_comm_reduce_scatter(f->groups->shard, p->send16, p->recv16, x->shard,
                                        ST_DT_BF16, &p->req, st_desc(GRAD_OF, u));
        else
            k->ops->copy(k, p->recv16, p->send16, sizeof(uint16_t) * (size_t)x->shard);
    } else if (f->S > 1) {
        p->shard_sum = k->ops->alloc(k, sizeof(float) * (size_t)x->shard, ST_MEM_COMM);
        rc = st_comm_reduce_scatter(f->groups->shard, x->full_grad, p->shard_sum, x->shard,
                                    ST_DT_F32, &p->req, st_desc(GRAD_OF, u));
    } else {
        /* S == 1: the full gradient is the shard; hand the buffer over. */
        p->shard_sum = x->full_grad;
        x->full_grad = NULL;
    }
    return rc;
}

static int reduce_finish(st_fsdp *f, pending_reduce *p)
{
    if (p->unit < 0)
        return 0;
    st_kernels *k = f->k;
    st_fsdp_unit *x = &f->units[p->unit];
    int rc = st_comm_wait(&p->req);
    if (f->S > 1 && !f->reduce_bf16) {
        k->ops->free(k, x->full_grad);
        x->full_grad = NULL;
    }
    if (!rc && f->R > 1) {
        if (f->reduce_bf16)
            rc = st_comm_allreduce_now(f->groups->replicate, p->recv16, x->shard, ST_DT_BF16,
                                       st_desc(GRAD_OF, p->unit));
        else if (p->shard_sum)
            rc = st_comm_allreduce_now(f->groups->replicate, p->shard_sum, x->shard, ST_DT_F32,
                                       st_desc(GRAD_OF, p->unit));
    }
    if (f->reduce_bf16 && p->recv16) {
        p->shard_sum = k->ops->alloc(k, sizeof(float) * (size_t)x->shard, ST_MEM_COMM);
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
    return rc;
}

/* ---- the schedule ---------------------------------------------------- */

static float *res_at(const st_fsdp *f, int64_t l)
{
    return f->res + (size_t)l * (size_t)(f->B * f->model->T * f->model->C);
}

static void *block_acts_mem(const st_fsdp *f, int64_t layer)
{
    return (char *)f->acts + (recompute(f) ? 0 : (size_t)layer * f->acts_bytes);
}

/* Gather ahead for the steps after k, up to `prefetch` gathers in flight. */
static int prefetch_after(st_fsdp *f, const step *steps, int n, int k)
{
    int rc = 0;
    for (int j = k + 1; j < n && f->in_flight < f->opt.prefetch; j++) {
        int us[2], m = step_units(f, &steps[j], us);
        for (int i = 0; i < m && f->in_flight < f->opt.prefetch; i++)
            if (f->units[us[i]].state == UNIT_SHARDED)
                rc = rc ? rc : gather_start(f, us[i]);
    }
    return rc;
}

/* Free the units of step k that no step needs soon enough. */
static int release_after(st_fsdp *f, const step *steps, int n, int k)
{
    int us[2], m = step_units(f, &steps[k], us), rc = 0;
    for (int i = 0; i < m; i++) {
        int next = -1;
        for (int j = k + 1; j < n && next < 0; j++)
            if (step_needs(f, &steps[j], us[i]))
                next = j;
        if (next < 0 || (f->reshard_after_forward && next != k + 1))
            rc = rc ? rc : release(f, us[i]);
    }
    return rc;
}

typedef struct {
    float grad_scale;        /* 0: forward only */
    int sync;                /* reduce gradients this micro-step */
    float *logits_out;       /* backend memory, or NULL */
} step_args;

static int run_step(st_fsdp *f, const step *s, step_args *a, pending_reduce *pend)
{
    const st_model *m = f->model;
    st_kernels *k = f->k;
    const int H = head_unit(f);
    int u = -1, rc = 0;
    switch (s->kind) {
    case STEP_EMBED_FWD:
        k->ops->embed_forward(k, m, f->units[0].full, f->pdt, f->inputs, f->B, res_at(f, 0));
        return 0;
    case STEP_BLOCK_FWD:
        k->ops->block_forward(k, m, f->units[s->layer + 1].full, f->pdt, f->B,
                              res_at(f, s->layer), res_at(f, s->layer + 1),
                              block_acts_mem(f, s->layer));
        return 0;
    case STEP_HEAD: {
        const int train = a->grad_scale != 0.0f;
        float *hg = train ? grad_target(f, H) : NULL;
        float *eg = train && m->tied ? grad_target(f, 0) : NULL;
        k->ops->head_forward_backward(k, m, f->units[H].full,
                                      m->tied ? f->units[0].full : NULL, f->pdt, hg, eg, f->B,
                                      res_at(f, m->L), f->targets, a->grad_scale, f->dres_a,
                                      a->logits_out, f->scratch, &f->sums[0]);
        if (!train)
            return 0;
        u = H;
        break;
    }
    case STEP_BLOCK_BWD: {
        int64_t l = s->layer;
        void *acts = block_acts_mem(f, l);
        /* Rebuild this block's activations from its saved input; the output
         * lands in a buffer nothing reads any more. */
        if (recompute(f))
            k->ops->block_forward(k, m, f->units[l + 1].full, f->pdt, f->B, res_at(f, l),
                                  res_at(f, l + 1), acts);
        /* dres ping-pongs: block L-1 reads dres_a (from the head). */
        int flip = (int)((m->L - 1 - l) % 2);
        float *dout = flip ? f->dres_b : f->dres_a, *din = flip ? f->dres_a : f->dres_b;
        k->ops->block_backward(k, m, f->units[l + 1].full, f->pdt, grad_target(f, (int)l + 1),
                               f->B, res_at(f, l), acts, dout, din, f->scratch);
        u = (int)l + 1;
        break;
    }
    case STEP_EMBED_BWD: {
        float *dout = m->L % 2 ? f->dres_b : f->dres_a;
        k->ops->embed_backward(k, m, grad_target(f, 0), f->inputs, f->B, dout);
        u = 0;
        break;
    }
    }
    if (a->sync && !(f->S == 1 && f->R == 1)) {
        /* One behind: finish the previous unit's reduction, start this one. */
        pending_reduce next;
        rc = reduce_start(f, u, &next);
        int rc2 = reduce_finish(f, pend);
        *pend = next;
        rc = rc ? rc : rc2;
    }
    return rc;
}

static int run_schedule(st_fsdp *f, const step *steps, int n, step_args *a)
{
    pending_reduce pend;
    memset(&pend, 0, sizeof pend);
    pend.unit = -1;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int us[2], m = step_units(f, &steps[k], us);
        for (int i = 0; i < m && !rc; i++) {
            rc = gather_start(f, us[i]);
            rc = rc ? rc : gather_wait(f, us[i]);
        }
        rc = rc ? rc : prefetch_after(f, steps, n, k);
        rc = rc ? rc : run_step(f, &steps[k], a, &pend);
        rc = rc ? rc : release_after(f, steps, n, k);
    }
    int rc2 = reduce_finish(f, &pend);
    return rc ? rc : rc2;
}

static int build_steps(const st_fsdp *f, step *steps, int train)
{
    const int L = (int)f->model->L;
    int n = 0;
    steps[n++] = (step){STEP_EMBED_FWD, -1};
    for (int l = 0; l < L; l++)
        steps[n++] = (step){STEP_BLOCK_FWD, l};
    steps[n++] = (step){STEP_HEAD, -1};
    if (train) {
        for (int l = L - 1; l >= 0; l--)
            steps[n++] = (step){STEP_BLOCK_BWD, l};
        steps[n++] = (step){STEP_EMBED_BWD, -1};
    }
    return n;
}

/* The micro-batch's tokens into backend memory, and the loss sum cleared. */
static void begin_micro(st_fsdp *f, const int32_t *inputs, const int32_t *targets)
{
    size_t bytes = sizeof(int32_t) * (size_t)(f->B * f->model->T);
    f->k->ops->from_host(f->k, f->inputs, inputs, bytes);
    f->k->ops->from_host(f->k, f->targets, targets, bytes);
    f->k->ops->zero(f->k, &f->sums[0], sizeof(double));
}

/* The loss crosses to the host once per micro-step, after the whole
 * schedule is queued: the one point a device backend waits. */
static void end_micro(st_fsdp *f, double *loss)
{
    f->k->ops->to_host(f->k, loss, &f->sums[0], sizeof(double));
}

int st_fsdp_forward_backward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                             float grad_scale, int last_micro, double *loss)
{
    step *steps = st_alloc(sizeof(step) * (size_t)(2 * f->model->L + 4), ST_MEM_OTHER);
    int n = build_steps(f, steps, 1);
    step_args a = {grad_scale, !f->opt.no_sync || last_micro, NULL};
    begin_micro(f, inputs, targets);
    int rc = run_schedule(f, steps, n, &a);
    end_micro(f, loss);
    st_free(steps);
    return rc;
}

int st_fsdp_forward(st_fsdp *f, const int32_t *inputs, const int32_t *targets,
                    float *logits_out, double *loss)
{
    const st_model *m = f->model;
    size_t logit_bytes = sizeof(float) * (size_t)(f->B * m->T * m->V);
    step *steps = st_alloc(sizeof(step) * (size_t)(2 * m->L + 4), ST_MEM_OTHER);
    int n = build_steps(f, steps, 0);
    step_args a = {0.0f, 0,
                   logits_out ? f->k->ops->alloc(f->k, logit_bytes, ST_MEM_OTHER) : NULL};
    begin_micro(f, inputs, targets);
    int rc = run_schedule(f, steps, n, &a);
    /* Evaluation keeps nothing gathered afterwards. */
    for (int u = 0; u < f->n_units; u++)
        rc = rc ? rc : release(f, u);
    end_micro(f, loss);
    if (logits_out) {
        f->k->ops->to_host(f->k, logits_out, a.logits_out, logit_bytes);
        f->k->ops->free(f->k, a.logits_out);
    }
    st_free(steps);
    return rc;
}

/* ---- set-up, optimizer, norms ----------------------------------------- */

static float *array_of(const st_fsdp_unit *x, st_fsdp_array a)
{
    switch (a) {
    case ST_FSDP_GRADS: return x->grads;
    case ST_FSDP_ADAM_M: return x->adam_m;
    case ST_FSDP_ADAM_V: return x->adam_v;
    default: return x->params;
    }
}

void st_fsdp_shard_to_host(const st_fsdp *f, int u, st_fsdp_array a, int64_t off, int64_t n,
                           float *dst)
{
    f->k->ops->to_host(f->k, dst, array_of(&f->units[u], a) + off, sizeof(float) * (size_t)n);
}

void st_fsdp_shard_from_host(st_fsdp *f, int u, st_fsdp_array a, int64_t off, int64_t n,
                             const float *src)
{
    f->k->ops->from_host(f->k, array_of(&f->units[u], a) + off, src,
                         sizeof(float) * (size_t)n);
}

int st_fsdp_create(st_fsdp *f, const st_model *m, const st_fsdp_options *opt,
                   st_groups *groups, st_kernels *k)
{
    memset(f, 0, sizeof *f);
    f->model = m;
    f->opt = *opt;
    f->groups = groups;
    f->k = k;
    f->S = groups ? groups->layout.shard_size : 1;
    f->R = groups ? groups->layout.replicate_size : 1;
    f->shard_rank = groups ? groups->layout.shard_rank : 0;
    f->reshard_after_forward = opt->reshard_after_forward;
    f->bf16 = opt->bf16;
    f->reduce_bf16 = opt->reduce_bf16;
    f->pdt = f->bf16 && k->params_bf16 ? ST_DT_BF16 : ST_DT_F32;
    f->B = opt->micro_batch;
    f->n_units = m->n_units;
    f->units = st_alloc(sizeof(st_fsdp_unit) * (size_t)m->n_units, ST_MEM_OTHER);
    for (int u = 0; u < m->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        x->numel = m->units[u].numel;
        x->padded = (x->numel + f->S - 1) / f->S * f->S;
        x->shard = x->padded / f->S;
        x->lo = (int64_t)f->shard_rank * x->shard;
        size_t bytes = sizeof(float) * (size_t)x->shard;
        x->params = k->ops->alloc(k, bytes, ST_MEM_PARAMS);
        x->grads = k->ops->alloc(k, bytes, ST_MEM_GRADS);
        x->adam_m = k->ops->alloc(k, bytes, ST_MEM_OPTIM);
        x->adam_v = k->ops->alloc(k, bytes, ST_MEM_OPTIM);
        x->state = UNIT_SHARDED;
    }
    int64_t N = f->B * m->T;
    f->res = k->ops->alloc(k, sizeof(float) * (size_t)((m->L + 1) * N * m->C), ST_MEM_ACTS);
    size_t sets = recompute(f) ? 1 : (size_t)m->L;
    f->acts_bytes = k->ops->block_acts_bytes(k, m, f->B);
    f->acts = k->ops->alloc(k, sets * f->acts_bytes, ST_MEM_ACTS);
    f->scratch = k->ops->alloc(k, k->ops->scratch_bytes(k, m, f->B), ST_MEM_ACTS);
    f->dres_a = k->ops->alloc(k, sizeof(float) * (size_t)(N * m->C), ST_MEM_ACTS);
    f->dres_b = k->ops->alloc(k, sizeof(float) * (size_t)(N * m->C), ST_MEM_ACTS);
    f->inputs = k->ops->alloc(k, sizeof(int32_t) * (size_t)N, ST_MEM_ACTS);
    f->targets = k->ops->alloc(k, sizeof(int32_t) * (size_t)N, ST_MEM_ACTS);
    f->sums = k->ops->alloc(k, 2 * sizeof(double), ST_MEM_OTHER);
    return 0;
}

void st_fsdp_destroy(st_fsdp *f)
{
    if (!f->units)
        return;
    st_kernels *k = f->k;
    for (int u = 0; u < f->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        release(f, u);
        k->ops->free(k, x->params);
        k->ops->free(k, x->grads);
        k->ops->free(k, x->adam_m);
        k->ops->free(k, x->adam_v);
        k->ops->free(k, x->full_grad);
    }
    st_free(f->units);
    k->ops->free(k, f->res);
    k->ops->free(k, f->acts);
    k->ops->free(k, f->scratch);
    k->ops->free(k, f->dres_a);
    k->ops->free(k, f->dres_b);
    k->ops->free(k, f->inputs);
    k->ops->free(k, f->targets);
    k->ops->free(k, f->sums);
    memset(f, 0, sizeof *f);
}

void st_fsdp_zero_grads(st_fsdp *f)
{
    for (int u = 0; u < f->n_units; u++)
        f->k->ops->zero(f->k, f->units[u].grads, sizeof(float) * (size_t)f->units[u].shard);
}

int st_fsdp_grad_norm(st_fsdp *f, double *norm)
{
    /* Shards partition each unit inside a shard group, and every replicate
     * holds the same reduced shard, so summing over the shard group counts
     * each element once.  The sum stays in backend memory through the
     * all-reduce and crosses to the host once per step. */
    double *ss = &f->sums[1], host = 0.0;
    f->k->ops->zero(f->k, ss, sizeof(double));
    for (int u = 0; u < f->n_units; u++)
        f->k->ops->sumsq(f->k, f->units[u].grads, f->units[u].shard, ss);
    int rc = 0;
    if (f->S > 1)
        rc = st_comm_allreduce_now(f->groups->shard, ss, 1, ST_DT_F64,
                                   st_desc("the gradient norm", -1));
    f->k->ops->to_host(f->k, &host, ss, sizeof host);
    *norm = sqrt(host);
    return rc;
}

void st_fsdp_optimizer_step(st_fsdp *f, double lr, double grad_scale)
{
    const st_model *m = f->model;
    const double b1 = f->opt.adamw.beta1, b2 = f->opt.adamw.beta2, eps = f->opt.adamw.eps;
    f->opt_steps++;
    /* Each tensor's part inside this rank's slice, with its own decay. */
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        st_fsdp_unit *x = &f->units[t->unit];
        int64_t a = t->offset > x->lo ? t->offset : x->lo;
        int64_t b = t->offset + t->numel < x->lo + x->shard ? t->offset + t->numel
                                                             : x->lo + x->shard;
        if (a >= b)
            continue;
        int64_t off = a - x->lo;
        f->k->ops->adamw(f->k, x->params + off, x->grads + off, x->adam_m + off,
                         x->adam_v + off, b - a, lr, b1, b2, eps,
                         t->decay ? f->opt.adamw.weight_decay : 0.0, grad_scale, f->opt_steps);
    }
}

int st_fsdp_gather_master(st_fsdp *f, int u, float *out)
{
    st_fsdp_unit *x = &f->units[u];
    if (f->S == 1) {
        f->k->ops->to_host(f->k, out, x->params, sizeof(float) * (size_t)x->numel);
        return 0;
    }
    float *full = f->k->ops->alloc(f->k, sizeof(float) * (size_t)x->padded, ST_MEM_COMM);
    st_comm_req r = {0};
    int rc = st_comm_allgather(f->groups->shard, x->params, full, x->shard, ST_DT_F32, &r,
                               st_desc("the master weights of unit", u));
    rc = rc ? rc : st_comm_wait(&r);
    f->k->ops->to_host(f->k, out, full, sizeof(float) * (size_t)x->numel);
    f->k->ops->free(f->k, full);
    return rc;
}
