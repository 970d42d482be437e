/* Engine set-up from the configuration (see engine_setup.h).  The initial
 * weights cross into the engine's shards (backend memory) from the host,
 * so the host side stays bounded and the engine never learns where they
 * came from. */
#include "train/engine_setup.h"
#include "base/alloc.h"
#include "base/log.h"
#include "hf/hf_import.h"

#include <stdlib.h>
#include <string.h>

void st_fsdp_options_from_config(const st_config *cfg, st_fsdp_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->micro_batch = cfg->train.micro_batch;
    opt->reshard_after_forward = st_sched_reshards_after_forward(cfg->parallel.strategy);
    opt->bf16 = cfg->train.precision == ST_PREC_BF16;
    opt->reduce_bf16 = cfg->parallel.reduce_dtype == ST_PREC_BF16;
    opt->prefetch = cfg->parallel.prefetch;
    opt->no_sync = cfg->parallel.no_sync;
    opt->recompute = cfg->train.activation_checkpointing == ST_ACKPT_FULL;
    opt->adamw.beta1 = cfg->optim.beta1;
    opt->adamw.beta2 = cfg->optim.beta2;
    opt->adamw.eps = cfg->optim.eps;
    opt->adamw.weight_decay = cfg->optim.weight_decay;
}

/* Random initial values, made on the host piece by piece (each element
 * depends only on its index, so the pieces add up to the whole): the
 * trained part, and with base set the frozen base weights (LoRA) too.  The
 * staging buffer of ST_FSDP_STAGE floats is bounded I/O space, not engine
 * state, so it is not counted in the memory categories: a counted one
 * would show up in peak_bytes on layouts that gather nothing and move them
 * away from the estimate for no reason of the model's. */
static int init_random(st_fsdp *f, uint64_t seed, int base)
{
    float *stage = malloc(sizeof(float) * (size_t)ST_FSDP_STAGE);
    if (!stage) {
        st_error(NULL, "out of memory allocating a host staging buffer");
        return ST_EXIT_FAILURE;
    }
    for (int u = 0; u < f->n_units; u++) {
        const st_fsdp_unit *x = &f->units[u];
        for (int64_t a = 0; a < x->shard; a += ST_FSDP_STAGE) {
            int64_t n = x->shard - a < ST_FSDP_STAGE ? x->shard - a : ST_FSDP_STAGE;
            st_model_train_init_range(f->model, u, x->lo + a, x->lo + a + n, stage, seed);
            st_fsdp_shard_from_host(f, u, ST_FSDP_PARAMS, a, n, stage);
        }
        if (!base)
            continue;
        const st_fsdp_frozen *z = &x->frozen;
        for (int64_t a = 0; a < z->shard; a += ST_FSDP_STAGE) {
            int64_t n = z->shard - a < ST_FSDP_STAGE ? z->shard - a : ST_FSDP_STAGE;
            st_model_init_range(f->model, u, z->lo + a, z->lo + a + n, stage, seed);
            st_fsdp_frozen_from_host(f, u, a, n, stage);
        }
    }
    free(stage);
    return 0;
}

/* Weights from files: each rank reads only its own slices, all units in one
 * pass (the files' headers are read once), so the staging holds every
 * slice at once; estimate.c counts it.  With LoRA they are the frozen
 * part's slices, and the adapters start as init_random makes them. */
static int init_from_files(st_fsdp *f, const st_config *cfg)
{
    const st_model *m = f->model;
    int64_t *lo = st_alloc(sizeof(int64_t) * (size_t)m->n_units, ST_MEM_OTHER);
    int64_t *len = st_alloc(sizeof(int64_t) * (size_t)m->n_units, ST_MEM_OTHER);
    float **dst = st_alloc(sizeof(float *) * (size_t)m->n_units, ST_MEM_OTHER);
    const int lora = m->lora.rank > 0;
    for (int u = 0; u < m->n_units; u++) {
        lo[u] = lora ? f->units[u].frozen.lo : f->units[u].lo;
        len[u] = lora ? f->units[u].frozen.shard : f->units[u].shard;
        dst[u] = st_alloc(sizeof(float) * (size_t)len[u], ST_MEM_OTHER);
    }
    int rc = st_hf_load_slices(cfg->model.init, m, &cfg->model, lo, len, dst, NULL);
    for (int u = 0; u < m->n_units; u++) {
        if (!rc && lora)
            st_fsdp_frozen_from_host(f, u, 0, len[u], dst[u]);
        else if (!rc)
            st_fsdp_shard_from_host(f, u, ST_FSDP_PARAMS, 0, len[u], dst[u]);
        st_free(dst[u]);
    }
    if (!rc && lora)
        rc = init_random(f, (uint64_t)cfg->train.seed, 0);
    st_free(lo);
    st_free(len);
    st_free(dst);
    return rc;
}

int st_engine_open(st_fsdp *f, const st_model *m, const st_config *cfg, st_groups *groups,
                   st_kernels *k)
{
    st_fsdp_options opt;
    st_fsdp_options_from_config(cfg, &opt);
    int rc = st_fsdp_create(f, m, &opt, groups, k);
    if (rc)
        return rc;
    if (strcmp(cfg->model.init, "random") == 0)
        return init_random(f, (uint64_t)cfg->train.seed, 1);
    return init_from_files(f, cfg);
}
