/* The work of `shardtrain export` (the command is cli/cmd_export.c): a
 * sharded checkpoint to a Hugging Face model directory (model.safetensors
 * with Hugging Face tensor names, and a config.json that transformers'
 * GPT2LMHeadModel or LlamaForCausalLM accepts).  The shards are read
 * through the same ranged, verified reader as resume, whole unit by whole
 * unit, so export works for a checkpoint of any world size and strategy. */
#include "io/checkpoint.h"
#include "base/log.h"
#include "model/model.h"
#include "base/files.h"
#include "io/safetensors_write.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *hf_config(const st_model *m, const st_model_config *mc)
{
    if (m->arch == ST_ARCH_GPT2)
        return json_pack("{s:s, s:[s], s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:b, s:s, "
                         "s:s, s:f, s:f, s:f, s:f}",
                         "model_type", "gpt2", "architectures", "GPT2LMHeadModel",
                         "n_embd", (json_int_t)m->C, "n_layer", (json_int_t)m->L,
                         "n_head", (json_int_t)m->H, "n_inner", (json_int_t)m->F,
                         "n_positions", (json_int_t)m->T, "n_ctx", (json_int_t)m->T,
                         "vocab_size", (json_int_t)m->V, "layer_norm_epsilon", mc->norm_eps,
                         "tie_word_embeddings", m->tied,
                         /* the tanh approximation, as the CPU kernels compute */
                         "activation_function", "gelu_new", "torch_dtype", "float32",
                         "initializer_range", mc->init_std, "resid_pdrop", 0.0, "embd_pdrop", 0.0,
                         "attn_pdrop", 0.0);
    return json_pack("{s:s, s:[s], s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b, "
                     "s:s, s:s, s:b, s:b, s:f}",
                     "model_type", "llama", "architectures", "LlamaForCausalLM",
                     "hidden_size", (json_int_t)m->C, "intermediate_size", (json_int_t)m->F,
                     "num_hidden_layers", (json_int_t)m->L,
                     "num_attention_heads", (json_int_t)m->H,
                     "num_key_value_heads", (json_int_t)m->KV, "head_dim", (json_int_t)m->hd,
                     "max_position_embeddings", (json_int_t)m->T,
                     "vocab_size", (json_int_t)m->V, "rms_norm_eps", mc->norm_eps,
                     "rope_theta", mc->rope_theta, "tie_word_embeddings", m->tied,
                     "hidden_act", "silu", "torch_dtype", "float32", "attention_bias", 0,
                     "mlp_bias", 0, "initializer_range", mc->init_std);
}

int st_ckpt_export_hf(const char *ckpt, const char *out_dir, char *dir, size_t n,
                      int64_t *step)
{
    char err[1024], path[8400];
    int rc = st_ckpt_resolve(ckpt, dir, n, err, sizeof err);
    st_ckpt c;
    memset(&c, 0, sizeof c);
    rc = rc ? rc : st_ckpt_open(&c, dir, NULL, err, sizeof err);
    if (rc) {
        st_error(NULL, "%s", err);
        st_ckpt_close(&c);
        return rc;
    }
    /* The saved shape builds the model whose tensor table names the
     * tensors; its table must then match the manifest's entry by entry. */
    st_model m = {0};
    st_model_config mc = c.model;
    if ((rc = st_model_init(&m, &mc))) {
        st_ckpt_close(&c);
        return rc;
    }
    st_ckpt_close(&c);
    rc = st_ckpt_open(&c, dir, &m, err, sizeof err);
    float **full = calloc((size_t)m.n_units, sizeof(float *));
    for (int u = 0; u < m.n_units && !rc; u++) {
        full[u] = malloc(sizeof(float) * (size_t)m.units[u].numel);
        rc = st_ckpt_read_range(&c, u, 0, 0, m.units[u].numel, full[u], err, sizeof err);
    }
    if (rc)
        st_error(NULL, "%s", err);
    rc = rc ? rc : st_mkdir_p(out_dir);
    if (!rc) {
        snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
        rc = st_safetensors_save_model(path, &m, full);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/config.json", out_dir);
        json_t *cfg = hf_config(&m, &c.model);
        if (!cfg || json_dump_file(cfg, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15)) != 0) {
            st_error(path, "cannot write config.json; hint: check that the directory is "
                     "writable");
            rc = ST_EXIT_FAILURE;
        }
        json_decref(cfg);
    }
    if (!rc)
        *step = c.step;
    for (int u = 0; u < m.n_units; u++)
        free(full[u]);
    free(full);
    st_ckpt_close(&c);
    st_model_free(&m);
    return rc;
}
