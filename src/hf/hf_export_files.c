/* The small files of a Hugging Face model directory (hf_export.h).  The
 * JSON is what transformers' own save_pretrained writes for these models,
 * reduced to the fields that change what loads: the shape and settings
 * (config.json), the token ids generation starts and stops on
 * (generation_config.json, and config.json's bos/eos), and the tokenizer
 * (tokenizer.json as the run used it; tokenizer_config.json naming
 * PreTrainedTokenizerFast, which reads tokenizer.json as it is).  Every
 * file is written atomically, so an interrupted export leaves no half
 * file that from_pretrained would choke on. */
#include "hf/hf_export.h"

#include "base/files.h"
#include "base/log.h"
#include "tok/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *model_config(const st_model *m, const st_model_config *mc)
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

json_t *st_hf_rope_scaling_json(const st_model_config *mc)
{
    if (mc->rope_scaling != ST_ROPE_LLAMA3)
        return NULL;
    return json_pack("{s:s, s:f, s:f, s:f, s:I}", "rope_type", "llama3",
                     "factor", mc->rope_factor, "low_freq_factor", mc->rope_low_freq_factor,
                     "high_freq_factor", mc->rope_high_freq_factor,
                     "original_max_position_embeddings", (json_int_t)mc->rope_original_seq_len);
}

/* dir/name holds the JSON (not released), written atomically (hf_export.h). */
int st_hf_write_json(const char *dir, const char *name, json_t *j)
{
    char path[8400], tmp[8420];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15))
                   : NULL;
    int step = text ? st_file_write_atomic(path, tmp, 0644, st_file_write_string, text) : -1;
    free(text);
    if (step != ST_ATOMIC_DONE) {
        st_error(path, "cannot write %s: %s; hint: check that the directory is writable",
                 name, step < 0 ? "out of memory" : strerror(errno));
        return ST_EXIT_FAILURE;
    }
    return 0;
}

/* Adds bos_token_id / eos_token_id to j when known. */
static void set_ids(json_t *j, int64_t bos, int64_t eos)
{
    if (bos >= 0)
        json_object_set_new(j, "bos_token_id", json_integer(bos));
    if (eos >= 0)
        json_object_set_new(j, "eos_token_id", json_integer(eos));
}

typedef struct {
    int fd;
} copy_src;

static int copy_writer(int out, void *ctx)
{
    copy_src *c = ctx;
    char buf[1 << 16];
    for (;;) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        if (st_write_all(out, buf, (size_t)r))
            return -1;
    }
}

int st_hf_copy_file(const char *src, const char *dst)
{
    copy_src c = {st_open_regular(src)};
    if (c.fd < 0) {
        st_error(src, "cannot open: %s; hint: check the path", strerror(errno));
        return ST_EXIT_USAGE;
    }
    char tmp[8420];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    int step = st_file_write_atomic(dst, tmp, 0644, copy_writer, &c);
    int e = errno;
    close(c.fd);
    if (step != ST_ATOMIC_DONE) {
        st_error(dst, "cannot copy %s here: %s; hint: check that the directory is writable",
                 src, strerror(e));
        return ST_EXIT_FAILURE;
    }
    return 0;
}

/* tokenizer.json (the file itself, or the one in a directory). */
static void tokenizer_json_path(const char *tokenizer, char *out, size_t n)
{
    struct stat st;
    if (stat(tokenizer, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(out, n, "%s/tokenizer.json", tokenizer);
    else
        snprintf(out, n, "%s", tokenizer);
}

/* dir/name's JSON object with the ids set, rewritten; a missing
 * generation_config.json is created. */
static int patch_ids(const char *dir, const char *name, int64_t bos, int64_t eos)
{
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j && strcmp(name, "generation_config.json") == 0)
        j = json_object();
    if (!json_is_object(j)) {
        st_error(path, "cannot read %s to add the tokenizer's ids: %s", name, err.text);
        json_decref(j);
        return ST_EXIT_USAGE;
    }
    set_ids(j, bos, eos);
    int rc = st_hf_write_json(dir, name, j);
    json_decref(j);
    return rc;
}

/* The tokenizer at `tokenizer`, loaded into *tok when it fits a
 * vocabulary of vocab_size ids.  Returns an exit status, the error
 * printed. */
static int load_fitting_tokenizer(const char *tokenizer, int64_t vocab_size, st_tokenizer **tok)
{
    int rc = st_tokenizer_load(tokenizer, tok);
    if (rc)
        return rc;
    if (st_tokenizer_vocab_size(*tok) > vocab_size) {
        st_error(tokenizer, "the tokenizer has %lld ids but the model's vocabulary is %lld; "
                 "hint: give the tokenizer the model was trained with",
                 (long long)st_tokenizer_vocab_size(*tok), (long long)vocab_size);
        st_tokenizer_free(*tok);
        return ST_EXIT_USAGE;
    }
    return 0;
}

int st_hf_check_tokenizer(const char *tokenizer, int64_t vocab_size)
{
    st_tokenizer *tok;
    int rc = load_fitting_tokenizer(tokenizer, vocab_size, &tok);
    if (!rc)
        st_tokenizer_free(tok);
    return rc;
}

int st_hf_add_tokenizer(const char *dir, int64_t vocab_size, int64_t max_len,
                        const char *tokenizer)
{
    st_tokenizer *tok;
    int rc = load_fitting_tokenizer(tokenizer, vocab_size, &tok);
    if (rc)
        return rc;
    char src[8400], dst[8400];
    const int64_t bos = st_tokenizer_bos_id(tok), eos = st_tokenizer_eos_id(tok);
    tokenizer_json_path(tokenizer, src, sizeof src);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    rc = st_hf_copy_file(src, dst);
    json_t *tc = json_pack("{s:s, s:I, s:b}", "tokenizer_class", "PreTrainedTokenizerFast",
                           "model_max_length", (json_int_t)max_len,
                           "clean_up_tokenization_spaces", 0);
    if (tc && bos >= 0)
        json_object_set_new(tc, "bos_token", json_string(st_tokenizer_token(tok, bos)));
    if (tc && eos >= 0)
        json_object_set_new(tc, "eos_token", json_string(st_tokenizer_token(tok, eos)));
    rc = rc ? rc : st_hf_write_json(dir, "tokenizer_config.json", tc);
    json_decref(tc);
    st_tokenizer_free(tok);
    rc = rc ? rc : patch_ids(dir, "config.json", bos, eos);
    return rc ? rc : patch_ids(dir, "generation_config.json", bos, eos);
}

int st_hf_write_model_files(const char *dir, const st_model *m, const st_model_config *mc,
                            const char *tokenizer)
{
    json_t *cfg = model_config(m, mc), *gen = json_object(), *rs = st_hf_rope_scaling_json(mc);
    if (cfg && rs && m->arch == ST_ARCH_LLAMA)
        json_object_set(cfg, "rope_scaling", rs);
    json_decref(rs);
    int rc = st_hf_write_json(dir, "config.json", cfg);
    rc = rc ? rc : st_hf_write_json(dir, "generation_config.json", gen);
    json_decref(cfg);
    json_decref(gen);
    return rc || !tokenizer ? rc : st_hf_add_tokenizer(dir, m->V, m->T, tokenizer);
}
