/* The text pipeline's parts of a tokenizer.json (normaliser,
 * pre-tokeniser, post-processor, decoder) as tokenizer_impl.h's steps,
 * for tokenizer_load.c.  Only the kinds the GPT-2 and Llama families use
 * are read, each exactly; any other is refused with one line.  PCRE2
 * compiles the pre-tokenisers' regexes (UTF and Unicode-property mode, JIT
 * where available), so the patterns the file names are the ones that run. */
#include "tok/tokenizer_impl.h"

#include "base/log.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's pre-tokenisation, which a ByteLevel pre-tokenizer with use_regex
 * applies (tokenizers' pre_tokenizers/byte_level.rs). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* A {"String": s} pattern (the only kind Replace may use here). */
static int string_pattern(st_tok_loader *L, json_t *o, const char *where, const char **s)
{
    json_t *pat = json_object_get(o, "pattern");
    json_t *str = json_object_get(pat, "String");
    if (!json_is_string(str))
        return json_object_get(pat, "Regex") ? st_tok_refuse(L, where, "a Regex pattern")
                                              : st_tok_bad(L, "a pattern without a String");
    *s = json_string_value(str);
    return 0;
}

static int compile(st_tok_loader *L, const char *pattern, size_t len, uint32_t flags,
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

static int prepend_scheme(st_tok_loader *L, json_t *o, int *scheme)
{
    json_t *v = json_object_get(o, "prepend_scheme");
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        *scheme = !strcmp(s, "always") ? TOK_PREPEND_ALWAYS
                  : !strcmp(s, "first") ? TOK_PREPEND_FIRST
                  : !strcmp(s, "never") ? TOK_PREPEND_NEVER : -1;
        return *scheme < 0 ? st_tok_refuse(L, "Metaspace prepend_scheme", s) : 0;
    }
    /* Files written before prepend_scheme had add_prefix_space. */
    *scheme = st_tok_bool_member(o, "add_prefix_space", 1) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return 0;
}

static int replacement(st_tok_loader *L, json_t *o, char repl[8], size_t *len)
{
    json_t *v = json_object_get(o, "replacement");
    const char *s = json_is_string(v) ? json_string_value(v) : "\xe2\x96\x81";
    size_t n = strlen(s);
    if (n == 0 || n > 4 || st_tok_utf8_len((const unsigned char *)s, n) != n)
        return st_tok_bad(L, "Metaspace replacement is not one character");
    memcpy(repl, s, n);
    *len = n;
    return 0;
}

/* A Sequence part: each member added in order by add (which recurses for
 * nested Sequences).  Returns the first failure. */
static int add_each(st_tok_loader *L, json_t *o, const char *members,
                    int (*add)(st_tok_loader *L, json_t *o))
{
    json_t *list = json_object_get(o, members), *x;
    size_t i;
    if (!json_is_array(list))
        return st_tok_bad(L, "a Sequence without its list");
    json_array_foreach(list, i, x) {
        int rc = add(L, x);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- normalizer ------------------------------------------------------------ */

int st_tok_add_normalizer(st_tok_loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = st_tok_type_of(o);
    if (type && !strcmp(type, "Sequence"))
        return add_each(L, o, "normalizers", st_tok_add_normalizer);
    st_tok_norm z = {0};
    if (type && !strcmp(type, "Prepend")) {
        json_t *v = json_object_get(o, "prepend");
        if (!json_is_string(v))
            return st_tok_bad(L, "a Prepend normalizer without a prepend string");
        z.kind = TOK_NORM_PREPEND;
        z.alen = strlen(json_string_value(v));
        z.a = st_tok_dup_n(json_string_value(v), z.alen);
    } else if (type && !strcmp(type, "Replace")) {
        const char *pat;
        json_t *c = json_object_get(o, "content");
        int rc = string_pattern(L, o, "Replace normalizer with", &pat);
        if (rc)
            return rc;
        if (!json_is_string(c) || !*pat)
            return st_tok_bad(L, "a Replace normalizer without content or with an empty pattern");
        z.kind = TOK_NORM_REPLACE;
        z.alen = strlen(pat);
        z.a = st_tok_dup_n(pat, z.alen);
        z.blen = strlen(json_string_value(c));
        z.b = st_tok_dup_n(json_string_value(c), z.blen);
        if (!z.b) {
            free(z.a);
            return st_tok_oom(L);
        }
    } else {
        return st_tok_refuse(L, "normalizer", type);
    }
    st_tok_norm *n = realloc(t->norms, (size_t)(t->n_norms + 1) * sizeof *n);
    if (!n || !z.a) {
        free(z.a), free(z.b);
        if (n)
            t->norms = n;
        return st_tok_oom(L);
    }
    t->norms = n;
    t->norms[t->n_norms++] = z;
    return 0;
}

/* ---- pre-tokenizer --------------------------------------------------------- */

static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};

int st_tok_add_pre(st_tok_loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = st_tok_type_of(o);
    if (type && !strcmp(type, "Sequence"))
        return add_each(L, o, "pretokenizers", st_tok_add_pre);
    /* The BPE runs on raw bytes once a ByteLevel step ran (tokenizer_impl.h);
     * a step after it would see raw bytes instead of the mapped characters. */
    if (t->byte_level)
        return st_tok_refuse(L, "pre-tokenizer after ByteLevel", type);
    st_tok_pre p = {0};
    int rc = 0;
    if (type && !strcmp(type, "ByteLevel")) {
        p.kind = TOK_PRE_BYTELEVEL;
        p.add_prefix_space = st_tok_bool_member(o, "add_prefix_space", 1);
        if (st_tok_bool_member(o, "use_regex", 1))
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
            return st_tok_refuse(L, "Split behavior", b);
        if (st_tok_bool_member(o, "invert", 0))
            return st_tok_refuse(L, "Split option", "invert");
        if (json_is_string(v = json_object_get(pat, "Regex")))
            rc = compile(L, json_string_value(v), json_string_length(v), 0, &p.re);
        else if (json_is_string(v = json_object_get(pat, "String")) && json_string_length(v))
            rc = compile(L, json_string_value(v), json_string_length(v), PCRE2_LITERAL, &p.re);
        else
            return st_tok_bad(L, "a Split pre-tokenizer without a Regex or String pattern");
    } else if (type && !strcmp(type, "Metaspace")) {
        p.kind = TOK_PRE_METASPACE;
        p.split = st_tok_bool_member(o, "split", 1);
        rc = replacement(L, o, p.repl, &p.repl_len);
        if (!rc)
            rc = prepend_scheme(L, o, &p.prepend_scheme);
        if (!rc && p.split)
            rc = compile(L, p.repl, p.repl_len, PCRE2_LITERAL, &p.re);
    } else {
        return st_tok_refuse(L, "pre-tokenizer", type);
    }
    if (rc)
        return rc;
    st_tok_pre *n = realloc(t->pres, (size_t)(t->n_pres + 1) * sizeof *n);
    if (!n) {
        pcre2_code_free(p.re);
        return st_tok_oom(L);
    }
    t->pres = n;
    t->pres[t->n_pres++] = p;
    return 0;
}

/* ---- decoder --------------------------------------------------------------- */

int st_tok_add_decoder(st_tok_loader *L, json_t *o)
{
    st_tokenizer *t = L->t;
    const char *type = st_tok_type_of(o);
    if (type && !strcmp(type, "Sequence"))
        return add_each(L, o, "decoders", st_tok_add_decoder);
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
            return st_tok_bad(L, "a Replace decoder without content or with an empty pattern");
    } else if (type && !strcmp(type, "Strip")) {
        d.kind = TOK_DEC_STRIP;
        a = json_string_value(json_object_get(o, "content"));
        d.start = (int)json_integer_value(json_object_get(o, "start"));
        d.stop = (int)json_integer_value(json_object_get(o, "stop"));
        if (!a || st_tok_utf8_len((const unsigned char *)a, strlen(a)) != strlen(a) ||
            !*a || d.start < 0 || d.stop < 0)
            return st_tok_bad(L, "a Strip decoder without one content character and counts");
    } else if (type && !strcmp(type, "Metaspace")) {
        char repl[8];
        size_t n;
        d.kind = TOK_DEC_METASPACE;
        rc = replacement(L, o, repl, &n);
        if (!rc)
            rc = prepend_scheme(L, o, &d.prepend_scheme);
        if (!rc && !(d.a = st_tok_dup_n(repl, n)))
            return st_tok_oom(L);
        d.alen = n;
    } else {
        return st_tok_refuse(L, "decoder", type);
    }
    if (rc)
        return rc;
    if (a) {
        d.alen = strlen(a);
        d.a = st_tok_dup_n(a, d.alen);
    }
    if (b) {
        d.blen = strlen(b);
        d.b = st_tok_dup_n(b, d.blen);
    }
    st_tok_dec *n = realloc(t->decs, (size_t)(t->n_decs + 1) * sizeof *n);
    if (!n || (a && !d.a) || (b && !d.b)) {
        free(d.a), free(d.b);
        if (n)
            t->decs = n;
        return st_tok_oom(L);
    }
    t->decs = n;
    t->decs[t->n_decs++] = d;
    return 0;
}

/* ---- post-processor -------------------------------------------------------- */

static int add_template_ids(st_tok_loader *L, json_t *special, const char *name, int after)
{
    st_tokenizer *t = L->t;
    json_t *ids = json_object_get(json_object_get(special, name), "ids"), *v;
    if (!json_is_array(ids))
        return st_tok_bad(L, "a TemplateProcessing special token without ids");
    size_t i;
    json_array_foreach(ids, i, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id > UINT32_MAX)
            return st_tok_bad(L, "a TemplateProcessing id is not a non-negative integer");
        uint32_t **list = after ? &t->template_after : &t->template_before;
        int *n = after ? &t->n_after : &t->n_before;
        uint32_t *l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
        if (!l)
            return st_tok_oom(L);
        *list = l;
        l[(*n)++] = (uint32_t)id;
    }
    return 0;
}

int st_tok_add_post(st_tok_loader *L, json_t *o)
{
    const char *type = st_tok_type_of(o);
    if (type && !strcmp(type, "Sequence"))
        return add_each(L, o, "processors", st_tok_add_post);
    if (type && !strcmp(type, "ByteLevel"))
        return 0; /* it only adjusts offsets, never ids */
    if (!type || strcmp(type, "TemplateProcessing"))
        return st_tok_refuse(L, "post-processor", type);
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
                          : st_tok_bad(L, "a TemplateProcessing item without an id");
            if (rc)
                return rc;
        } else if (seq) {
            const char *id = json_string_value(json_object_get(seq, "id"));
            if (!id || strcmp(id, "A") || seen_a)
                return st_tok_refuse(L, "TemplateProcessing single sequence", id);
            seen_a = 1;
        } else {
            return st_tok_bad(L, "a TemplateProcessing item that is neither SpecialToken nor Sequence");
        }
    }
    return seen_a ? 0 : st_tok_bad(L, "a TemplateProcessing single template without $A");
}
