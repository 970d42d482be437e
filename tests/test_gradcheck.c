/* Finite-difference gradient check of the CPU backend on a tiny model of
 * each architecture: for every tensor, the analytic directional derivative
 * g.v along a random unit direction v restricted to that tensor must match
 * the central difference (L(p + h v) - L(p - h v)) / 2h of the forward-only
 * loss, v being a random direction blended with the gradient's own.  Also: activation recomputation reproduces the gradients bit for
 * bit, and the check itself flags a corrupted gradient.  And the engine's
 * bf16 shard copy (what a bf16 gather sends): after an optimizer step and
 * after parameters are written from outside (st_fsdp_shard_from_host, as
 * a checkpoint load does), a forward pass gives the loss of a fresh engine
 * holding the same fp32 parameters, bit for bit. */
#include "model_fixture.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>

enum { B = 2, T = 8 };

static double mean_loss(st_fsdp *e, const int32_t *in, const int32_t *tg)
{
    return fx_forward(e, in, tg, NULL) / (double)(B * T);
}

/* Relative error of the directional derivative along v for tensor t. */
static double directional_error(st_fsdp *e, const st_tensor *t, const float *grad,
                                const int32_t *in, const int32_t *tg, double *analytic,
                                double *numeric)
{
    float *p = e->units[t->unit].params + t->offset;
    float *saved = malloc(sizeof(float) * (size_t)t->numel);
    double *v = malloc(sizeof(double) * (size_t)t->numel);
    /* v = unit(r) + unit(g), normalised: the random half catches errors
     * orthogonal to the gradient, the gradient half keeps the derivative
     * large against the fp32 noise of the loss. */
    double rn = 0.0, gn = 0.0;
    for (int64_t k = 0; k < t->numel; k++) {
        v[k] = st_normal3(ST_RNG_TEST, (uint64_t)(t - e->model->tensors), (uint64_t)k);
        rn += v[k] * v[k];
        gn += (double)grad[k] * grad[k];
    }
    rn = sqrt(rn);
    gn = sqrt(gn) > 0.0 ? sqrt(gn) : 1.0;
    double norm = 0.0;
    for (int64_t k = 0; k < t->numel; k++) {
        v[k] = v[k] / rn + grad[k] / gn;
        norm += v[k] * v[k];
    }
    norm = sqrt(norm);
    double a = 0.0;
    for (int64_t k = 0; k < t->numel; k++) {
        v[k] /= norm;
        a += v[k] * grad[k];
    }
    memcpy(saved, p, sizeof(float) * (size_t)t->numel);
    const double h = 1e-2;
    for (int64_t k = 0; k < t->numel; k++)
        p[k] = (float)(saved[k] + h * v[k]);
    double lp = mean_loss(e, in, tg);
    for (int64_t k = 0; k < t->numel; k++)
        p[k] = (float)(saved[k] - h * v[k]);
    double lm = mean_loss(e, in, tg);
    memcpy(p, saved, sizeof(float) * (size_t)t->numel);
    double n = (lp - lm) / (2.0 * h);
    free(saved);
    free(v);
    *analytic = a;
    *numeric = n;
    return fabs(a - n) / fmax(fabs(n), 1e-4);
}

static void check_arch(int arch, int tied)
{
    const char *an = arch == ST_ARCH_GPT2 ? "gpt2" : "llama";
    st_config cfg;
    fixture_config(&cfg, arch, tied, B, T);
    st_model m;
    st_fsdp e;
    if (!tap_ok(st_model_init(&m, &cfg.model) == 0 &&
                    st_engine_open(&e, &m, &cfg, NULL, st_kernels_cpu()) == 0,
                "%s: model builds", an))
        return;
    fixture_randomise(&e, 3);
    int32_t in[B * T], tg[B * T];
    fixture_tokens(in, tg, B * T, m.V, 5);
    st_fsdp_zero_grads(&e);
    fx_forward_backward(&e, in, tg, 1.0f / (B * T));
    /* Keep a copy of the gradients: the perturbed forwards reuse buffers. */
    float **g = malloc(sizeof(float *) * (size_t)m.n_units);
    for (int u = 0; u < m.n_units; u++) {
        g[u] = malloc(sizeof(float) * (size_t)m.units[u].numel);
        memcpy(g[u], e.units[u].grads, sizeof(float) * (size_t)m.units[u].numel);
    }
    for (int i = 0; i < m.n_tensors; i++) {
        const st_tensor *t = &m.tensors[i];
        double a, n;
        double err = directional_error(&e, t, g[t->unit] + t->offset, in, tg, &a, &n);
        tap_ok(err < 5e-3 && isfinite(a), "%s%s: d/d %s analytic %.6e numeric %.6e rel %.1e",
               an, tied ? " tied" : "", t->name, a, n, err);
    }
    /* The check can fail: a gradient with one tensor's sign flipped. */
    {
        const st_tensor *t = &m.tensors[m.n_tensors - 1];
        float *gt = g[t->unit] + t->offset;
        for (int64_t k = 0; k < t->numel; k++)
            gt[k] = -gt[k];
        double a, n;
        double err = directional_error(&e, t, gt, in, tg, &a, &n);
        tap_ok(err > 1e-2, "%s: a sign-flipped gradient of %s is caught (rel %.1e)", an,
               t->name, err);
        for (int64_t k = 0; k < t->numel; k++)
            gt[k] = -gt[k];
    }
    /* Activation recomputation must reproduce the stored-activation path
     * exactly: it runs the same kernels on the same inputs. */
    {
        st_config cfg2 = cfg;
        cfg2.train.activation_checkpointing = ST_ACKPT_FULL;
        st_fsdp e2;
        st_engine_open(&e2, &m, &cfg2, NULL, st_kernels_cpu());
        for (int u = 0; u < m.n_units; u++)
            memcpy(e2.units[u].params, e.units[u].params, sizeof(float) * (size_t)m.units[u].numel);
        st_fsdp_zero_grads(&e2);
        double l2 = fx_forward_backward(&e2, in, tg, 1.0f / (B * T));
        st_fsdp_zero_grads(&e);
        double l1 = fx_forward_backward(&e, in, tg, 1.0f / (B * T));
        int same = l1 == l2;
        for (int u = 0; u < m.n_units; u++)
            same = same && memcmp(e.units[u].grads, e2.units[u].grads,
                                  sizeof(float) * (size_t)m.units[u].numel) == 0;
        tap_ok(same, "%s: activation_checkpointing = full gives bit-identical loss and "
               "gradients", an);
        st_fsdp_destroy(&e2);
    }
    for (int u = 0; u < m.n_units; u++)
        free(g[u]);
    free(g);
    st_fsdp_destroy(&e);
    st_model_free(&m);
    st_config_free(&cfg);
}

/* Every parameter of src into dst, through the host, as checkpoints do. */
static void copy_params(st_fsdp *dst, const st_fsdp *src)
{
    for (int u = 0; u < src->n_units; u++) {
        int64_t n = src->units[u].shard;
        float *h = malloc(sizeof(float) * (size_t)n);
        st_fsdp_shard_to_host(src, u, ST_FSDP_PARAMS, 0, n, h);
        st_fsdp_shard_from_host(dst, u, ST_FSDP_PARAMS, 0, n, h);
        free(h);
    }
}

/* The forward loss of a fresh engine holding e's parameters. */
static double fresh_loss(const st_fsdp *e, const st_config *cfg, st_kernels *k,
                         const int32_t *in, const int32_t *tg)
{
    st_fsdp f;
    st_engine_open(&f, e->model, cfg, NULL, k);
    copy_params(&f, e);
    double l = fx_forward(&f, in, tg, NULL);
    st_fsdp_destroy(&f);
    return l;
}

static void check_bf16_copy(st_kernels *k)
{
    st_config cfg;
    fixture_config(&cfg, ST_ARCH_GPT2, 1, B, T);
    cfg.train.precision = ST_PREC_BF16;
    st_model m;
    st_fsdp e, other;
    if (!tap_ok(st_model_init(&m, &cfg.model) == 0 &&
                    st_engine_open(&e, &m, &cfg, NULL, k) == 0 &&
                    st_engine_open(&other, &m, &cfg, NULL, k) == 0,
                "bf16 copy, %s: engines build", k->name))
        return;
    tap_ok(e.units[0].params16 != NULL, "bf16 copy, %s: the engine keeps one", k->name);
    fixture_randomise(&e, 3);
    fixture_randomise(&other, 4);
    int32_t in[B * T], tg[B * T];
    fixture_tokens(in, tg, B * T, m.V, 5);
    fx_forward(&e, in, tg, NULL); /* packs the copy */
    st_fsdp_zero_grads(&e);
    fx_forward_backward(&e, in, tg, 1.0f / (B * T));
    st_fsdp_optimizer_step(&e, 1e-2, 0.0);
    tap_ok(fx_forward(&e, in, tg, NULL) == fresh_loss(&e, &cfg, k, in, tg),
           "bf16 copy, %s: after an optimizer step, the loss of the new parameters", k->name);
    copy_params(&e, &other);
    tap_ok(fx_forward(&e, in, tg, NULL) == fresh_loss(&other, &cfg, k, in, tg),
           "bf16 copy, %s: after parameters loaded from the host, their loss", k->name);
    st_fsdp_destroy(&other);
    st_fsdp_destroy(&e);
    st_model_free(&m);
    st_config_free(&cfg);
}

int main(void)
{
    check_arch(ST_ARCH_GPT2, 1);
    check_arch(ST_ARCH_GPT2, 0);
    check_arch(ST_ARCH_LLAMA, 0);
    check_arch(ST_ARCH_LLAMA, 1);
    check_bf16_copy(st_kernels_cpu());
    check_bf16_copy(st_kernels_cpu_bf16params());
    return tap_done();
}
