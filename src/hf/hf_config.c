/* Checking a Hugging Face config.json against the configured model (see
 * hf_import.h).  The INI stays the single source of the model's shape: the
 * config is only compared, field by field, so weights of another shape stop
 * with a message naming the field instead of a tensor shape puzzle, and a
 * setting the kernels do not implement (a rope_scaling other than Llama
 * 3.1's, another activation, biases in Llama) is refused instead of
 * silently ignored.
 *
 * A field that is absent is not checked, except where transformers has a
 * well-known default that changes the model (tie_word_embeddings,
 * num_key_value_heads, rope_theta, n_inner), which then applies. */
#include "base/files.h"
#include "hf/hf_import.h"
#include "hf/safetensors_parse.h"
#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *path;
    json_t *root;
} cfgfile;

static int type_error(const cfgfile *c, const char *field, const char *want)
{
    st_error(c->path, "field \"%s\" is not %s; hint: the file is not a transformers "
             "config", field, want);
    return ST_EXIT_USAGE;
}

static int mismatch_int(const cfgfile *c, const char *field, long long have,
                        const char *key, long long want)
{
    st_error(c->path, "%s is %lld, but model.%s is %lld; hint: set [model] %s = %lld to "
             "match the weights, or use weights of the configured shape",
             field, have, key, want, key, have);
    return ST_EXIT_USAGE;
}

/* Integer field (absent: def, or unchecked when def < 0) against want. */
static int check_int(const cfgfile *c, const char *field, long long def, const char *key,
                     long long want)
{
    json_t *v = json_object_get(c->root, field);
    long long have;
    if (!v || json_is_null(v)) {
        if (def < 0)
            return 0;
        have = def;
    } else if (json_is_integer(v)) {
        have = json_integer_value(v);
    } else {
        return type_error(c, field, "an integer");
    }
    return have == want ? 0 : mismatch_int(c, field, have, key, want);
}

static int check_float(const cfgfile *c, const char *field, double def, const char *key,
                       double want)
{
    json_t *v = json_object_get(c->root, field);
    double have;
    if (!v || json_is_null(v)) {
        if (def < 0)
            return 0;
        have = def;
    } else if (json_is_number(v)) {
        have = json_number_value(v);
    } else {
        return type_error(c, field, "a number");
    }
    /* Both sides come from decimal text; allow for a different spelling. */
    if (fabs(have - want) <= 1e-9 * fmax(fabs(have), fabs(want)))
        return 0;
    st_error(c->path, "%s is %g, but model.%s is %g; hint: set [model] %s = %g to match "
             "the weights", field, have, key, want, key, have);
    return ST_EXIT_USAGE;
}

static int check_bool(const cfgfile *c, const char *field, int def, const char *key,
                      int want)
{
    json_t *v = json_object_get(c->root, field);
    int have;
    if (!v || json_is_null(v))
        have = def;
    else if (json_is_boolean(v))
        have = json_is_true(v);
    else
        return type_error(c, field, "true or false");
    if (have == want)
        return 0;
    st_error(c->path, "%s is %s, but model.%s is %s; hint: set [model] %s = %s to match "
             "the weights", field, have ? "true" : "false", key, want ? "true" : "false",
             key, have ? "true" : "false");
    return ST_EXIT_USAGE;
}

/* A string field that, when present, must be one of the accepted values. */
static int check_string(const cfgfile *c, const char *field, const char *const *ok,
                        const char *why)
{
    json_t *v = json_object_get(c->root, field);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return type_error(c, field, "a string");
    for (int i = 0; ok[i]; i++)
        if (strcmp(json_string_value(v), ok[i]) == 0)
            return 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", json_string_value(v));
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = '?';
    st_error(c->path, "%s is '%s'; hint: %s", field, buf, why);
    return ST_EXIT_USAGE;
}

/* A feature flag the kernels do not implement: absent, null or false only. */
static int check_absent(const cfgfile *c, const char *field, const char *why)
{
    json_t *v = json_object_get(c->root, field);
    if (!v || json_is_null(v) || json_is_false(v))
        return 0;
    st_error(c->path, "%s is set; hint: %s", field, why);
    return ST_EXIT_USAGE;
}

/* rope_scaling: absent or null for plain RoPE, else Llama 3.1's "llama3"
 * with the model's four numbers.  Any other kind (linear, dynamic, yarn,
 * longrope) would run as plain RoPE, so it is refused. */
static int check_rope_scaling(const cfgfile *c, const st_model_config *mc)
{
    json_t *rs = json_object_get(c->root, "rope_scaling");
    if (!rs || json_is_null(rs)) {
        if (mc->rope_scaling == ST_ROPE_NONE)
            return 0;
        st_error(c->path, "rope_scaling is absent, but model.rope_scaling is llama3; hint: "
                 "set [model] rope_scaling = none to match the weights");
        return ST_EXIT_USAGE;
    }
    json_t *t = json_object_get(rs, "rope_type");
    const char *type = json_string_value(t ? t : json_object_get(rs, "type"));
    if (!json_is_object(rs) || !type || strcmp(type, "llama3") != 0) {
        char buf[64];
        st_error(c->path, "rope_scaling of type '%s' is not implemented; hint: shardtrain "
                 "implements Llama 3.1's llama3 scaling only, and these weights would run "
                 "with plain RoPE, so they are refused",
                 st_printable(type ? type : "(none)", buf, sizeof buf));
        return ST_EXIT_USAGE;
    }
    if (mc->rope_scaling != ST_ROPE_LLAMA3) {
        st_error(c->path, "rope_scaling is llama3, but model.rope_scaling is none; hint: set "
                 "[model] rope_scaling = llama3, or leave it out to take config.json's");
        return ST_EXIT_USAGE;
    }
    /* transformers refuses a llama3 scaling without its four numbers. */
    static const char *const need[] = {"factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    for (int i = 0; i < 4; i++)
        if (!json_is_number(json_object_get(rs, need[i]))) {
            st_error(c->path, "rope_scaling of rope_type llama3 lacks a number \"%s\"; hint: "
                     "Llama 3.1's config.json gives factor, low_freq_factor, "
                     "high_freq_factor and original_max_position_embeddings", need[i]);
            return ST_EXIT_USAGE;
        }
    cfgfile sub = {c->path, rs};
    int rc = check_float(&sub, "factor", -1, "rope_factor", mc->rope_factor);
    rc = rc ? rc : check_float(&sub, "low_freq_factor", -1, "rope_low_freq_factor",
                               mc->rope_low_freq_factor);
    rc = rc ? rc : check_float(&sub, "high_freq_factor", -1, "rope_high_freq_factor",
                               mc->rope_high_freq_factor);
    return rc ? rc : check_int(&sub, "original_max_position_embeddings", -1,
                               "rope_original_seq_len", mc->rope_original_seq_len);
}

static int check_gpt2(const cfgfile *c, const st_model_config *mc)
{
    static const char *const type[] = {"gpt2", NULL};
    static const char *const act[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    json_t *ne = json_object_get(c->root, "n_embd");
    long long embd = json_is_integer(ne) ? json_integer_value(ne) : mc->d_model;
    int rc = check_string(c, "model_type", type, "model.arch is gpt2; set model.arch to "
                          "the weights' architecture");
    rc = rc ? rc : check_int(c, "n_layer", -1, "n_layer", mc->n_layer);
    rc = rc ? rc : check_int(c, "n_embd", -1, "d_model", mc->d_model);
    rc = rc ? rc : check_int(c, "n_head", -1, "n_head", mc->n_head);
    rc = rc ? rc : check_int(c, "n_inner", 4 * embd, "d_ff", mc->d_ff);
    rc = rc ? rc : check_int(c, "vocab_size", -1, "vocab_size", mc->vocab_size);
    rc = rc ? rc : check_int(c, "n_positions", -1, "seq_len", mc->seq_len);
    rc = rc ? rc : check_float(c, "layer_norm_epsilon", -1, "norm_eps", mc->norm_eps);
    rc = rc ? rc : check_bool(c, "tie_word_embeddings", 1, "tie_embeddings",
                              mc->tie_embeddings);
    rc = rc ? rc : check_string(c, "activation_function", act, "shardtrain's GPT-2 "
                                "computes GELU with the tanh approximation (gelu_new)");
    return rc;
}

static int check_llama(const cfgfile *c, const st_model_config *mc)
{
    static const char *const type[] = {"llama", NULL};
    static const char *const act[] = {"silu", NULL};
    json_t *nh = json_object_get(c->root, "num_attention_heads");
    long long heads = json_is_integer(nh) ? json_integer_value(nh) : mc->n_head;
    int rc = check_string(c, "model_type", type, "model.arch is llama; set model.arch to "
                          "the weights' architecture");
    rc = rc ? rc : check_int(c, "num_hidden_layers", -1, "n_layer", mc->n_layer);
    rc = rc ? rc : check_int(c, "hidden_size", -1, "d_model", mc->d_model);
    rc = rc ? rc : check_int(c, "num_attention_heads", -1, "n_head", mc->n_head);
    rc = rc ? rc : check_int(c, "num_key_value_heads", heads, "n_kv_head", mc->n_kv_head);
    rc = rc ? rc : check_int(c, "intermediate_size", -1, "d_ff", mc->d_ff);
    rc = rc ? rc : check_int(c, "vocab_size", -1, "vocab_size", mc->vocab_size);
    rc = rc ? rc : check_float(c, "rms_norm_eps", -1, "norm_eps", mc->norm_eps);
    rc = rc ? rc : check_float(c, "rope_theta", 10000.0, "rope_theta", mc->rope_theta);
    rc = rc ? rc : check_bool(c, "tie_word_embeddings", 0, "tie_embeddings",
                              mc->tie_embeddings);
    if (!rc && mc->n_head > 0) {
        json_t *hd = json_object_get(c->root, "head_dim");
        if (hd && !json_is_null(hd) &&
            (!json_is_integer(hd) || json_integer_value(hd) != mc->d_model / mc->n_head)) {
            st_error(c->path, "head_dim is not d_model / n_head = %lld; hint: shardtrain's "
                     "Llama derives the head size from d_model and n_head",
                     (long long)(mc->d_model / mc->n_head));
            rc = ST_EXIT_USAGE;
        }
    }
    rc = rc ? rc : check_string(c, "hidden_act", act, "shardtrain's Llama computes SwiGLU "
                                "with SiLU");
    rc = rc ? rc : check_rope_scaling(c, mc);
    rc = rc ? rc : check_absent(c, "attention_bias", "shardtrain's Llama has no biases");
    rc = rc ? rc : check_absent(c, "mlp_bias", "shardtrain's Llama has no biases");
    return rc;
}

int st_hf_check_config(const char *path, const st_model_config *mc)
{
    json_error_t je;
    /* Through a regular-file check: a FIFO named config.json must not hang. */
    FILE *fp = st_fopen_regular(path);
    if (!fp) {
        st_error(path, "cannot open: %s", errno == EINVAL ? "not a regular file"
                                                          : strerror(errno));
        return ST_EXIT_USAGE;
    }
    cfgfile c = {path, json_loadf(fp, JSON_REJECT_DUPLICATES, &je)};
    fclose(fp);
    if (!c.root) {
        char why[160];
        st_error(path, "not valid JSON (line %d: %s); hint: config.json is transformers' "
                 "model config", je.line, st_printable(je.text, why, sizeof why));
        return ST_EXIT_USAGE;
    }
    int rc;
    if (!json_is_object(c.root)) {
        st_error(path, "is not a JSON object; hint: config.json is transformers' model "
                 "config");
        rc = ST_EXIT_USAGE;
    } else {
        rc = mc->arch == ST_ARCH_GPT2 ? check_gpt2(&c, mc) : check_llama(&c, mc);
    }
    json_decref(c.root);
    return rc;
}
