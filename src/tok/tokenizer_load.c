/* Loading a Hugging Face tokenizer.json into the tables of
 * tokenizer_impl.h: the file, its BPE model (vocabulary, merges, added
 * tokens with the ids the library gives them) and the checks and messages
 * every part shares; the text pipeline's parts (normaliser,
 * pre-tokeniser, post-processor, decoder) are tokenizer_pipeline.c's.
 * Every part of the file is either understood exactly or refused with one
 * line naming the part and what shardtrain supports: a tokenizer that
 * encodes slightly differently from the library would silently train a
 * model on the wrong ids, which is worse than no tokenizer.  Jansson
 * parses. */
#include "tok/tokenizer_impl.h"

#include "base/log.h"
#include "base/stage_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- model ----------------------------------------------------------------- */

/* A token string as the model sees it: the raw bytes of a byte-level
 * token (each character mapped back), else the string itself.  Returns 0
 * and sets *out (malloc'd) and *len, or 1 when a character of a byte-level
 * token is outside the byte map (such a token can only be an added one). */
static int model_bytes(const st_tokenizer *t, const char *s, size_t n, char **out,
                       size_t *len)
{
    *out = malloc(n + 1);
    if (!*out)
        return -1;
    if (!t->byte_level) {
        memcpy(*out, s, n);
        *len = n;
        return 0;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int found;
        size_t k = st_tok_char_to_byte((const unsigned char *)s + i, n - i, &found);
        if (found < 0) {
            free(*out);
            *out = NULL;
            return 1;
        }
        (*out)[o++] = (char)found;
        i += k;
    }
    *len = o;
    return 0;
}

static int set_token(st_tok_loader *L, const char *s, size_t n, json_int_t id)
{
    st_tokenizer *t = L->t;
    if (id < 0 || (uint64_t)id >= t->n_ids)
        return st_tok_bad(L, "a token id is negative or past the vocabulary");
    free(t->id_token[id]);
    if (!(t->id_token[id] = st_tok_dup_n(s, n)))
        return st_tok_oom(L);
    t->id_token_len[id] = (uint32_t)n;
    char *mb;
    size_t ml;
    int rc = model_bytes(t, s, n, &mb, &ml);
    if (rc < 0 || st_tok_strmap_put(&t->strings, s, n, (uint32_t)id))
        return st_tok_oom(L);
    if (rc == 0 && st_tok_strmap_put(&t->vocab, mb, ml, (uint32_t)id)) {
        free(mb);
        return st_tok_oom(L);
    }
    free(mb);
    return 0;
}

static int merge_halves(json_t *m, const char **a, size_t *alen, const char **b, size_t *blen)
{
    if (json_is_string(m)) { /* "a b", the older format */
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return -1;
        *a = s, *alen = (size_t)(sp - s), *b = sp + 1, *blen = strlen(sp + 1);
        return 0;
    }
    json_t *x = json_array_get(m, 0), *y = json_array_get(m, 1);
    if (json_array_size(m) != 2 || !json_is_string(x) || !json_is_string(y))
        return -1;
    *a = json_string_value(x), *alen = json_string_length(x);
    *b = json_string_value(y), *blen = json_string_length(y);
    return 0;
}

static int load_merges(st_tok_loader *L, json_t *merges)
{
    st_tokenizer *t = L->t;
    json_t *m;
    size_t r;
    char *ab = NULL;
    size_t ab_cap = 0;
    json_array_foreach(merges, r, m) {
        const char *a, *b;
        size_t alen, blen;
        uint32_t ia, ib, iab;
        if (merge_halves(m, &a, &alen, &b, &blen)) {
            free(ab);
            st_error(L->path, "merge %zu is not a pair of tokens; "
                     "the file is not a valid tokenizer.json", r);
            return ST_EXIT_USAGE;
        }
        if (alen + blen + 1 > ab_cap) {
            ab_cap = 2 * (alen + blen + 1);
            char *p = realloc(ab, ab_cap);
            if (!p) {
                free(ab);
                return st_tok_oom(L);
            }
            ab = p;
        }
        memcpy(ab, a, alen);
        memcpy(ab + alen, b, blen);
        if (!st_tok_strmap_get(&t->strings, a, alen, &ia) ||
            !st_tok_strmap_get(&t->strings, b, blen, &ib) ||
            !st_tok_strmap_get(&t->strings, ab, alen + blen, &iab)) {
            free(ab);
            st_error(L->path, "merge %zu names a token missing from the vocabulary; "
                     "the file is not a valid tokenizer.json", r);
            return ST_EXIT_USAGE;
        }
        if (st_tok_pairmap_put(&t->merges, ia, ib, (uint32_t)r, iab)) {
            free(ab);
            return st_tok_oom(L);
        }
    }
    free(ab);
    return 0;
}

/* The ids the library gives added tokens, which are not the file's: on
 * loading it adds them again (tokenizers' serialization.rs), so a token
 * of the model's vocabulary keeps its vocabulary id and any other takes
 * the next id past both the vocabulary's size and the largest added id so
 * far.  A file whose ids disagree gets the library's warning. */
static int assign_added_ids(st_tok_loader *L, json_t *vocab, json_t *added, json_int_t *max_id)
{
    size_t i, n = json_array_size(added);
    json_t *x;
    const int64_t vocab_size = (int64_t)json_object_size(vocab);
    int64_t max_added = -1;
    L->added_ids = calloc(n ? n : 1, sizeof *L->added_ids);
    if (!L->added_ids)
        return st_tok_oom(L);
    json_array_foreach(added, i, x) {
        json_t *c = json_object_get(x, "content"), *in_vocab, *id = json_object_get(x, "id");
        if (!json_is_string(c) || !json_string_length(c))
            return st_tok_bad(L, "an added token without content");
        int64_t got = -1;
        for (size_t k = 0; k < i && got < 0; k++)
            if (json_equal(json_object_get(json_array_get(added, k), "content"), c))
                got = L->added_ids[k];
        if (got < 0 && json_is_integer(in_vocab = json_object_get(vocab, json_string_value(c))))
            got = json_integer_value(in_vocab);
        if (got < 0)
            got = max_added < 0 ? vocab_size
                  : max_added >= vocab_size || vocab_size == 0 ? max_added + 1 : vocab_size;
        if (got >= INT32_MAX)
            return st_tok_bad(L, "an added token's id is past 2^31");
        if (json_is_integer(id) && json_integer_value(id) != got) {
            char buf[64];
            st_warn("%s: added token '%s' has id %lld in the file; the tokenizers library "
                    "gives it %lld, and so does shardtrain", L->path,
                    st_printable(json_string_value(c), buf, sizeof buf),
                    (long long)json_integer_value(id), (long long)got);
        }
        L->added_ids[i] = got;
        if (got > max_added)
            max_added = got;
        if (got > *max_id)
            *max_id = got;
    }
    return 0;
}

static int load_model(st_tok_loader *L, json_t *model, json_t *added)
{
    st_tokenizer *t = L->t;
    const char *type = st_tok_type_of(model);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (type ? strcmp(type, "BPE") != 0 : !merges)
        return st_tok_refuse(L, "model type", type);
    if (!json_is_object(vocab) || !json_is_array(merges))
        return st_tok_bad(L, "the BPE model has no vocab object or merges list");
    json_t *v = json_object_get(model, "dropout");
    if (v && !json_is_null(v))
        return st_tok_refuse(L, "BPE option", "dropout");
    const char *fixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(model, fixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
            return st_tok_refuse(L, "BPE option", fixes[i]);
    }
    t->fuse_unk = st_tok_bool_member(model, "fuse_unk", 0);
    t->byte_fallback = st_tok_bool_member(model, "byte_fallback", 0);
    t->ignore_merges = st_tok_bool_member(model, "ignore_merges", 0);

    /* Ids: the vocabulary's, then the added tokens' (which may reuse them). */
    json_int_t max_id = -1;
    const char *k;
    json_t *x;
    json_object_foreach(vocab, k, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= INT32_MAX)
            return st_tok_bad(L, "a vocabulary id is not an integer in [0, 2^31)");
        if (json_integer_value(x) > max_id)
            max_id = json_integer_value(x);
    }
    int rc = assign_added_ids(L, vocab, added, &max_id);
    if (rc)
        return rc;
    t->n_ids = (uint32_t)(max_id + 1);
    t->id_token = calloc(t->n_ids ? t->n_ids : 1, sizeof *t->id_token);
    t->id_token_len = calloc(t->n_ids ? t->n_ids : 1, sizeof *t->id_token_len);
    t->id_special = calloc(t->n_ids ? t->n_ids : 1, 1);
    if (!t->id_token || !t->id_token_len || !t->id_special)
        return st_tok_oom(L);
    json_object_foreach(vocab, k, x) {
        int rc = set_token(L, k, strlen(k), json_integer_value(x));
        if (rc)
            return rc;
    }
    rc = load_merges(L, merges);
    if (rc)
        return rc;

    v = json_object_get(model, "unk_token");
    t->unk_id = -1;
    if (json_is_string(v)) {
        uint32_t id;
        if (!st_tok_strmap_get(&t->strings, json_string_value(v), json_string_length(v), &id))
            return st_tok_bad(L, "the BPE unk_token is not in the vocabulary");
        t->unk_id = id;
    }
    for (unsigned b = 0; b < 256; b++) {
        char hex[8], c[2];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        if (!st_tok_strmap_get(&t->strings, hex, 6, &t->byte_token[b]))
            t->byte_token[b] = UINT32_MAX;
        size_t cl = st_tok_byte_char(b, c);
        if (!t->byte_level || !st_tok_strmap_get(&t->strings, c, cl, &t->byte_sym[b]))
            t->byte_sym[b] = UINT32_MAX;
    }
    return 0;
}

static int load_added(st_tok_loader *L, json_t *added, int has_normalizer)
{
    st_tokenizer *t = L->t;
    size_t i, n = json_array_size(added);
    json_t *x;
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added)
        return st_tok_oom(L);
    json_array_foreach(added, i, x) {
        json_t *c = json_object_get(x, "content");
        const char *opts[] = {"single_word", "lstrip", "rstrip"};
        for (int o = 0; o < 3; o++)
            if (st_tok_bool_member(x, opts[o], 0))
                return st_tok_refuse(L, "added token option", opts[o]);
        int special = st_tok_bool_member(x, "special", 0);
        /* A normalized added token is matched in the normalised text; with
         * no normaliser that is the text itself. */
        if (has_normalizer && st_tok_bool_member(x, "normalized", !special))
            return st_tok_refuse(L, "added token option", "normalized (with a normalizer)");
        json_int_t id = L->added_ids[i];
        int rc = set_token(L, json_string_value(c), json_string_length(c), id);
        if (rc)
            return rc;
        st_tok_added *a = &t->added[t->n_added++];
        a->len = json_string_length(c);
        if (!(a->content = st_tok_dup_n(json_string_value(c), a->len)))
            return st_tok_oom(L);
        a->id = (uint32_t)id;
        a->special = special;
        t->id_special[id] = (uint8_t)special;
        t->added_first[(unsigned char)a->content[0]] = 1;
    }
    return 0;
}

/* The tokenizer.json that path names (itself, or in the directory it
 * is); *dir set when it is a directory. */
static char *tokenizer_file(const char *path, int *dir)
{
    struct stat st;
    size_t n = strlen(path) + 32;
    char *p = malloc(n);
    if (!p)
        return NULL;
    *dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (*dir)
        snprintf(p, n, "%s/tokenizer.json", path);
    else
        snprintf(p, n, "%s", path);
    return p;
}

static int load_json(st_tok_loader *L, json_t *root)
{
    st_tokenizer *t = L->t;
    json_t *v;
    if (!json_is_object(root))
        return st_tok_bad(L, "the top level is not an object");
    if ((v = json_object_get(root, "truncation")) && !json_is_null(v))
        return st_tok_refuse(L, "option", "truncation (prepare never truncates; set it to null)");
    if ((v = json_object_get(root, "padding")) && !json_is_null(v))
        return st_tok_refuse(L, "option", "padding (prepare never pads; set it to null)");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added))
        return st_tok_bad(L, "added_tokens is not a list");
    json_t *norm = json_object_get(root, "normalizer");
    int rc = 0;
    if (norm && !json_is_null(norm))
        rc = st_tok_add_normalizer(L, norm);
    if (!rc && (v = json_object_get(root, "pre_tokenizer")) && !json_is_null(v))
        rc = st_tok_add_pre(L, v);
    if (!rc)
        rc = load_model(L, json_object_get(root, "model"), added);
    if (!rc)
        rc = load_added(L, added, t->n_norms > 0);
    if (!rc && (v = json_object_get(root, "post_processor")) && !json_is_null(v))
        rc = st_tok_add_post(L, v);
    if (!rc && (v = json_object_get(root, "decoder")) && !json_is_null(v))
        rc = st_tok_add_decoder(L, v);
    for (int i = 0; !rc && i < t->n_before + t->n_after; i++) {
        uint32_t id = i < t->n_before ? t->template_before[i]
                                      : t->template_after[i - t->n_before];
        if (id >= t->n_ids)
            rc = st_tok_bad(L, "a TemplateProcessing id is past the vocabulary");
    }
    return rc;
}

int st_tokenizer_load(const char *path, st_tokenizer **out)
{
    *out = NULL;
    st_tokenizer *t = calloc(1, sizeof *t);
    int dir = 0;
    char *file = tokenizer_file(path, &dir);
    if (!t || !file) {
        free(t);
        free(file);
        st_error(path, "out of memory loading the tokenizer");
        return ST_EXIT_FAILURE;
    }
    /* A model directory an export was killed writing: its tokenizer.json
     * may be new beside an old tokenizer_config.json. */
    int rc = dir ? st_stage_check_whole(path) : 0;
    if (rc) {
        free(t);
        free(file);
        return rc;
    }
    t->path = file;
    t->unk_id = -1;
    json_error_t err;
    json_t *root = json_load_file(file, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        char buf[128];
        if (err.line <= 0 || strstr(err.text, "unable to open"))
            st_error(file, "cannot read the tokenizer: %s; give a tokenizer.json or a "
                     "model directory holding one", st_printable(err.text, buf, sizeof buf));
        else
            st_error_at(file, err.line, "not valid JSON: %s; the file is not a valid "
                        "tokenizer.json", st_printable(err.text, buf, sizeof buf));
        st_tokenizer_free(t);
        return ST_EXIT_USAGE;
    }
    st_tok_loader L = {t, file, NULL};
    rc = load_json(&L, root);
    json_decref(root);
    free(L.added_ids);
    if (!rc && !(t->md = pcre2_match_data_create(4, NULL)))
        rc = st_tok_oom(&L);
    if (rc) {
        st_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void st_tokenizer_free(st_tokenizer *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; t->id_token && i < t->n_ids; i++)
        free(t->id_token[i]);
    free(t->id_token), free(t->id_token_len), free(t->id_special);
    st_tok_strmap_free(&t->strings);
    st_tok_strmap_free(&t->vocab);
    st_tok_strmap_free(&t->cache);
    st_tok_pairmap_free(&t->merges);
    free(t->cache_ids);
    for (int i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    for (int i = 0; i < t->n_norms; i++)
        free(t->norms[i].a), free(t->norms[i].b);
    free(t->norms);
    for (int i = 0; i < t->n_pres; i++)
        pcre2_code_free(t->pres[i].re);
    free(t->pres);
    for (int i = 0; i < t->n_decs; i++)
        free(t->decs[i].a), free(t->decs[i].b);
    free(t->decs);
    free(t->template_before), free(t->template_after);
    pcre2_match_data_free(t->md);
    free(t->path);
    free(t);
}

int64_t st_tokenizer_vocab_size(const st_tokenizer *t) { return t->n_ids; }

int64_t st_tokenizer_token_id(const st_tokenizer *t, const char *token)
{
    uint32_t id;
    return st_tok_strmap_get(&t->strings, token, strlen(token), &id) ? (int64_t)id : -1;
}

const char *st_tokenizer_token(const st_tokenizer *t, int64_t id)
{
    return id >= 0 && id < (int64_t)t->n_ids ? t->id_token[id] : NULL;
}

/* The first of names that is a special added token, or -1. */
static int64_t first_special(const st_tokenizer *t, const char *const *names)
{
    for (int k = 0; names[k]; k++) {
        int64_t id = st_tokenizer_token_id(t, names[k]);
        if (id >= 0 && t->id_special[id])
            return id;
    }
    return -1;
}

int64_t st_tokenizer_bos_id(const st_tokenizer *t)
{
    static const char *const names[] = {"<s>", "<|begin_of_text|>", "<|endoftext|>", NULL};
    return t->n_before ? (int64_t)t->template_before[0] : first_special(t, names);
}

int64_t st_tokenizer_eos_id(const st_tokenizer *t)
{
    static const char *const names[] = {"</s>", "<|endoftext|>", "<|end_of_text|>",
                                        "<|eot_id|>", NULL};
    return first_special(t, names);
}
