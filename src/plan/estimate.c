/* Memory estimator (see estimate.h).  State and activations are the sizes
 * fsdp.c allocates.  The communication buffers are found by replaying the
 * engine's schedule for a step (up to two micro-steps, which covers
 * no_sync's buffers carried over): which units are gathered when, with
 * `prefetch` gathers issued ahead, freed under the strategy's rule, which
 * full-size gradient buffers are alive, and the reduction kept one unit
 * behind.  The peak is taken at the moments the engine's own peaks occur:
 * during a step's compute, and right after a reduction starts while the
 * previous one is still held. */
#include "plan/estimate.h"
#include "kernels/cpu_model.h"

#include <string.h>

enum { K_EMBED_FWD, K_BLOCK_FWD, K_HEAD, K_BLOCK_BWD, K_EMBED_BWD };

typedef struct {
    const st_model *m;
    int S, R, bf16, reduce_bf16, prefetch, reshard, no_sync;
    int64_t *padded, *shard;
    int *gathered, *in_flight;   /* per unit */
    int *has_grad;               /* full-size gradient buffer alive */
    int n_in_flight;
    double comm, grad_comm, peak_comm, peak_grad;
    int pending;                 /* unit whose reduction is held, -1 none */
} sim;

static int units_of(const sim *s, int kind, int layer, int out[2])
{
    int H = s->m->n_units - 1;
    switch (kind) {
    case K_EMBED_FWD: out[0] = 0; return 1;
    case K_BLOCK_FWD:
    case K_BLOCK_BWD: out[0] = layer + 1; return 1;
    case K_HEAD:
        out[0] = H;
        if (s->m->tied) {
            out[1] = 0;
            return 2;
        }
        return 1;
    default: return 0;
    }
}

static void note_peak(sim *s)
{
    if (s->comm > s->peak_comm) {
        s->peak_comm = s->comm;
        s->peak_grad = s->grad_comm;
    }
}

static void gather_start(sim *s, int u)
{
    if (s->gathered[u] || s->in_flight[u])
        return;
    if (s->S == 1) {
        if (s->bf16)
            s->comm += 4.0 * (double)s->padded[u];
        s->gathered[u] = 1;
        return;
    }
    s->comm += 4.0 * (double)s->padded[u];
    if (s->bf16)
        s->comm += 2.0 * (double)(s->shard[u] + s->padded[u]);
    note_peak(s);
    s->in_flight[u] = 1;
    s->n_in_flight++;
}

static void gather_wait(sim *s, int u)
{
    if (!s->in_flight[u])
        return;
    if (s->bf16)
        s->comm -= 2.0 * (double)(s->shard[u] + s->padded[u]);
    s->in_flight[u] = 0;
    s->n_in_flight--;
    s->gathered[u] = 1;
}

static void release(sim *s, int u)
{
    gather_wait(s, u);
    if (s->gathered[u] && (s->S > 1 || s->bf16))
        s->comm -= 4.0 * (double)s->padded[u];
    s->gathered[u] = 0;
}

static void grad_target(sim *s, int u)
{
    if ((s->S == 1 && s->R == 1) || s->has_grad[u])
        return;
    s->has_grad[u] = 1;
    s->comm += 4.0 * (double)s->padded[u];
    s->grad_comm += 4.0 * (double)s->padded[u];
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
}

static void reduce_finish(sim *s, int u)
{
    if (u < 0)
        return;
    s->comm -= reduce_extra(s, u);
    if (s->has_grad[u]) {
        s->comm -= 4.0 * (double)s->padded[u];
        s->grad_comm -= 4.0 * (double)s->padded[u];
        s->has_grad[u] = 0;
    }
}

static void micro_step(sim *s, int sync)
{
    const int L = (int)s->m->L;
    int kinds[2 * L + 4], layers[2 * L + 4], n = 0;
    kinds[n] = K_EMBED_FWD, layers[n++] = -1;
    for (int l = 0; l < L; l++)
        kinds[n] = K_BLOCK_FWD, layers[n++] = l;
    kinds[n] = K_HEAD, layers[n++] = -1;
    for (int l = L - 1; l >= 0; l--)
        kinds[n] = K_BLOCK_BWD, layers[n++] = l;
    kinds[n] = K_EMBED_BWD, layers[n++] = -1;
    s->pending = -1;
    for (int k = 0; k < n; k++) {
        int us[2], nu = units_of(s, kinds[k], layers[k], us);
        for (int i = 0; i < nu; i++) {
            gather_start(s, us[i]);
            gather_wait(s, us[i]);
        }
        for (int j = k + 1; j < n && s->n_in_flight < s->prefetch; j++) {
            int vs[2], nv = units_of(s, kinds[j], layers[j], vs);
            for (int i = 0; i < nv && s->n_in_flight < s->prefetch; i++)
                if (!s->gathered[vs[i]] && !s->in_flight[vs[i]])
                    gather_start(s, vs[i]);
        }
        int u = -1;
        if (kinds[k] == K_HEAD) {
            grad_target(s, s->m->n_units - 1);
            if (s->m->tied)
                grad_target(s, 0);
            u = s->m->n_units - 1;
        } else if (kinds[k] == K_BLOCK_BWD) {
            u = layers[k] + 1;
            grad_target(s, u);
        } else if (kinds[k] == K_EMBED_BWD) {
            u = 0;
            grad_target(s, 0);
        }
        note_peak(s);  /* during the compute */
        if (u >= 0 && sync && !(s->S == 1 && s->R == 1)) {
            reduce_start(s, u);
            note_peak(s);
            reduce_finish(s, s->pending);
            s->pending = u;
        }
        for (int i = 0; i < nu; i++) {
            int next = -1;
            for (int j = k + 1; j < n && next < 0; j++) {
                int ws[2], nw = units_of(s, kinds[j], layers[j], ws);
                for (int q = 0; q < nw; q++)
                    if (ws[q] == us[i])
                        next = j;
            }
            if (next < 0 || (s->reshard && next != k + 1))
                release(s, us[i]);
        }
    }
    reduce_finish(s, s->pending);
}

void st_estimate_memory(const st_model *m, const st_config *cfg, int strategy, int world,
                        int S, int ckpt, int64_t B, st_mem_estimate *out)
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
    s.prefetch = (int)cfg->parallel.prefetch;
    s.reshard = strategy != ST_STRAT_SHARD_GRAD_OP;
    s.no_sync = cfg->parallel.no_sync;
    int nu = m->n_units;
    int64_t padded[nu], shard[nu];
    int g[nu], f[nu], h[nu];
    s.padded = padded, s.shard = shard, s.gathered = g, s.in_flight = f, s.has_grad = h;
    double shard_total = 0.0;
    for (int u = 0; u < nu; u++) {
        padded[u] = (m->units[u].numel + S - 1) / S * S;
        shard[u] = padded[u] / S;
        shard_total += (double)shard[u];
        g[u] = f[u] = h[u] = 0;
    }
    out->params = 4.0 * shard_total;
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
     * records, the window, the step list and the engine's two sums. */
    out->other = (double)((m->L * 12 + 8) * sizeof(st_tensor)) + (double)nu * 64.0 * 2 +
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
     * host at once, before they cross into the engine's shards. */
    if (strcmp(cfg->model.init, "random") != 0) {
        double load = state + out->activations + out->other + 4.0 * shard_total;
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
