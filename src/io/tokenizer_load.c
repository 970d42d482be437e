/* Loading a Hugging Face tokenizer.json into the tables of
 * tokenizer_impl.h.  Every part of the file is either understood exactly
 * or refused with one line naming the part and what shardtrain supports:
 * a tokenizer that encodes slightly differently from the library would
 * silently train a model on the wrong ids, which is worse than no
 * tokenizer.  Jansson parses; PCRE2 compiles the pre-tokenisers' regexes
 * (in UTF and Unicode-property mode, JIT where available), so the patterns
 * the file names are the ones that run. */
#include "io/tokenizer_impl.h"

#include "base/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* GPT-2's pre-tokenisation, which a ByteLevel pre-tokenizer with use_regex
 * applies (tokenizers' pre_tokenizers/byte_level.rs). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define SUPPORTED_HINT "shardtrain reads BPE tokenizers (GPT-2, Llama 2 and 3 families)"

typedef struct {
    st_tokenizer *t;
    const char *path;
    int64_t *added_ids; /* the library's id of each added token, in file order */
} loader;

static int refuse(loader *L, const char *what, const char *name)
{
    char buf[96];
    st_error(L->path, "%s '%s' is not supported; " SUPPORTED_HINT, what,
             st_printable(name ? name : "(none)", buf, sizeof buf));
    return ST_EXIT_USAGE;
}

static int bad(loader *L, const char *what)
{
    st_error(L->path, "%s; the file is not a valid tokenizer.json", what);
    return ST_EXIT_USAGE;
}

static int oom(loader *L)
{
    st_error(L->path, "out of memory loading the tokenizer");
    return ST_EXIT_FAILURE;
}

static const char *type_of(json_t *o)
{
    json_t *v = json_object_get(o, "type");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An optional boolean member; dflt when absent or null. */
static int bool_member(json_t *o, const char *k, int dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* A {"String": s} pattern (the only kind Replace may use here). */
static int string_pattern(loader *L, json_t *o, const char *where, const char **s)
{
    json_t *pat = json_object_get(o, "pattern");
    json_t *str = json_object_get(pat, "String");
    if (!json_is_string(str))
        return json_object_get(pat, "Regex") ? refuse(L, where, "a Regex pattern")
                                              : bad(L, "a pattern without a String");
    *s = json_string_value(str);
    return 0;
}

static int compile(loader *L, const char *pattern, size_t len, uint32_t flags,
                   pcre2_code **out)
{
    int err;
    PCRE2_SIZE at;
    *out = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | flags, &err, &at,
                         NULL);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        st_error(L->path, "pre-tokenizer pattern does not compile at offset %zu: %s; "
                 "shardtrain uses PCRE2 syntax", (size_t)at, (const char *)msg);
        return ST_EXIT_USAGE;
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* without JIT it interprets: slower */
    return 0;
}

static int prepend_scheme(loader *L, json_t *o, int *scheme)
{
    json_t *v = json_object_get(o, "prepend_scheme");
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        *scheme = !strcmp(s, "always") ? TOK_PREPEND_ALWAYS
                  : !strcmp(s, "first") ? TOK_PREPEND_FIRST
                  : !strcmp(s, "never") ? TOK_PREPEND_NEVER : -1;
        return *scheme < 0 ? refuse(L, "Metaspace prepend_scheme", s) : 0;
    }
    /* Files written before prepend_scheme had add_prefix_space. */
    *scheme = bool_member(o, "add_prefix_space", 1) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return 0;
}

static int replacement(loader *L, json_t *o, char repl[8], size_t *len)
{
    json_t *v = json_object_get(o, "replacement");
    const char *s = json_is_string(v) ? json_string_value(v) : "\xe2\x96\x81";
    size_t n = strlen(s);
    if (n == 0 || n > 4 || st_tok_utf8_len((const unsigned char *)s, n) != n)
        return bad(L, "Metaspace replacement is not one character");
    memcpy(repl, s, n);
    *len = n;
    return 0;
}

/* ---- normalizer ------------------------------------------------------------ */

static int add_normalizer(loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = type_of(o);
    if (type && !strcmp(type, "Sequence")) {
        json_t *list = json_object_get(o, "normalizers"), *x;
        size_t i;
        json_array_foreach(list, i, x) {
            int rc = add_normalizer(L, x);
            if (rc)
                return rc;
        }
        return 0;
    }
    st_tok_norm z = {0};
    if (type && !strcmp(type, "Prepend")) {
        json_t *v = json_object_get(o, "prepend");
        if (!json_is_string(v))
            return bad(L, "a Prepend normalizer without a prepend string");
        z.kind = TOK_NORM_PREPEND;
        z.alen = strlen(json_string_value(v));
        z.a = dup_n(json_string_value(v), z.alen);
    } else if (type && !strcmp(type, "Replace")) {
        const char *pat;
        json_t *c = json_object_get(o, "content");
        int rc = string_pattern(L, o, "Replace normalizer with", &pat);
        if (rc)
            return rc;
        if (!json_is_string(c) || !*pat)
            return bad(L, "a Replace normalizer without content or with an empty pattern");
        z.kind = TOK_NORM_REPLACE;
        z.alen = strlen(pat);
        z.a = dup_n(pat, z.alen);
        z.blen = strlen(json_string_value(c));
        z.b = dup_n(json_string_value(c), z.blen);
        if (!z.b) {
            free(z.a);
            return oom(L);
        }
    } else {
        return refuse(L, "normalizer", type);
    }
    st_tok_norm *n = realloc(t->norms, (size_t)(t->n_norms + 1) * sizeof *n);
    if (!n || !z.a) {
        free(z.a), free(z.b);
        if (n)
            t->norms = n;
        return oom(L);
    }
    t->norms = n;
    t->norms[t->n_norms++] = z;
    return 0;
}

/* ---- pre-tokenizer --------------------------------------------------------- */

static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};

static int add_pre(loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = type_of(o);
    if (type && !strcmp(type, "Sequence")) {
        json_t *list = json_object_get(o, "pretokenizers"), *x;
        size_t i;
        json_array_foreach(list, i, x) {
            int rc = add_pre(L, x);
            if (rc)
                return rc;
        }
        return 0;
    }
    /* The BPE runs on raw bytes once a ByteLevel step ran (tokenizer_impl.h);
     * a step after it would see raw bytes instead of the mapped characters. */
    if (t->byte_level)
        return refuse(L, "pre-tokenizer after ByteLevel", type);
    st_tok_pre p = {0};
    int rc = 0;
    if (type && !strcmp(type, "ByteLevel")) {
        p.kind = TOK_PRE_BYTELEVEL;
        p.add_prefix_space = bool_member(o, "add_prefix_space", 1);
        if (bool_member(o, "use_regex", 1))
            rc = compile(L, gpt2_pattern, sizeof gpt2_pattern - 1, 0, &p.re);
        t->byte_level = 1;
    } else if (type && !strcmp(type, "Split")) {
        json_t *pat = json_object_get(o, "pattern"), *v;
        const char *b = json_string_value(json_object_get(o, "behavior"));
        p.kind = TOK_PRE_SPLIT;
        p.behavior = -1;
        for (int i = 0; b && i < 5; i++)
            if (!strcmp(b, behaviors[i]))
                p.behavior = i;
        if (p.behavior < 0)
            return refuse(L, "Split behavior", b);
        if (bool_member(o, "invert", 0))
            return refuse(L, "Split option", "invert");
        if (json_is_string(v = json_object_get(pat, "Regex")))
            rc = compile(L, json_string_value(v), json_string_length(v), 0, &p.re);
        else if (json_is_string(v = json_object_get(pat, "String")) && json_string_length(v))
            rc = compile(L, json_string_value(v), json_string_length(v), PCRE2_LITERAL, &p.re);
        else
            return bad(L, "a Split pre-tokenizer without a Regex or String pattern");
    } else if (type && !strcmp(type, "Metaspace")) {
        p.kind = TOK_PRE_METASPACE;
        p.split = bool_member(o, "split", 1);
        rc = replacement(L, o, p.repl, &p.repl_len);
        if (!rc)
            rc = prepend_scheme(L, o, &p.prepend_scheme);
        if (!rc && p.split)
            rc = compile(L, p.repl, p.repl_len, PCRE2_LITERAL, &p.re);
    } else {
        return refuse(L, "pre-tokenizer", type);
    }
    if (rc)
        return rc;
    st_tok_pre *n = realloc(t->pres, (size_t)(t->n_pres + 1) * sizeof *n);
    if (!n) {
        pcre2_code_free(p.re);
        return oom(L);
    }
    t->pres = n;
    t->pres[t->n_pres++] = p;
    return 0;
}

/* ---- decoder --------------------------------------------------------------- */

static int add_decoder(loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = type_of(o);
    if (type && !strcmp(type, "Sequence")) {
        json_t *list = json_object_get(o, "decoders"), *x;
        size_t i;
        json_array_foreach(list, i, x) {
            int rc = add_decoder(L, x);
            if (rc)
                return rc;
        }
        return 0;
    }
    st_tok_dec d = {0};
    int rc = 0;
    const char *a = NULL, *b = NULL;
    if (type && !strcmp(type, "ByteLevel")) {
        d.kind = TOK_DEC_BYTELEVEL;
    } else if (type && !strcmp(type, "ByteFallback")) {
        d.kind = TOK_DEC_BYTEFALLBACK;
    } else if (type && !strcmp(type, "Fuse")) {
        d.kind = TOK_DEC_FUSE;
    } else if (type && !strcmp(type, "Replace")) {
        d.kind = TOK_DEC_REPLACE;
        rc = string_pattern(L, o, "Replace decoder with", &a);
        b = json_string_value(json_object_get(o, "content"));
        if (!rc && (!b || !*a))
            return bad(L, "a Replace decoder without content or with an empty pattern");
    } else if (type && !strcmp(type, "Strip")) {
        d.kind = TOK_DEC_STRIP;
        a = json_string_value(json_object_get(o, "content"));
        d.start = (int)json_integer_value(json_object_get(o, "start"));
        d.stop = (int)json_integer_value(json_object_get(o, "stop"));
        if (!a || st_tok_utf8_len((const unsigned char *)a, strlen(a)) != strlen(a) ||
            !*a || d.start < 0 || d.stop < 0)
            return bad(L, "a Strip decoder without one content character and counts");
    } else if (type && !strcmp(type, "Metaspace")) {
        char repl[8];
        size_t n;
        d.kind = TOK_DEC_METASPACE;
        rc = replacement(L, o, repl, &n);
        if (!rc)
            rc = prepend_scheme(L, o, &d.prepend_scheme);
        if (!rc && !(d.a = dup_n(repl, n)))
            return oom(L);
        d.alen = n;
    } else {
        return refuse(L, "decoder", type);
    }
    if (rc)
        return rc;
    if (a) {
        d.alen = strlen(a);
        d.a = dup_n(a, d.alen);
    }
    if (b) {
        d.blen = strlen(b);
        d.b = dup_n(b, d.blen);
    }
    st_tok_dec *n = realloc(t->decs, (size_t)(t->n_decs + 1) * sizeof *n);
    if (!n || (a && !d.a) || (b && !d.b)) {
        free(d.a), free(d.b);
        if (n)
            t->decs = n;
        return oom(L);
    }
    t->decs = n;
    t->decs[t->n_decs++] = d;
    return 0;
}

/* ---- post-processor -------------------------------------------------------- */

static int add_template_ids(loader *L, json_t *special, const char *name, int after)
{
    st_tokenizer *t = L->t;
    json_t *ids = json_object_get(json_object_get(special, name), "ids"), *v;
    if (!json_is_array(ids))
        return bad(L, "a TemplateProcessing special token without ids");
    size_t i;
    json_array_foreach(ids, i, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id > UINT32_MAX)
            return bad(L, "a TemplateProcessing id is not a non-negative integer");
        uint32_t **list = after ? &t->template_after : &t->template_before;
        int *n = after ? &t->n_after : &t->n_before;
        uint32_t *l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
        if (!l)
            return oom(L);
        *list = l;
        l[(*n)++] = (uint32_t)id;
    }
    return 0;
}

static int add_post(loader *L, json_t *o)
{
    const char *type = type_of(o);
    if (type && !strcmp(type, "Sequence")) {
        json_t *list = json_object_get(o, "processors"), *x;
        size_t i;
        json_array_foreach(list, i, x) {
            int rc = add_post(L, x);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (type && !strcmp(type, "ByteLevel"))
        return 0; /* it only adjusts offsets, never ids */
    if (!type || strcmp(type, "TemplateProcessing"))
        return refuse(L, "post-processor", type);
    json_t *single = json_object_get(o, "single"), *special = json_object_get(o, "special_tokens");
    json_t *item;
    size_t i;
    int seen_a = 0;
    json_array_foreach(single, i, item) {
        json_t *sp = json_object_get(item, "SpecialToken");
        json_t *seq = json_object_get(item, "Sequence");
        if (sp) {
            const char *name = json_string_value(json_object_get(sp, "id"));
            int rc = name ? add_template_ids(L, special, name, seen_a)
                          : bad(L, "a TemplateProcessing item without an id");
            if (rc)
                return rc;
        } else if (seq) {
            const char *id = json_string_value(json_object_get(seq, "id"));
            if (!id || strcmp(id, "A") || seen_a)
                return refuse(L, "TemplateProcessing single sequence", id);
            seen_a = 1;
        } else {
            return bad(L, "a TemplateProcessing item that is neither SpecialToken nor Sequence");
        }
    }
    return seen_a ? 0 : bad(L, "a TemplateProcessing single template without $A");
}

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
        size_t k = st_tok_utf8_len((const unsigned char *)s + i, n - i);
        int found = -1;
        for (unsigned b = 0; b < 256 && found < 0; b++) {
            char c[2];
            size_t cl = st_tok_byte_char(b, c);
            if (cl == k && memcmp(c, s + i, k) == 0)
                found = (int)b;
        }
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

static int set_token(loader *L, const char *s, size_t n, json_int_t id)
{
    st_tokenizer *t = L->t;
    if (id < 0 || (uint64_t)id >= t->n_ids)
        return bad(L, "a token id is negative or past the vocabulary");
    free(t->id_token[id]);
    if (!(t->id_token[id] = dup_n(s, n)))
        return oom(L);
    t->id_token_len[id] = (uint32_t)n;
    char *mb;
    size_t ml;
    int rc = model_bytes(t, s, n, &mb, &ml);
    if (rc < 0 || st_tok_strmap_put(&t->strings, s, n, (uint32_t)id))
        return oom(L);
    if (rc == 0 && st_tok_strmap_put(&t->vocab, mb, ml, (uint32_t)id)) {
        free(mb);
        return oom(L);
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

static int load_merges(loader *L, json_t *merges)
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
                return oom(L);
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
            return oom(L);
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
static int assign_added_ids(loader *L, json_t *vocab, json_t *added, json_int_t *max_id)
{
    size_t i, n = json_array_size(added);
    json_t *x;
    const int64_t vocab_size = (int64_t)json_object_size(vocab);
    int64_t max_added = -1;
    L->added_ids = calloc(n ? n : 1, sizeof *L->added_ids);
    if (!L->added_ids)
        return oom(L);
    json_array_foreach(added, i, x) {
        json_t *c = json_object_get(x, "content"), *in_vocab, *id = json_object_get(x, "id");
        if (!json_is_string(c) || !json_string_length(c))
            return bad(L, "an added token without content");
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
            return bad(L, "an added token's id is past 2^31");
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

static int load_model(loader *L, json_t *model, json_t *added)
{
    st_tokenizer *t = L->t;
    const char *type = type_of(model);
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (type ? strcmp(type, "BPE") != 0 : !merges)
        return refuse(L, "model type", type);
    if (!json_is_object(vocab) || !json_is_array(merges))
        return bad(L, "the BPE model has no vocab object or merges list");
    json_t *v = json_object_get(model, "dropout");
    if (v && !json_is_null(v))
        return refuse(L, "BPE option", "dropout");
    const char *fixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(model, fixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
            return refuse(L, "BPE option", fixes[i]);
    }
    t->fuse_unk = bool_member(model, "fuse_unk", 0);
    t->byte_fallback = bool_member(model, "byte_fallback", 0);
    t->ignore_merges = bool_member(model, "ignore_merges", 0);

    /* Ids: the vocabulary's, then the added tokens' (which may reuse them). */
    json_int_t max_id = -1;
    const char *k;
    json_t *x;
    json_object_foreach(vocab, k, x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= INT32_MAX)
            return bad(L, "a vocabulary id is not an integer in [0, 2^31)");
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
        return oom(L);
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
            return bad(L, "the BPE unk_token is not in the vocabulary");
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

static int load_added(loader *L, json_t *added, int has_normalizer)
{
    st_tokenizer *t = L->t;
    size_t i, n = json_array_size(added);
    json_t *x;
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added)
        return oom(L);
    json_array_foreach(added, i, x) {
        json_t *c = json_object_get(x, "content");
        const char *opts[] = {"single_word", "lstrip", "rstrip"};
        for (int o = 0; o < 3; o++)
            if (bool_member(x, opts[o], 0))
                return refuse(L, "added token option", opts[o]);
        int special = bool_member(x, "special", 0);
        /* A normalized added token is matched in the normalised text; with
         * no normaliser that is the text itself. */
        if (has_normalizer && bool_member(x, "normalized", !special))
            return refuse(L, "added token option", "normalized (with a normalizer)");
        json_int_t id = L->added_ids[i];
        int rc = set_token(L, json_string_value(c), json_string_length(c), id);
        if (rc)
            return rc;
        st_tok_added *a = &t->added[t->n_added++];
        a->len = json_string_length(c);
        if (!(a->content = dup_n(json_string_value(c), a->len)))
            return oom(L);
        a->id = (uint32_t)id;
        a->special = special;
        t->id_special[id] = (uint8_t)special;
        t->added_first[(unsigned char)a->content[0]] = 1;
    }
    return 0;
}

static char *tokenizer_file(const char *path)
{
    struct stat st;
    size_t n = strlen(path) + 32;
    char *p = malloc(n);
    if (!p)
        return NULL;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(p, n, "%s/tokenizer.json", path);
    else
        snprintf(p, n, "%s", path);
    return p;
}

static int load_json(loader *L, json_t *root)
{
    st_tokenizer *t = L->t;
    json_t *v;
    if (!json_is_object(root))
        return bad(L, "the top level is not an object");
    if ((v = json_object_get(root, "truncation")) && !json_is_null(v))
        return refuse(L, "option", "truncation (prepare never truncates; set it to null)");
    if ((v = json_object_get(root, "padding")) && !json_is_null(v))
        return refuse(L, "option", "padding (prepare never pads; set it to null)");
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added))
        return bad(L, "added_tokens is not a list");
    json_t *norm = json_object_get(root, "normalizer");
    int rc = 0;
    if (norm && !json_is_null(norm))
        rc = add_normalizer(L, norm);
    if (!rc && (v = json_object_get(root, "pre_tokenizer")) && !json_is_null(v))
        rc = add_pre(L, v);
    if (!rc)
        rc = load_model(L, json_object_get(root, "model"), added);
    if (!rc)
        rc = load_added(L, added, t->n_norms > 0);
    if (!rc && (v = json_object_get(root, "post_processor")) && !json_is_null(v))
        rc = add_post(L, v);
    if (!rc && (v = json_object_get(root, "decoder")) && !json_is_null(v))
        rc = add_decoder(L, v);
    for (int i = 0; !rc && i < t->n_before + t->n_after; i++) {
        uint32_t id = i < t->n_before ? t->template_before[i]
                                      : t->template_after[i - t->n_before];
        if (id >= t->n_ids)
            rc = bad(L, "a TemplateProcessing id is past the vocabulary");
    }
    return rc;
}

int st_tokenizer_load(const char *path, st_tokenizer **out)
{
    *out = NULL;
    st_tokenizer *t = calloc(1, sizeof *t);
    char *file = tokenizer_file(path);
    if (!t || !file) {
        free(t);
        free(file);
        st_error(path, "out of memory loading the tokenizer");
        return ST_EXIT_FAILURE;
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
    loader L = {t, file, NULL};
    int rc = load_json(&L, root);
    json_decref(root);
    free(L.added_ids);
    if (!rc && !(t->md = pcre2_match_data_create(4, NULL)))
        rc = oom(&L);
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
