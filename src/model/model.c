/* Model layout: the tensor table (Hugging Face names and shapes, grouped
 * into units) and parameter initialisation.  Kept apart from the kernels'
 * orchestration in model.c because import, export, checkpoints and the
 * sharded engine all need the layout without the math. */
#include "model/model.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_tensor(st_model *m, int cap, int unit, const char *name,
                      int64_t d0, int64_t d1, int init)
{
    /* cap is counted from the same shape by the caller. */
    if (m->n_tensors >= cap)
        st_bug("tensor table overflow");
    st_tensor *t = &m->tensors[m->n_tensors];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 1;
    t->numel = d0 * (d1 > 0 ? d1 : 1);
    t->unit = unit;
    t->offset = m->units[unit].numel;
    t->decay = t->ndim == 2;
    t->init = init;
    if (m->units[unit].n_tensors == 0)
        m->units[unit].first_tensor = m->n_tensors;
    m->units[unit].n_tensors++;
    m->units[unit].numel += t->numel;
    m->n_params += t->numel;
    return m->n_tensors++;
}

static void layout_gpt2(st_model *m, int cap)
{
    char n[80];
    /* wte last, so that its vocabulary padding is the unit's tail
     * (st_model_vocab_tail). */
    add_tensor(m, cap, 0, "transformer.wpe.weight", m->T, m->C, ST_INIT_NORMAL);
    add_tensor(m, cap, 0, "transformer.wte.weight", m->V, m->C, ST_INIT_NORMAL);
    for (int64_t l = 0; l < m->L; l++) {
        int u = (int)l + 1;
#define T_(suffix, d0, d1, init)                                                \
    do {                                                                       \
        snprintf(n, sizeof n, "transformer.h.%lld." suffix, (long long)l);     \
        add_tensor(m, cap, u, n, d0, d1, init);                                \
    } while (0)
        T_("ln_1.weight", m->C, 0, ST_INIT_ONE);
        T_("ln_1.bias", m->C, 0, ST_INIT_ZERO);
        T_("attn.c_attn.weight", m->C, 3 * m->C, ST_INIT_NORMAL);
        T_("attn.c_attn.bias", 3 * m->C, 0, ST_INIT_ZERO);
        T_("attn.c_proj.weight", m->C, m->C, ST_INIT_NORMAL_RESID);
        T_("attn.c_proj.bias", m->C, 0, ST_INIT_ZERO);
        T_("ln_2.weight", m->C, 0, ST_INIT_ONE);
        T_("ln_2.bias", m->C, 0, ST_INIT_ZERO);
        T_("mlp.c_fc.weight", m->C, m->F, ST_INIT_NORMAL);
        T_("mlp.c_fc.bias", m->F, 0, ST_INIT_ZERO);
        T_("mlp.c_proj.weight", m->F, m->C, ST_INIT_NORMAL_RESID);
        T_("mlp.c_proj.bias", m->C, 0, ST_INIT_ZERO);
#undef T_
    }
    int h = (int)m->L + 1;
    add_tensor(m, cap, h, "transformer.ln_f.weight", m->C, 0, ST_INIT_ONE);
    add_tensor(m, cap, h, "transformer.ln_f.bias", m->C, 0, ST_INIT_ZERO);
    if (!m->tied)
        add_tensor(m, cap, h, "lm_head.weight", m->V, m->C, ST_INIT_NORMAL);
}

static void layout_llama(st_model *m, int cap)
{
    char n[80];
    int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    add_tensor(m, cap, 0, "model.embed_tokens.weight", m->V, m->C, ST_INIT_NORMAL);
    for (int64_t l = 0; l < m->L; l++) {
        int u = (int)l + 1;
#define T_(suffix, d0, d1, init)                                                \
    do {                                                                       \
        snprintf(n, sizeof n, "model.layers.%lld." suffix, (long long)l);      \
        add_tensor(m, cap, u, n, d0, d1, init);                                \
    } while (0)
        T_("input_layernorm.weight", m->C, 0, ST_INIT_ONE);
        T_("self_attn.q_proj.weight", qd, m->C, ST_INIT_NORMAL);
        T_("self_attn.k_proj.weight", kvd, m->C, ST_INIT_NORMAL);
        T_("self_attn.v_proj.weight", kvd, m->C, ST_INIT_NORMAL);
        T_("self_attn.o_proj.weight", m->C, qd, ST_INIT_NORMAL_RESID);
        T_("post_attention_layernorm.weight", m->C, 0, ST_INIT_ONE);
        T_("mlp.gate_proj.weight", m->F, m->C, ST_INIT_NORMAL);
        T_("mlp.up_proj.weight", m->F, m->C, ST_INIT_NORMAL);
        T_("mlp.down_proj.weight", m->C, m->F, ST_INIT_NORMAL_RESID);
#undef T_
    }
    int h = (int)m->L + 1;
    add_tensor(m, cap, h, "model.norm.weight", m->C, 0, ST_INIT_ONE);
    if (!m->tied)
        add_tensor(m, cap, h, "lm_head.weight", m->V, m->C, ST_INIT_NORMAL);
}

int st_model_init(st_model *m, const st_model_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->arch = cfg->arch;
    m->L = cfg->n_layer;
    m->C = cfg->d_model;
    m->H = cfg->n_head;
    m->KV = cfg->arch == ST_ARCH_GPT2 ? cfg->n_head : cfg->n_kv_head;
    m->hd = m->C / m->H;
    m->F = cfg->d_ff;
    m->V = cfg->vocab_size;
    /* 0: a config not from the schema (tests, tools), stored unpadded. */
    const int64_t vpad = cfg->vocab_padding > 0 ? cfg->vocab_padding : 1;
    m->Vp = (m->V + vpad - 1) / vpad * vpad;
    m->T = cfg->seq_len;
    m->tied = cfg->tie_embeddings;
    m->eps = (float)cfg->norm_eps;
    m->init_std = cfg->init_std;
    /* The config layer validates these; re-check what the kernels rely on
     * so a model built by a test or tool cannot index out of bounds. */
    if (m->L < 1 || m->C < 1 || m->H < 1 || m->KV < 1 || m->F < 1 || m->V < 1 ||
        m->T < 1 || m->C % m->H || m->H % m->KV ||
        (m->arch == ST_ARCH_LLAMA && m->hd % 2)) {
        st_error(NULL, "model shape is inconsistent (n_layer %lld, d_model %lld, "
                 "n_head %lld, n_kv_head %lld); hint: see shardtrain.ini(5) [model]",
                 (long long)m->L, (long long)m->C, (long long)m->H, (long long)m->KV);
        return ST_EXIT_USAGE;
    }
    m->n_units = (int)m->L + 2;
    m->units = st_alloc(sizeof(st_unit) * (size_t)m->n_units, ST_MEM_OTHER);
    for (int u = 0; u < m->n_units; u++) {
        m->units[u].kind = u == 0 ? ST_UNIT_EMBED
                         : u == m->n_units - 1 ? ST_UNIT_HEAD : ST_UNIT_BLOCK;
        m->units[u].layer = m->units[u].kind == ST_UNIT_BLOCK ? u - 1 : -1;
    }
    int cap = (int)m->L * 12 + 8;
    m->tensors = st_alloc(sizeof(st_tensor) * (size_t)cap, ST_MEM_OTHER);
    if (m->arch == ST_ARCH_GPT2)
        layout_gpt2(m, cap);
    else
        layout_llama(m, cap);
    if (m->arch == ST_ARCH_LLAMA) {
        size_t n = (size_t)(m->T * (m->hd / 2));
        m->rope_cos = st_alloc(sizeof(float) * n, ST_MEM_OTHER);
        m->rope_sin = st_alloc(sizeof(float) * n, ST_MEM_OTHER);
        st_rope_tables_for(m->rope_cos, m->rope_sin, m->T, m->hd, cfg);
    }
    return 0;
}

/* The base weight of each target in a block's tensor list (model.c's
 * layout order), matching st_lora_target_name's order. */
static const int lora_base_gpt2[] = {2, 4, 8, 10};         /* c_attn, attn.c_proj, c_fc, mlp.c_proj */
static const int lora_base_llama[] = {1, 2, 3, 4, 6, 7, 8}; /* q k v o gate up down */

int st_model_add_lora(st_model *m, const st_lora_config *lc)
{
    if (lc->rank <= 0)
        return 0;
    st_model_lora *lo = &m->lora;
    const int nt = st_lora_n_targets(m->arch);
    const int64_t r = lc->rank;
    lo->rank = (int)r;
    lo->alpha = lc->alpha;
    lo->scale = (float)(lc->alpha / (double)r);
    lo->dropout = lc->dropout;
    lo->targets = lc->target_mask;
    int per_block = 0;
    for (int i = 0; i < nt; i++)
        per_block += (lc->target_mask >> i & 1) * 2;
    m->lora_tensors = st_alloc(sizeof(st_tensor) * (size_t)(per_block * m->L + 1), ST_MEM_OTHER);
    for (int i = 0; i < ST_LORA_MAX_TARGETS; i++)
        lo->base[i] = -1, lo->a_off[i] = lo->b_off[i] = -1;
    for (int u = 1; u <= m->L; u++) {
        st_unit *un = &m->units[u];
        un->first_lora = m->n_lora_tensors;
        for (int i = 0; i < nt; i++) {
            if (!(lc->target_mask >> i & 1))
                continue;
            const int bi = m->arch == ST_ARCH_GPT2 ? lora_base_gpt2[i] : lora_base_llama[i];
            const st_tensor *w = &m->tensors[un->first_tensor + bi];
            /* Conv1D (gpt2) stores [in, out], Linear (llama) [out, in]. */
            const int64_t in = m->arch == ST_ARCH_GPT2 ? w->shape[0] : w->shape[1];
            const int64_t out = m->arch == ST_ARCH_GPT2 ? w->shape[1] : w->shape[0];
            const size_t stem = strlen(w->name) - strlen(".weight");
            for (int ab = 0; ab < 2; ab++) {
                st_tensor *t = &m->lora_tensors[m->n_lora_tensors++];
                memset(t, 0, sizeof *t);
                snprintf(t->name, sizeof t->name, "%.*s.lora_%c.weight", (int)stem, w->name,
                         ab ? 'B' : 'A');
                t->ndim = 2;
                t->shape[0] = ab ? out : r;
                t->shape[1] = ab ? r : in;
                t->numel = r * (ab ? out : in);
                t->unit = u;
                t->offset = un->lora_numel;
                /* PEFT's LoRA has no weight decay of its own beyond the
                 * optimizer's, which applies to every matrix. */
                t->decay = 1;
                t->init = ab ? ST_INIT_ZERO : ST_INIT_NORMAL;
                un->lora_numel += t->numel;
                un->n_lora++;
                if (u == 1) {
                    lo->base[i] = bi;
                    lo->in[i] = in;
                    lo->out[i] = out;
                    (ab ? lo->b_off : lo->a_off)[i] = t->offset;
                }
            }
        }
    }
    return 0;
}

void st_model_free(st_model *m)
{
    st_free(m->lora_tensors);
    st_free(m->units);
    st_free(m->tensors);
    st_free(m->rope_cos);
    st_free(m->rope_sin);
    memset(m, 0, sizeof *m);
}

const st_tensor *st_model_find(const st_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}


/* FNV-1a of the name: the tensor's random stream, so initial values do not
 * change when tensors are added or reordered. */
static uint64_t name_stream(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int64_t st_model_largest_unit(const st_model *m)
{
    int64_t largest = 0;
    for (int u = 0; u < m->n_units; u++)
        largest = m->units[u].numel > largest ? m->units[u].numel : largest;
    return largest;
}

void st_model_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                         float *out, uint64_t seed)
{
    const st_unit *un = &m->units[u];
    for (int i = un->first_tensor; i < un->first_tensor + un->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        int64_t a = t->offset > lo ? t->offset : lo;
        int64_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b)
            continue;
        uint64_t stream = name_stream(t->name);
        /* GPT-2's scheme: residual projections scaled by 1/sqrt(2 L) so the
         * residual stream's variance does not grow with depth. */
        double std = m->init_std;
        if (t->init == ST_INIT_NORMAL_RESID)
            std /= sqrt(2.0 * (double)m->L);
        for (int64_t e = a; e < b; e++) {
            float v;
            switch (t->init) {
            case ST_INIT_ZERO: v = 0.0f; break;
            case ST_INIT_ONE: v = 1.0f; break;
            default:
                v = (float)(std * st_normal3(seed ^ ((uint64_t)ST_RNG_INIT << 56),
                                             stream, (uint64_t)(e - t->offset)));
            }
            out[e - lo] = v;
        }
    }
    /* Padding beyond the unit's tensors stays zero. */
    for (int64_t e = lo > un->numel ? lo : un->numel; e < hi; e++)
        out[e - lo] = 0.0f;
}

void st_model_lora_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                              float *out, uint64_t seed)
{
    const st_unit *un = &m->units[u];
    for (int64_t e = lo; e < hi; e++)
        out[e - lo] = 0.0f;
    for (int i = un->first_lora; i < un->first_lora + un->n_lora; i++) {
        const st_tensor *t = &m->lora_tensors[i];
        int64_t a = t->offset > lo ? t->offset : lo;
        int64_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (t->init == ST_INIT_ZERO || a >= b)
            continue;
        const double bound = 1.0 / sqrt((double)t->shape[1]);
        const uint64_t stream = name_stream(t->name);
        for (int64_t e = a; e < b; e++)
            out[e - lo] = (float)(bound * (2.0 * st_uniform3(seed ^ ((uint64_t)ST_RNG_INIT << 56),
                                                             stream, (uint64_t)(e - t->offset)) -
                                           1.0));
    }
}

void st_model_train_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                               float *out, uint64_t seed)
{
    if (m->lora.rank)
        st_model_lora_init_range(m, u, lo, hi, out, seed);
    else
        st_model_init_range(m, u, lo, hi, out, seed);
}

double st_model_flops_per_token(const st_model *m)
{
    /* A frozen matrix (LoRA) costs its forward and its input's gradient,
     * 4 flops a parameter, not 6: no weight gradient is made. */
    const double per = m->lora.rank ? 4.0 : 6.0;
    double matmul = 0.0;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        /* Embedding lookups are not matrix products; the head is. */
        if (t->ndim == 2 && t->unit != 0)
            matmul += (double)t->numel;
    }
    if (m->tied)
        matmul += (double)(m->V * m->C);
    double adapters = 0.0;
    for (int i = 0; i < m->n_lora_tensors; i++)
        adapters += (double)m->lora_tensors[i].numel;
    return per * matmul + 6.0 * adapters + 12.0 * (double)(m->L * m->C * m->T);
}

/* Llama 3.1's scaling of one inverse frequency (Meta's reference, and
 * transformers' rope_type "llama3"): wavelengths shorter than
 * original / high_freq_factor are kept, longer than original /
 * low_freq_factor divided by factor, and in between interpolated linearly
 * in original / wavelength. */
static double llama3_scaled(double inv_freq, const st_model_config *c)
{
    const double two_pi = 6.283185307179586476925286766559;
    const double orig = (double)c->rope_original_seq_len, wavelen = two_pi / inv_freq;
    if (wavelen < orig / c->rope_high_freq_factor)
        return inv_freq;
    if (wavelen > orig / c->rope_low_freq_factor)
        return inv_freq / c->rope_factor;
    double smooth = (orig / wavelen - c->rope_low_freq_factor) /
                    (c->rope_high_freq_factor - c->rope_low_freq_factor);
    return (1.0 - smooth) * inv_freq / c->rope_factor + smooth * inv_freq;
}

static void rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hd, double theta,
                        const st_model_config *scaling)
{
    int64_t half = hd / 2;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < half; i++) {
            double inv_freq = pow(theta, -(double)(2 * i) / (double)hd);
            if (scaling)
                inv_freq = llama3_scaled(inv_freq, scaling);
            double a = (double)t * inv_freq;
            cos_t[t * half + i] = (float)cos(a);
            sin_t[t * half + i] = (float)sin(a);
        }
}

void st_rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hd, double theta)
{
    rope_tables(cos_t, sin_t, T, hd, theta, NULL);
}

void st_rope_tables_for(float *cos_t, float *sin_t, int64_t T, int64_t hd,
                        const st_model_config *cfg)
{
    rope_tables(cos_t, sin_t, T, hd, cfg->rope_theta,
                cfg->rope_scaling == ST_ROPE_LLAMA3 ? cfg : NULL);
}
