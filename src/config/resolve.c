/* What the configuration becomes once config_load.c has read the file and the
 * -s overrides and put the schema defaults under them, and whether it
 * holds together.  Resolving fills what nobody wrote: the model preset,
 * then model.init's config.json over it (hf_shape.c), then, for what is
 * still at its schema default, the defaults derived from other keys
 * (n_kv_head, d_ff, tie_embeddings, global_batch); a value the file or the
 * command line set is never replaced.  Validating checks the keys against
 * each other once all are known (divisibility, the architecture's needs,
 * the bounds on products in limits.c); each key's own range was checked
 * when its text was converted.  An error points at the key the user set,
 * so the line shown is one to edit. */
#include "config/resolve.h"
#include "config/hf_shape.h"
#include "config/limits.h"
#include "config/model_shape.h"

#include "base/log.h"
#include "config/origin.h"
#include "config/schema.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static struct st_config_origin *origin(const st_config *cfg, const char *sec, const char *key)
{
    return &cfg->origin[st_schema_index(sec, key)];
}

static bool is_explicit(const st_config *cfg, const char *sec, const char *key)
{
    return origin(cfg, sec, key)->src >= ST_FROM_FILE;
}

/* ---- presets, config.json and derived defaults ----------------------------- */

/* Where to set [model] key when the file and command line left it alone,
 * recording src as its origin; NULL when the user set it. */
static void *implicit_slot(st_config *cfg, const char *key, int src)
{
    int idx = st_schema_index("model", key);
    if (cfg->origin[idx].src >= ST_FROM_FILE)
        return NULL;
    cfg->origin[idx].src = src;
    cfg->origin[idx].line = 0;
    return st_schema_field(cfg, &st_schema[idx]);
}

/* Set a key that the file and command line left alone. */
static void set_implicit_int(st_config *cfg, const char *key, int64_t v, int src)
{
    int64_t *p = implicit_slot(cfg, key, src);
    if (p)
        *p = v;
}

static void set_implicit_double(st_config *cfg, const char *key, double v, int src)
{
    double *p = implicit_slot(cfg, key, src);
    if (p)
        *p = v;
}

/* model.init's config.json, over the preset: it describes the weights.
 * Only the fields it has; what it lacks keeps the preset's or the derived
 * default. */
static int apply_hf_shape(st_config *cfg)
{
    st_model_config *m = &cfg->model;
    st_hf_shape h;
    int got = st_hf_shape_read(m->init, &h, &cfg->hf_config);
    if (got < 0) {
        st_error(NULL, "out of memory");
        return ST_EXIT_FAILURE;
    }
    if (got == 0)
        return 0;
    int ai = st_schema_index("model", "arch");
    if (h.arch >= 0 && cfg->origin[ai].src < ST_FROM_FILE) {
        m->arch = h.arch;
        cfg->origin[ai].src = ST_FROM_HF;
    }
    const struct { const char *key; int64_t v; } ints[] = {
        {"n_layer", h.n_layer}, {"n_head", h.n_head}, {"n_kv_head", h.n_kv_head},
        {"d_model", h.d_model}, {"d_ff", h.d_ff}, {"vocab_size", h.vocab_size},
        {"seq_len", h.seq_len}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v > 0)
            set_implicit_int(cfg, ints[i].key, ints[i].v, ST_FROM_HF);
    if (h.rope_theta > 0)
        set_implicit_double(cfg, "rope_theta", h.rope_theta, ST_FROM_HF);
    if (h.norm_eps > 0)
        set_implicit_double(cfg, "norm_eps", h.norm_eps, ST_FROM_HF);
    int ti = st_schema_index("model", "tie_embeddings");
    if (h.tie_embeddings >= 0 && cfg->origin[ti].src < ST_FROM_FILE) {
        m->tie_embeddings = h.tie_embeddings;
        cfg->origin[ti].src = ST_FROM_HF;
    }
    int ri = st_schema_index("model", "rope_scaling");
    if (h.rope_llama3 && cfg->origin[ri].src < ST_FROM_FILE) {
        m->rope_scaling = ST_ROPE_LLAMA3;
        cfg->origin[ri].src = ST_FROM_HF;
        if (h.rope_factor > 0)
            set_implicit_double(cfg, "rope_factor", h.rope_factor, ST_FROM_HF);
        if (h.rope_low_freq_factor > 0)
            set_implicit_double(cfg, "rope_low_freq_factor", h.rope_low_freq_factor, ST_FROM_HF);
        if (h.rope_high_freq_factor > 0)
            set_implicit_double(cfg, "rope_high_freq_factor", h.rope_high_freq_factor,
                                ST_FROM_HF);
        if (h.rope_original_seq_len > 0)
            set_implicit_int(cfg, "rope_original_seq_len", h.rope_original_seq_len, ST_FROM_HF);
    }
    return 0;
}

static int resolve_lora_targets(st_config *cfg);

int st_config_resolve(st_config *cfg)
{
    st_model_config *m = &cfg->model;

    const st_preset *p = *m->preset ? st_preset_find(m->preset) : NULL;
    if (p) {
        int ai = st_schema_index("model", "arch");
        if (p->arch >= 0 && cfg->origin[ai].src < ST_FROM_FILE) {
            m->arch = p->arch;
            cfg->origin[ai].src = ST_FROM_PRESET;
        }
        set_implicit_int(cfg, "n_layer", p->n_layer, ST_FROM_PRESET);
        set_implicit_int(cfg, "n_head", p->n_head, ST_FROM_PRESET);
        set_implicit_int(cfg, "n_kv_head", p->n_kv_head[m->arch] ? p->n_kv_head[m->arch] : m->n_head,
                         ST_FROM_PRESET);
        set_implicit_int(cfg, "d_model", p->d_model, ST_FROM_PRESET);
        set_implicit_int(cfg, "d_ff", p->d_ff[m->arch], ST_FROM_PRESET);
        set_implicit_int(cfg, "vocab_size", p->vocab_size, ST_FROM_PRESET);
        set_implicit_int(cfg, "seq_len", p->seq_len, ST_FROM_PRESET);
        if (p->rope_theta > 0)
            set_implicit_double(cfg, "rope_theta", p->rope_theta, ST_FROM_PRESET);
        if (p->norm_eps > 0)
            set_implicit_double(cfg, "norm_eps", p->norm_eps, ST_FROM_PRESET);
        int ti = st_schema_index("model", "tie_embeddings");
        if (p->tie_embeddings >= 0 && cfg->origin[ti].src < ST_FROM_FILE) {
            m->tie_embeddings = p->tie_embeddings;
            cfg->origin[ti].src = ST_FROM_PRESET;
        }
    }

    int rc = apply_hf_shape(cfg);
    if (rc)
        return rc;

    /* Derived defaults, for what neither the preset, config.json nor the
     * user set. */
    if (origin(cfg, "model", "n_kv_head")->src == ST_FROM_DEFAULT)
        m->n_kv_head = m->n_head;
    if (origin(cfg, "model", "d_ff")->src == ST_FROM_DEFAULT)
        m->d_ff = m->arch == ST_ARCH_GPT2 ? 4 * m->d_model : ((8 * m->d_model + 2) / 3 + 15) / 16 * 16;
    if (origin(cfg, "model", "tie_embeddings")->src == ST_FROM_DEFAULT)
        m->tie_embeddings = m->arch == ST_ARCH_GPT2;
    if (origin(cfg, "train", "global_batch")->src == ST_FROM_DEFAULT)
        cfg->train.global_batch = cfg->train.micro_batch;
    if (origin(cfg, "lora", "alpha")->src == ST_FROM_DEFAULT)
        /* 1 without LoRA: unused, but printed by `check`, which must read
         * back. */
        cfg->lora.alpha = cfg->lora.rank > 0 ? (double)cfg->lora.rank : 1.0;
    return cfg->lora.rank > 0 ? resolve_lora_targets(cfg) : 0;
}

/* ---- cross-key checks ------------------------------------------------------ */

/* Cross-key errors point at `primary` when the user set it, else at
 * `other` when the user set that, so the line shown is one to edit. */
static int cross_key_error(const st_config *cfg, const char *sec, const char *primary,
                           const char *other, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int cross_key_error(const st_config *cfg, const char *sec, const char *primary,
                           const char *other, const char *fmt, ...)
{
    const char *key = primary;
    if (!is_explicit(cfg, sec, primary) && is_explicit(cfg, sec, other))
        key = other;
    va_list ap;
    va_start(ap, fmt);
    int rc = st_config_verror(cfg, sec, key, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- LoRA targets ---------------------------------------------------------- */

/* The bits one word of lora.targets names; 0 when it names none. */
static unsigned lora_target_bits(int arch, const char *w, size_t n)
{
    if (n == 3 && !strncmp(w, "all", 3))
        return (1u << st_lora_n_targets(arch)) - 1;
    if (arch == ST_ARCH_GPT2 && n == 6 && !strncmp(w, "c_proj", 6))
        return 1u << 1 | 1u << 3;
    for (int i = 0; i < st_lora_n_targets(arch); i++) {
        const char *t = st_lora_target_name(arch, i);
        size_t tn = strlen(t);
        if (n == tn && !strncmp(w, t, n))
            return 1u << i;
        /* llama: q for q_proj */
        if (arch == ST_ARCH_LLAMA && n == tn - 5 && !strncmp(w, t, n))
            return 1u << i;
    }
    return 0;
}

/* Words are separated by commas and/or blanks.  An empty item between
 * commas, a layer named twice (an alias included) and `all` beside names
 * are refused: each is most likely a typo or an edit gone wrong, and
 * accepting it would hide which layers were meant. */
static int resolve_lora_targets(st_config *cfg)
{
    const int arch = cfg->model.arch;
    const char *const all = cfg->lora.targets;
    const char *s = all;
    unsigned mask = 0;
    int words = 0, has_all = 0;
    char q[ST_QUOTE_BUF];
    while (*s == ' ')
        s++;
    if (!*s)
        return cross_key_error(cfg, "lora", "targets", "rank",
                               "lora.targets is empty; hint: name the layers to adapt, or all");
    for (;;) {
        size_t n = strcspn(s, ", ");
        if (!n)
            return cross_key_error(cfg, "lora", "targets", "rank",
                                   "lora.targets '%s' has an empty item; hint: remove the "
                                   "extra comma", st_config_quote(all, strlen(all), q));
        unsigned b = lora_target_bits(arch, s, n);
        if (!b) {
            char names[160] = "";
            for (int i = 0; i < st_lora_n_targets(arch); i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         i ? ", " : "", st_lora_target_name(arch, i));
            return cross_key_error(cfg, "lora", "targets", "arch",
                                   "lora.targets names \"%s\", which arch %s does not have; "
                                   "hint: targets are all or some of %s",
                                   st_config_quote(s, n, q),
                                   arch == ST_ARCH_GPT2 ? "gpt2" : "llama", names);
        }
        const int is_all = n == 3 && !strncmp(s, "all", 3);
        if (words && (is_all || has_all) && !(is_all && has_all))
            return cross_key_error(cfg, "lora", "targets", "rank",
                                   "lora.targets combines all with layer names; "
                                   "hint: write all alone, or list the layers");
        has_all |= is_all;
        if (mask & b)
            return cross_key_error(cfg, "lora", "targets", "rank",
                                   "lora.targets names \"%s\" a second time (itself or by "
                                   "another name); hint: name each layer once",
                                   st_config_quote(s, n, q));
        mask |= b;
        words++;
        s += n;
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        if (*s == ',') {
            s++;
            while (*s == ' ')
                s++;
        }
    }
    cfg->lora.target_mask = mask;
    return 0;
}

int st_config_validate(const st_config *cfg)
{
    st_shape_problem p;
    if (st_model_shape_problem(&cfg->model, &p))
        return cross_key_error(cfg, "model", p.key, p.other, "%s; %s", p.what, p.hint);
    if (cfg->train.global_batch % cfg->train.micro_batch)
        return cross_key_error(cfg, "train", "global_batch", "micro_batch",
                               "train.global_batch = %lld is not a multiple of "
                               "train.micro_batch = %lld; hint: make it a multiple",
                               (long long)cfg->train.global_batch,
                               (long long)cfg->train.micro_batch);
    if (cfg->optim.min_lr > cfg->optim.lr)
        return cross_key_error(cfg, "optim", "min_lr", "lr",
                               "optim.min_lr = %g is above optim.lr = %g; hint: min_lr <= lr",
                               cfg->optim.min_lr, cfg->optim.lr);
    return st_config_check_sizes(cfg);
}
