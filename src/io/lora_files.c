/* LoRA adapters as files (see lora_files.h).  The names and shapes are
 * PEFT's: each adapted module M gets M.lora_A.weight [r, in] and
 * M.lora_B.weight [out, r] under base_model.model., for GPT-2's Conv1D
 * too (PEFT then sets fan_in_fan_out, and the merge adds the transpose). */
#include "io/lora_files.h"
#include "base/files.h"
#include "base/log.h"
#include "config/config.h"
#include "io/hf_export.h"
#include "io/hf_import.h"
#include "io/safetensors_write.h"

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

/* Unit u's base weights in fp32: init's files, or the initialisation seed
 * makes for init "random". */
static int load_base_unit(const char *init, const st_model *m, const st_model_config *mc,
                          uint64_t seed, int u, float *dst)
{
    if (strcmp(init, "random") == 0) {
        st_model_init_range(m, u, 0, m->units[u].numel, dst, seed);
        return 0;
    }
    /* Unit u's slice alone: every other unit's is empty, so its
     * destination is never touched. */
    int64_t *lo = calloc((size_t)m->n_units, sizeof(int64_t));
    int64_t *len = calloc((size_t)m->n_units, sizeof(int64_t));
    float **dsts = calloc((size_t)m->n_units, sizeof(float *));
    int rc = ST_EXIT_FAILURE;
    if (lo && len && dsts) {
        len[u] = m->units[u].numel;
        dsts[u] = dst;
        rc = st_hf_load_slices(init, m, mc, lo, len, dsts, NULL);
    } else {
        st_error(NULL, "out of memory reading the base weights %s", init);
    }
    free(lo);
    free(len);
    free(dsts);
    return rc;
}

int st_lora_merged_unit(const char *init, const st_model *m, const st_model_config *mc,
                        uint64_t seed, int u, const float *lora, float *dst)
{
    int rc = load_base_unit(init, m, mc, seed, u, dst);
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
