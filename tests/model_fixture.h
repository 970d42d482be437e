/* A small model with every parameter randomised (biases and norm weights
 * too, so a kernel that ignores one of them cannot pass), shared by the
 * gradient check and the PyTorch dump. */
#ifndef ST_MODEL_FIXTURE_H
#define ST_MODEL_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "engine/fsdp.h"
#include "kernels/kernels_backends.h"
#include "train/engine_setup.h"
#include "base/log.h"
#include "model/model.h"
#include "base/rng.h"

static void fixture_config(st_config *cfg, int arch, int tied, int64_t B, int64_t T)
{
    if (st_config_defaults(cfg) != 0)
        st_die(1, "st_config_defaults failed");
    cfg->model.arch = arch;
    cfg->model.n_layer = 2;
    cfg->model.n_head = 4;
    cfg->model.n_kv_head = arch == ST_ARCH_LLAMA ? 2 : 4;
    cfg->model.d_model = 32;
    cfg->model.d_ff = arch == ST_ARCH_LLAMA ? 48 : 128;
    cfg->model.vocab_size = 61;
    cfg->model.seq_len = T;
    cfg->model.tie_embeddings = tied;
    cfg->model.rope_theta = 10000.0;
    cfg->model.norm_eps = 1e-5;
    cfg->train.micro_batch = B;
    cfg->train.global_batch = B;
}

/* Randomise every parameter: N(0, 0.2) for matrices and biases, 1 +
 * N(0, 0.2) for norm weights.  With LoRA (st_model_add_lora) the base
 * tensors, the same values as without, go to the frozen store, and the
 * adapters, A and B alike, get N(0, 0.2) from a stream of their own: B
 * non-zero, so that a wrong dA cannot hide behind B = 0 (one rank). */
static void fixture_randomise(st_fsdp *e, uint64_t seed)
{
    const st_model *m = e->model;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        float *p = m->lora.rank ? malloc(sizeof(float) * (size_t)t->numel)
                                : e->units[t->unit].params + t->offset;
        if (!p)
            st_die(1, "out of memory");
        for (int64_t k = 0; k < t->numel; k++) {
            float r = (float)(0.2 * st_normal3(seed, (uint64_t)i, (uint64_t)k));
            p[k] = t->init == ST_INIT_ONE ? 1.0f + r : r;
        }
        if (m->lora.rank) {
            st_fsdp_frozen_from_host(e, t->unit, t->offset, t->numel, p);
            free(p);
        }
    }
    for (int i = 0; i < (m->lora.rank ? m->n_lora_tensors : 0); i++) {
        const st_tensor *t = &m->lora_tensors[i];
        float *p = e->units[t->unit].params + t->offset;
        for (int64_t k = 0; k < t->numel; k++)
            p[k] = (float)(0.2 * st_normal3(seed ^ 0x4c6f5241u, (uint64_t)i, (uint64_t)k));
    }
}

/* The engine's entry points with the status checked: a fixture failing is
 * a broken test, not a result. */
static double fx_forward(st_fsdp *e, const int32_t *in, const int32_t *tg, float *logits)
{
    double l = 0.0;
    if (st_fsdp_forward(e, in, tg, logits, &l))
        st_die(1, "st_fsdp_forward failed");
    return l;
}

static double fx_forward_backward(st_fsdp *e, const int32_t *in, const int32_t *tg,
                                  float scale)
{
    double l = 0.0;
    if (st_fsdp_forward_backward(e, in, tg, scale, 1, &l))
        st_die(1, "st_fsdp_forward_backward failed");
    return l;
}

static void fixture_tokens(int32_t *inputs, int32_t *targets, int64_t n, int64_t V,
                           uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        inputs[i] = (int32_t)st_below3((uint64_t)V, seed, 1, (uint64_t)i);
        targets[i] = (int32_t)st_below3((uint64_t)V, seed, 2, (uint64_t)i);
    }
}

#endif
