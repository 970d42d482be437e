/* Single-rank training engine (see engine.h): unit-by-unit forward and
 * backward over the model, optional activation recomputation, mixed
 * precision emulation and the optimizer step. */
#include "engine.h"
#include "alloc.h"
#include "cpu_ops.h"
#include "log.h"
#include "optim.h"
#include "safetensors.h"

#include <math.h>
#include <string.h>

static int recompute(const st_engine *e)
{
    return e->cfg->train.activation_checkpointing == ST_ACKPT_FULL;
}

static float *block_acts_mem(const st_engine *e, int64_t layer)
{
    size_t per = st_block_acts_floats(e->model, e->B);
    return e->acts + (recompute(e) ? 0 : (size_t)layer * per);
}

int st_engine_create(st_engine *e, const st_model *m, const st_config *cfg)
{
    memset(e, 0, sizeof *e);
    e->model = m;
    e->cfg = cfg;
    e->B = cfg->train.micro_batch;
    e->n_units = m->n_units;
    size_t np = sizeof(float *) * (size_t)m->n_units;
    e->params = st_alloc(np, ST_MEM_OTHER);
    e->work = st_alloc(np, ST_MEM_OTHER);
    e->grads = st_alloc(np, ST_MEM_OTHER);
    e->adam_m = st_alloc(np, ST_MEM_OTHER);
    e->adam_v = st_alloc(np, ST_MEM_OTHER);
    int bf16 = cfg->train.precision == ST_PREC_BF16;
    for (int u = 0; u < m->n_units; u++) {
        size_t bytes = sizeof(float) * (size_t)m->units[u].numel;
        e->params[u] = st_alloc(bytes, ST_MEM_PARAMS);
        /* The bf16 compute copy is what an FSDP gather would deliver: it
         * is a communication buffer, not model state. */
        e->work[u] = bf16 ? st_alloc(bytes, ST_MEM_COMM) : e->params[u];
        e->grads[u] = st_alloc(bytes, ST_MEM_GRADS);
        e->adam_m[u] = st_alloc(bytes, ST_MEM_OPTIM);
        e->adam_v[u] = st_alloc(bytes, ST_MEM_OPTIM);
    }
    int64_t N = e->B * m->T;
    e->res = st_alloc(sizeof(float) * (size_t)((m->L + 1) * N * m->C), ST_MEM_ACTS);
    size_t sets = recompute(e) ? 1 : (size_t)m->L;
    e->acts = st_alloc(sizeof(float) * sets * st_block_acts_floats(m, e->B), ST_MEM_ACTS);
    e->scratch = st_alloc(sizeof(float) * st_model_scratch_floats(m, e->B), ST_MEM_ACTS);
    e->dres_a = st_alloc(sizeof(float) * (size_t)(N * m->C), ST_MEM_ACTS);
    e->dres_b = st_alloc(sizeof(float) * (size_t)(N * m->C), ST_MEM_ACTS);

    if (strcmp(cfg->model.init, "random") == 0) {
        for (int u = 0; u < m->n_units; u++)
            st_model_init_range(m, u, 0, m->units[u].numel, e->params[u],
                                (uint64_t)cfg->train.seed);
    } else {
        int rc = st_safetensors_load_model(cfg->model.init, m, e->params);
        if (rc)
            return rc;
    }
    st_engine_refresh_work(e);
    return 0;
}

void st_engine_destroy(st_engine *e)
{
    if (!e->params)
        return;
    for (int u = 0; u < e->n_units; u++) {
        if (e->work[u] != e->params[u])
            st_free(e->work[u]);
        st_free(e->params[u]);
        st_free(e->grads[u]);
        st_free(e->adam_m[u]);
        st_free(e->adam_v[u]);
    }
    st_free(e->params);
    st_free(e->work);
    st_free(e->grads);
    st_free(e->adam_m);
    st_free(e->adam_v);
    st_free(e->res);
    st_free(e->acts);
    st_free(e->scratch);
    st_free(e->dres_a);
    st_free(e->dres_b);
    memset(e, 0, sizeof *e);
}

void st_engine_refresh_work(st_engine *e)
{
    for (int u = 0; u < e->n_units; u++)
        if (e->work[u] != e->params[u])
            st_round_bf16(e->work[u], e->params[u], e->model->units[u].numel);
}

void st_engine_zero_grads(st_engine *e)
{
    for (int u = 0; u < e->n_units; u++)
        memset(e->grads[u], 0, sizeof(float) * (size_t)e->model->units[u].numel);
}

static float *res_at(const st_engine *e, int64_t l)
{
    return e->res + (size_t)l * (size_t)(e->B * e->model->T * e->model->C);
}

/* Forward through the blocks, keeping each block's input in res[l] and,
 * unless recomputing, its activations. */
static void forward_blocks(st_engine *e, const int32_t *inputs)
{
    const st_model *m = e->model;
    st_embed_forward(m, e->work[0], inputs, e->B, res_at(e, 0));
    for (int64_t l = 0; l < m->L; l++) {
        st_block_acts a;
        st_block_acts_bind(&a, m, e->B, block_acts_mem(e, l));
        st_block_forward(m, e->work[l + 1], e->B, res_at(e, l), res_at(e, l + 1), &a);
    }
}

double st_engine_forward_backward(st_engine *e, const int32_t *inputs,
                                  const int32_t *targets, float grad_scale)
{
    const st_model *m = e->model;
    const int hu = st_model_head_unit(m);
    forward_blocks(e, inputs);
    double loss = st_head_forward_backward(m, e->work[hu], e->work[0], e->grads[hu],
                                           e->grads[0], e->B, res_at(e, m->L), targets,
                                           grad_scale, e->dres_a, NULL, e->scratch);
    float *dout = e->dres_a, *din = e->dres_b;
    for (int64_t l = m->L - 1; l >= 0; l--) {
        st_block_acts a;
        st_block_acts_bind(&a, m, e->B, block_acts_mem(e, l));
        if (recompute(e)) {
            /* Rebuild this block's activations from its saved input; the
             * output lands in a buffer nothing reads any more. */
            st_block_forward(m, e->work[l + 1], e->B, res_at(e, l), res_at(e, l + 1), &a);
        }
        st_block_backward(m, e->work[l + 1], e->grads[l + 1], e->B, res_at(e, l), &a,
                          dout, din, e->scratch);
        float *t = dout;
        dout = din;
        din = t;
    }
    st_embed_backward(m, e->grads[0], inputs, e->B, dout);
    return loss;
}

double st_engine_forward(st_engine *e, const int32_t *inputs,
                         const int32_t *targets, float *logits_out)
{
    const st_model *m = e->model;
    const int hu = st_model_head_unit(m);
    forward_blocks(e, inputs);
    return st_head_forward_backward(m, e->work[hu], e->work[0], NULL, NULL, e->B,
                                    res_at(e, m->L), targets, 0.0f, NULL,
                                    logits_out, e->scratch);
}

double st_engine_grad_norm(const st_engine *e)
{
    double ss = 0.0;
    for (int u = 0; u < e->n_units; u++) {
        const float *g = e->grads[u];
        for (int64_t i = 0; i < e->model->units[u].numel; i++)
            ss += (double)g[i] * g[i];
    }
    return sqrt(ss);
}

void st_engine_optimizer_step(st_engine *e, double lr, double grad_scale)
{
    const st_model *m = e->model;
    const st_optim_config *o = &e->cfg->optim;
    e->opt_steps++;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        int u = t->unit;
        st_adamw(e->params[u] + t->offset, e->grads[u] + t->offset,
                 e->adam_m[u] + t->offset, e->adam_v[u] + t->offset, t->numel,
                 lr, o->beta1, o->beta2, o->eps, t->decay ? o->weight_decay : 0.0,
                 grad_scale, e->opt_steps);
    }
    st_engine_refresh_work(e);
}
