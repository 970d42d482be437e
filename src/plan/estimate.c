/* Memory estimator (see estimate.h).  State and activations are the sizes
 * fsdp.c allocates.  The communication buffers are found by walking the
 * engine's own schedule (engine/schedule.h) for a step (up to two
 * micro-steps, which covers no_sync's buffers carried over) and adding up
 * the bytes each event allocates or frees as fsdp.c does: the gathered
 * units and their bf16 receive buffers (a bf16 gather sends the shard's
 * persistent bf16 copy, counted with the parameters), the full-size gradient buffers, and the
 * buffers of the reductions held.  The peak is taken at the moments the
 * engine's own peaks occur: when a gather starts, during a step's compute,
 * and right after a reduction starts while the previous one is still
 * held.
 *
 * The prefetch depth is read as an int, as it always was here (the engine
 * and the projection read the configured int64): the walks differ only for
 * a prefetch above INT_MAX, and the estimates stay those printed before
 * the schedule was shared. */
#include "plan/estimate.h"
#include "engine/schedule.h"
#include "kernels/cpu_model.h"

#include <string.h>

typedef struct {
    const st_model *m;
    st_sched sched;
    const st_sched_step *steps;  /* of the micro-step being walked */
    int S, R, bf16, reduce_bf16, no_sync;
    int64_t *padded, *shard;     /* the trained part (with LoRA, the adapters) */
    int64_t *gathered;           /* what a gather brings: trained + frozen part */
    int *has_grad;               /* full-size gradient buffer alive, per unit */
    double replicating;          /* held by the replicate all-reduce in flight */
    double comm, grad_comm, peak_comm, peak_grad;
    st_sched_trace *trace;       /* tests: the events walked, or NULL */
} sim;

static void note_peak(sim *s)
{
    if (s->comm > s->peak_comm) {
        s->peak_comm = s->comm;
        s->peak_grad = s->grad_comm;
    }
}

/* Both parts of a unit are gathered alike (fsdp.c's gather_start and
 * frozen_gather_start), so a gather counts their sum. */
static void gather_start(sim *s, int u)
{
    if (s->S == 1) {
        if (s->bf16)
            s->comm += 4.0 * (double)s->gathered[u];
        return;
    }
    s->comm += 4.0 * (double)s->gathered[u];
    if (s->bf16)
        s->comm += 2.0 * (double)s->gathered[u];
    note_peak(s);
}

static void gather_wait(sim *s, int u)
{
    if (s->bf16 && s->S > 1)
        s->comm -= 2.0 * (double)s->gathered[u];
}

static void release(sim *s, int u)
{
    if (s->S > 1 || s->bf16)
        s->comm -= 4.0 * (double)s->gathered[u];
}

static void grad_target(sim *s, int u)
{
    if ((s->S == 1 && s->R == 1) || s->has_grad[u])
        return;
    s->has_grad[u] = 1;
    s->comm += 4.0 * (double)s->padded[u];
    s->grad_comm += 4.0 * (double)s->padded[u];
}

/* A step's compute: the gradient buffers it writes come alive. */
static void compute(sim *s, int k)
{
    int us[2], n = st_sched_grad_units(&s->sched, &s->steps[k], us);
    for (int i = 0; i < n; i++)
        grad_target(s, us[i]);
    note_peak(s);  /* during the compute */
}

/* Buffers a reduction holds between start and finish, beyond full_grad. */
static double reduce_extra(const sim *s, int u)
{
    if (s->reduce_bf16)
        return 2.0 * (double)(s->padded[u] + s->shard[u]);
    return s->S > 1 ? 4.0 * (double)s->shard[u] : 0.0;
}

static void reduce_start(sim *s, int u)
{
    if (s->reduce_bf16) {  /* the full gradient is packed, then freed */
        s->comm += reduce_extra(s, u);
        note_peak(s);
        s->comm -= 4.0 * (double)s->padded[u];
        s->grad_comm -= 4.0 * (double)s->padded[u];
        s->has_grad[u] = 0;
    } else {
        s->comm += reduce_extra(s, u);
    }
    note_peak(s);  /* while the previous reduction is still held */
}

/* What unit u's replicate all-reduce (hybrid_shard) holds while in
 * flight past its reduce-scatter: its shard sum, bf16 or fp32. */
static double replicate_held(const sim *s, int u)
{
    return (s->reduce_bf16 ? 2.0 : 4.0) * (double)s->shard[u];
}

/* As fsdp.c's reduce_finish: the reduction's buffers are freed, except
 * (hybrid_shard) the one its replicate all-reduce works in, which stays
 * until the next reduction finishes or the micro-step ends; the previous
 * one's goes first.  no_shard's all-reduce is issued at reduce_start and
 * is the reduction itself: its buffers go here with the rest. */
static void reduce_finish(sim *s, int u)
{
    s->comm -= reduce_extra(s, u);
    if (s->has_grad[u]) {
        s->comm -= 4.0 * (double)s->padded[u];
        s->grad_comm -= 4.0 * (double)s->padded[u];
        s->has_grad[u] = 0;
    }
    if (s->R > 1 && s->S > 1) {
        s->comm += replicate_held(s, u) - s->replicating;
        s->replicating = replicate_held(s, u);
    }
}

static int on_event(void *ctx, st_sched_op op, int arg)
{
    sim *s = ctx;
    switch (op) {
    case ST_SCHED_GATHER_START: gather_start(s, arg); break;
    case ST_SCHED_GATHER_WAIT: gather_wait(s, arg); break;
    case ST_SCHED_COMPUTE: compute(s, arg); break;
    case ST_SCHED_REDUCE_START: reduce_start(s, arg); break;
    case ST_SCHED_REDUCE_FINISH: reduce_finish(s, arg); break;
    case ST_SCHED_RELEASE: release(s, arg); break;
    default: break;
    }
    return 0;
}

static void micro_step(sim *s, int sync)
{
    st_sched_step steps[st_sched_max_steps(s->m->L)];
    int n = st_sched_build_steps(&s->sched, 1, steps);
    s->steps = steps;
    st_sched_walk(&s->sched, steps, n, sync, on_event, s, s->trace);
    s->steps = NULL;
    s->comm -= s->replicating;  /* the last all-reduce, finished at the end */
    s->replicating = 0.0;
}

void st_estimate_memory(const st_model *m, const st_config *cfg, int strategy, int world,
                        int S, int ckpt, int64_t B, st_mem_estimate *out)
{
    st_estimate_memory_traced(m, cfg, strategy, world, S, ckpt, B, out, NULL);
}

void st_estimate_memory_traced(const st_model *m, const st_config *cfg, int strategy,
                               int world, int S, int ckpt, int64_t B, st_mem_estimate *out,
                               st_sched_trace *trace)
{
    memset(out, 0, sizeof *out);
    if (strategy == ST_STRAT_FULL_SHARD || strategy == ST_STRAT_SHARD_GRAD_OP)
        S = world;
    else if (strategy == ST_STRAT_NO_SHARD)
        S = 1;
    sim s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.S = S;
    s.R = world / S;
    s.bf16 = cfg->train.precision == ST_PREC_BF16;
    s.reduce_bf16 = cfg->parallel.reduce_dtype == ST_PREC_BF16;
    s.no_sync = cfg->parallel.no_sync;
    s.trace = trace;
    st_sched_init(&s.sched, m->L, m->tied, strategy, s.S, s.R, (int)cfg->parallel.prefetch);
    int nu = m->n_units;
    int64_t padded[nu], shard[nu], gathered[nu];
    int h[nu];
    s.padded = padded, s.shard = shard, s.gathered = gathered, s.has_grad = h;
    double shard_total = 0.0, frozen_total = 0.0, frozen_max = 0.0;
    for (int u = 0; u < nu; u++) {
        padded[u] = st_model_train_padded(m, u, S);
        shard[u] = padded[u] / S;
        shard_total += (double)shard[u];
        const int64_t fp = st_model_frozen_padded(m, u, S);
        frozen_total += (double)(fp / S);
        if ((double)(fp / S) > frozen_max)
            frozen_max = (double)(fp / S);
        gathered[u] = padded[u] + fp;
        h[u] = 0;
    }
    /* bf16 training keeps the shard's bf16 copy beside the fp32 master;
     * frozen base weights (LoRA) are kept in the compute dtype alone. */
    out->params = (s.bf16 ? 6.0 : 4.0) * shard_total + (s.bf16 ? 2.0 : 4.0) * frozen_total;
    out->grads = 4.0 * shard_total;
    out->optim = 8.0 * shard_total;

    int64_t N = B * m->T;
    size_t sets = ckpt == ST_ACKPT_FULL ? 1 : (size_t)m->L;
    out->activations = 4.0 * ((double)((m->L + 1) * N * m->C) +
                              (double)(sets * st_block_acts_floats(m, B)) +
                              (double)st_model_scratch_floats(m, B) + 2.0 * (double)(N * m->C)) +
                       2.0 * 2.0 * 4.0 * (double)N; /* input and target tokens, on the
                                                      * host and the engine's copy */
    /* Tables: the tensor table, units, rope tables, the engine's unit
     * records, the window, the step list and the engine's two sums (the
     * engine's AdamW segments, at most a tensor's 24 bytes each, are left
     * out: well under a kilobyte a layer). */
    out->other = (double)((m->L * 12 + 8 + m->n_lora_tensors) * sizeof(st_tensor)) +
                 (double)nu * 64.0 * 2 +
                 (m->arch == ST_ARCH_LLAMA ? 8.0 * (double)(m->T * (m->hd / 2)) : 0.0) +
                 4.0 * (double)(m->T + 1) + 8.0 * (double)(2 * m->L + 4) + 16.0;

    int64_t accum = cfg->train.global_batch / (B * world);
    if (accum < 1)
        accum = 1;
    /* Two micro-steps show everything: no_sync's first keeps its full
     * gradients into the second; without no_sync they are alike. */
    if (s.no_sync && accum > 1)
        micro_step(&s, 0);
    micro_step(&s, 1);
    out->gathered = s.peak_comm - s.peak_grad;
    out->grad_buffers = s.peak_grad;
    double state = out->params + out->grads + out->optim;
    out->peak = state + out->activations + out->other + s.peak_comm;
    /* Loading model.init stages this rank's slices of every unit on the
     * host at once, before they cross into the engine's shards (with
     * LoRA, the frozen part's slices, which bf16 packs through an fp32
     * copy of one unit's slice at a time). */
    if (strcmp(cfg->model.init, "random") != 0) {
        double load = state + out->activations + out->other +
                      4.0 * (m->lora.rank ? frozen_total : shard_total) +
                      (m->lora.rank && s.bf16 ? 4.0 * frozen_max : 0.0);
        if (load > out->peak)
            out->peak = load;
    }
}

int64_t st_estimate_max_micro_batch(const st_model *m, const st_config *cfg, int strategy,
                                    int world, int S, int ckpt, double device_bytes)
{
    int64_t best = 0;
    for (int64_t B = 1; B <= 4096; B *= 2) {
        st_mem_estimate e;
        st_estimate_memory(m, cfg, strategy, world, S, ckpt, B, &e);
        if (e.peak > device_bytes)
            break;
        best = B;
    }
    /* Refine between best and 2 x best, one at a time is cheap enough. */
    for (int64_t B = best + 1; best > 0 && B < 2 * best; B++) {
        st_mem_estimate e;
        st_estimate_memory(m, cfg, strategy, world, S, ckpt, B, &e);
        if (e.peak > device_bytes)
            break;
        best = B;
    }
    return best;
}
