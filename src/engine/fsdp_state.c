/* The FSDP engine's set-up, teardown and host access (see fsdp.h): the
 * shards' allocation for both parts of every unit, AdamW's segments, and
 * the copies between the shards (backend memory) and the host that
 * initial weights, checkpoints, final weights and test hooks go through.
 * What runs a step (gathers, the schedule, reductions, the optimizer) is
 * fsdp.c's. */
#include "engine/fsdp.h"
#include "engine/fsdp_impl.h"
#include "base/alloc.h"

#include <string.h>

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
    /* New parameters from outside: the bf16 copy no longer says them;
     * new gradients: this rank's part of the norm read with the loss no
     * longer says them (rank-local: st_fsdp_grad_norm mends it without a
     * collective, which the other ranks would not join). */
    if (a == ST_FSDP_PARAMS)
        f->units[u].params16_fresh = 0;
    if (a == ST_FSDP_GRADS)
        f->grads_from_host = 1;
    f->k->ops->from_host(f->k, array_of(&f->units[u], a) + off, src,
                         sizeof(float) * (size_t)n);
}

/* Each unit's AdamW segments: the part of every tensor inside this rank's
 * slice, with the tensor's decay, adjacent parts of the same decay merged
 * (AdamW is elementwise, so the bits do not depend on the split).  Made
 * once: the step then costs one adamw_unit call per unit. */
static void build_segments(st_fsdp *f)
{
    const st_model *m = f->model;
    for (int u = 0; u < f->n_units; u++)
        f->units[u].n_segs = 0;
    const int nt = st_model_n_train_tensors(m);
    for (int i = 0; i < nt; i++)
        f->units[st_model_train_tensor(m, i)->unit].n_segs++;
    for (int u = 0; u < f->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        x->segs = st_alloc(sizeof(st_adamw_segment) * (size_t)(x->n_segs ? x->n_segs : 1),
                           ST_MEM_OTHER);
        x->n_segs = 0;
    }
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = st_model_train_tensor(m, i);
        st_fsdp_unit *x = &f->units[t->unit];
        int64_t a = t->offset > x->lo ? t->offset : x->lo;
        int64_t b = t->offset + t->numel < x->lo + x->shard ? t->offset + t->numel
                                                             : x->lo + x->shard;
        if (a >= b)
            continue;
        st_adamw_segment *last = x->n_segs ? &x->segs[x->n_segs - 1] : NULL;
        if (last && last->offset + last->length == a - x->lo && last->decay == !!t->decay)
            last->length += b - a;
        else
            x->segs[x->n_segs++] = (st_adamw_segment){a - x->lo, b - a, !!t->decay};
    }
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
    st_sched_init_rule(&f->sched, m->L, m->tied, opt->reshard_after_forward, f->S, f->R,
                       opt->prefetch);
    f->bf16 = opt->bf16;
    f->reduce_bf16 = opt->reduce_bf16;
    f->pdt = f->bf16 && k->params_bf16 ? ST_DT_BF16 : ST_DT_F32;
    f->B = opt->micro_batch;
    f->n_units = m->n_units;
    f->units = st_alloc(sizeof(st_fsdp_unit) * (size_t)m->n_units, ST_MEM_OTHER);
    for (int u = 0; u < m->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        x->numel = st_model_train_numel(m, u);
        /* With the vocabulary tail (model.h): zeros past numel, sharded
         * and gathered like the padding to a multiple of S. */
        x->padded = st_model_train_padded(m, u, f->S);
        x->shard = x->padded / f->S;
        x->lo = (int64_t)f->shard_rank * x->shard;
        size_t bytes = sizeof(float) * (size_t)x->shard;
        if (x->numel) {
            x->params = k->ops->alloc(k, bytes, ST_MEM_PARAMS);
            x->grads = k->ops->alloc(k, bytes, ST_MEM_GRADS);
            x->adam_m = k->ops->alloc(k, bytes, ST_MEM_OPTIM);
            x->adam_v = k->ops->alloc(k, bytes, ST_MEM_OPTIM);
            /* Stale until the first gather packs it (params are about to
             * be loaded anyway). */
            if (f->bf16)
                x->params16 =
                    k->ops->alloc(k, sizeof(uint16_t) * (size_t)x->shard, ST_MEM_PARAMS);
        }
        st_fsdp_frozen *z = &x->frozen;
        z->numel = st_model_frozen_numel(m, u);
        z->padded = st_model_frozen_padded(m, u, f->S);
        z->shard = z->padded / f->S;
        z->lo = (int64_t)f->shard_rank * z->shard;
        if (z->numel)
            z->store = k->ops->alloc(k, (f->bf16 ? sizeof(uint16_t) : sizeof(float)) *
                                            (size_t)z->shard, ST_MEM_PARAMS);
        x->state = UNIT_SHARDED;
    }
    build_segments(f);
    int64_t N = f->B * m->T;
    /* The residual stream and its gradient in the backend's activation
     * type (kernels.h, act_bytes): bf16 words on a device in bf16 mode. */
    const size_t ab = (size_t)k->act_bytes;
    f->res = k->ops->alloc(k, ab * (size_t)((m->L + 1) * N * m->C), ST_MEM_ACTS);
    size_t sets = f->opt.recompute ? 1 : (size_t)m->L;
    f->acts_bytes = k->ops->block_acts_bytes(k, m, f->B);
    f->acts = k->ops->alloc(k, sets * f->acts_bytes, ST_MEM_ACTS);
    f->scratch = k->ops->alloc(k, k->ops->scratch_bytes(k, m, f->B), ST_MEM_ACTS);
    f->dres_a = k->ops->alloc(k, ab * (size_t)(N * m->C), ST_MEM_ACTS);
    f->dres_b = k->ops->alloc(k, ab * (size_t)(N * m->C), ST_MEM_ACTS);
    f->inputs = k->ops->alloc(k, sizeof(int32_t) * (size_t)N, ST_MEM_ACTS);
    f->targets = k->ops->alloc(k, sizeof(int32_t) * (size_t)N, ST_MEM_ACTS);
    f->loss_cap = 1;
    f->sums = k->ops->alloc(k, sizeof(double) * (ST_FSDP_LOSS + 1), ST_MEM_OTHER);
    return 0;
}

void st_fsdp_destroy(st_fsdp *f)
{
    if (!f->units)
        return;
    st_kernels *k = f->k;
    for (int u = 0; u < f->n_units; u++) {
        st_fsdp_unit *x = &f->units[u];
        st_fsdp_release_unit(f, u);
        k->ops->free(k, x->params);
        k->ops->free(k, x->grads);
        k->ops->free(k, x->adam_m);
        k->ops->free(k, x->adam_v);
        k->ops->free(k, x->params16);
        k->ops->free(k, x->full_grad);
        k->ops->free(k, x->frozen.store);
        st_free(x->segs);
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
    k->ops->free(k, f->verdicts);
    st_free(f->verdicts_host);
    memset(f, 0, sizeof *f);
}

void st_fsdp_zero_grads(st_fsdp *f)
{
    f->norm_fresh = ST_NORM_STALE;
    for (int u = 0; u < f->n_units; u++)
        if (f->units[u].numel)
            f->k->ops->zero(f->k, f->units[u].grads,
                            sizeof(float) * (size_t)f->units[u].shard);
}

void st_fsdp_set_sample(st_fsdp *f, uint64_t seed, uint64_t step, int64_t first_seq)
{
    f->sample.seed = seed;
    f->sample.step = step;
    f->sample.first_seq = first_seq;
}

void st_fsdp_frozen_from_host(st_fsdp *f, int u, int64_t off, int64_t n, const float *src)
{
    st_kernels *k = f->k;
    st_fsdp_frozen *z = &f->units[u].frozen;
    if (!f->bf16) {
        k->ops->from_host(k, (float *)z->store + off, src, sizeof(float) * (size_t)n);
        return;
    }
    float *tmp = k->ops->alloc(k, sizeof(float) * (size_t)n, ST_MEM_COMM);
    k->ops->from_host(k, tmp, src, sizeof(float) * (size_t)n);
    k->ops->pack_bf16(k, (uint16_t *)z->store + off, tmp, n);
    k->ops->free(k, tmp);
}

/* The stored words widened to fp32 (bf16) or the floats, gathered. */
int st_fsdp_gather_frozen(st_fsdp *f, int u, float *out)
{
    st_kernels *k = f->k;
    st_fsdp_frozen *z = &f->units[u].frozen;
    float *mine = z->store;
    if (f->bf16) {
        mine = k->ops->alloc(k, sizeof(float) * (size_t)z->shard, ST_MEM_COMM);
        k->ops->unpack_bf16(k, mine, z->store, z->shard);
    }
    int rc = 0;
    if (f->S == 1) {
        k->ops->to_host(k, out, mine, sizeof(float) * (size_t)z->numel);
    } else {
        float *full = k->ops->alloc(k, sizeof(float) * (size_t)z->padded, ST_MEM_COMM);
        st_comm_req r = {0};
        rc = st_comm_allgather(f->groups->shard, mine, full, z->shard, ST_DT_F32, &r,
                               st_desc("the frozen weights of unit", u));
        rc = rc ? rc : st_comm_wait(&r);
        k->ops->to_host(k, out, full, sizeof(float) * (size_t)z->numel);
        k->ops->free(k, full);
    }
    if (mine != z->store)
        k->ops->free(k, mine);
    return rc;
}

int st_fsdp_gather_master(st_fsdp *f, int u, float *out)
{
    st_fsdp_unit *x = &f->units[u];
    if (f->S == 1) {
        if (out)
            f->k->ops->to_host(f->k, out, x->params, sizeof(float) * (size_t)x->numel);
        return 0;
    }
    float *full = f->k->ops->alloc(f->k, sizeof(float) * (size_t)x->padded, ST_MEM_COMM);
    st_comm_req r = {0};
    int rc = st_comm_allgather(f->groups->shard, x->params, full, x->shard, ST_DT_F32, &r,
                               st_desc("the master weights of unit", u));
    rc = rc ? rc : st_comm_wait(&r);
    if (out)
        f->k->ops->to_host(f->k, out, full, sizeof(float) * (size_t)x->numel);
    f->k->ops->free(f->k, full);
    return rc;
}
