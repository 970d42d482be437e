/* LoRA adapters as files (see lora_files.h).  The names and shapes are
 * PEFT's: each adapted module M gets M.lora_A.weight [r, in] and
 * M.lora_B.weight [out, r] under base_model.model., for GPT-2's Conv1D
 * too (PEFT then sets fan_in_fan_out, and the merge adds the transpose). */
#include "hf/lora_files.h"
#include "base/files.h"
#include "base/log.h"
#include "config/config.h"
#include "hf/hf_export.h"
#include "hf/hf_import.h"
#include "hf/safetensors_write.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* base (unit u's base weights) += scale * B A of every adapter in lora
 * (unit u's adapter buffer), in each weight's storage layout: what PEFT's
 * merge_and_unload computes. */
static void merge_unit(const st_model *m, int u, float *base, const float *lora)
{
    const st_model_lora *lo = &m->lora;
    const int64_t r = lo->rank;
    const int conv1d = m->arch == ST_ARCH_GPT2;
    if (u < 1 || u > m->L)
        return;      /* the embedding and the head carry no adapters */
    for (int i = 0; i < ST_LORA_MAX_TARGETS; i++) {
        if (lo->a_off[i] < 0)
            continue;
        const st_tensor *w = &m->tensors[m->units[u].first_tensor + lo->base[i]];
        const float *A = lora + lo->a_off[i], *B = lora + lo->b_off[i];
        float *W = base + w->offset;
        const int64_t in = lo->in[i], out = lo->out[i];
        for (int64_t o = 0; o < out; o++)
            for (int64_t c = 0; c < in; c++) {
                double d = 0.0;
                for (int64_t j = 0; j < r; j++)
                    d += (double)B[o * r + j] * A[j * in + c];
                W[conv1d ? c * out + o : o * in + c] += (float)(lo->scale * d);
            }
    }
}

/* The base a LoRA run's adapters merge into, opened once for a stream of
 * units: model.init's files with their headers read and checked once (a
 * Llama 3 8B directory has four shards and a 24 KB index), or for
 * "random" the seed.  lo/len/dsts are st_hf_read's per-unit arguments,
 * all empty but the unit asked for. */
struct st_lora_base {
    const st_model *m;
    uint64_t seed;
    st_hf_weights *files;     /* NULL for "random" */
    int64_t *lo, *len;
    float **dsts;
};

int st_lora_base_open(const char *init, const st_model *m, const st_model_config *mc,
                      uint64_t seed, st_lora_base **out)
{
    *out = NULL;
    st_lora_base *b = calloc(1, sizeof *b);
    if (b) {
        b->lo = calloc((size_t)m->n_units, sizeof(int64_t));
        b->len = calloc((size_t)m->n_units, sizeof(int64_t));
        b->dsts = calloc((size_t)m->n_units, sizeof(float *));
    }
    if (!b || !b->lo || !b->len || !b->dsts) {
        st_lora_base_close(b);
        st_error(NULL, "out of memory reading the base weights %s", init);
        return ST_EXIT_FAILURE;
    }
    b->m = m;
    b->seed = seed;
    int rc = strcmp(init, "random") == 0 ? 0 : st_hf_open(init, m, mc, &b->files);
    if (rc) {
        st_lora_base_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

void st_lora_base_close(st_lora_base *b)
{
    if (!b)
        return;
    st_hf_close(b->files, NULL);
    free(b->lo);
    free(b->len);
    free(b->dsts);
    free(b);
}

int st_lora_merged_unit(st_lora_base *b, int u, const float *lora, float *dst)
{
    const st_model *m = b->m;
    int rc = 0;
    if (!b->files) {
        st_model_init_range(m, u, 0, m->units[u].numel, dst, b->seed);
    } else {
        b->len[u] = m->units[u].numel;
        b->dsts[u] = dst;
        rc = st_hf_read(b->files, b->lo, b->len, b->dsts);
        b->len[u] = 0;
        b->dsts[u] = NULL;
    }
    if (!rc)
        merge_unit(m, u, dst, lora);
    return rc;
}

static json_t *adapter_config(const st_model *m, const char *base_name)
{
    json_t *targets = json_array();
    for (int i = 0; i < st_lora_n_targets(m->arch); i++)
        if (m->lora.targets >> i & 1)
            json_array_append_new(targets, json_string(st_lora_target_name(m->arch, i)));
    /* Only keys every PEFT release knows: an unknown one is a TypeError
     * in LoraConfig.  fan_in_fan_out says that GPT-2's Conv1D stores
     * [in, out]. */
    return json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:o, s:b, s:s, s:b, s:b}",
                     "peft_type", "LORA", "task_type", "CAUSAL_LM",
                     "base_model_name_or_path", base_name, "r", m->lora.rank,
                     "lora_alpha", m->lora.alpha, "lora_dropout", m->lora.dropout,
                     "target_modules", targets, "fan_in_fan_out", m->arch == ST_ARCH_GPT2,
                     "bias", "none", "inference_mode", 1, "use_rslora", 0);
}

int st_lora_write_adapter(const char *dir, const st_model *m, float *const *lora,
                          const char *base_name)
{
    char path[4300];
    int rc = st_mkdir_p(dir);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    rc = rc ? rc : st_safetensors_save_tensors(path, m->lora_tensors, m->n_lora_tensors,
                                               "base_model.model.", lora);
    if (rc)
        return rc;
    json_t *cfg = adapter_config(m, base_name);
    rc = st_hf_write_json(dir, "adapter_config.json", cfg);
    json_decref(cfg);
    return rc;
}
