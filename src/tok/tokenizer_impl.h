/* Internals of the tokenizer (tokenizer.h), shared by its three files:
 * tokenizer_load.c turns tokenizer.json into these tables,
 * tokenizer_bpe.c is the BPE model (vocabulary, merges, word cache), and
 * tokenizer_text.c the text pipeline around it (added tokens, normaliser,
 * pre-tokeniser, post-processor; the decoder chain).
 *
 * Byte-level models are kept in raw bytes.  The library maps every byte to
 * a printable character (GPT-2's bytes_to_unicode) before BPE and maps
 * back when decoding; the map is a bijection, so running BPE on the bytes
 * with the vocabulary's tokens mapped back to bytes gives the same ids
 * without building the mapped strings for every word. */
#ifndef ST_TOKENIZER_IMPL_H
#define ST_TOKENIZER_IMPL_H

#include "tok/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

/* Open-addressed map from a byte string to a uint32 (the vocabulary, the
 * word cache).  Keys live in the map's own arena. */
typedef struct {
    uint64_t *hash;   /* 0 = empty slot */
    uint32_t *key_off, *key_len, *val;
    size_t cap, used;
    char *arena;
    size_t arena_len, arena_cap;
} st_tok_strmap;

/* Map from a pair of ids to a merge (rank, result id). */
typedef struct {
    uint64_t *key;    /* (a << 32 | b) + 1; 0 = empty */
    uint32_t *rank, *result;
    size_t cap, used;
} st_tok_pairmap;

enum { TOK_NORM_PREPEND, TOK_NORM_REPLACE };
typedef struct {
    int kind;
    char *a, *b; /* prepend: a; replace: a -> b */
    size_t alen, blen;
} st_tok_norm;

enum { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL, TOK_PRE_METASPACE };
/* SplitDelimiterBehavior of the library. */
enum { TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT,
       TOK_SPLIT_CONTIGUOUS };
enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };
typedef struct {
    int kind;
    pcre2_code *re;      /* split pattern; ByteLevel's GPT-2 regex when use_regex */
    int behavior;        /* split */
    int add_prefix_space; /* byte level */
    char repl[8];        /* metaspace replacement, UTF-8 */
    size_t repl_len;
    int prepend_scheme, split; /* metaspace */
} st_tok_pre;

enum { TOK_DEC_BYTELEVEL, TOK_DEC_REPLACE, TOK_DEC_BYTEFALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP,
       TOK_DEC_METASPACE };
typedef struct {
    int kind;
    char *a, *b; /* replace a -> b; metaspace/strip: a is the character */
    size_t alen, blen;
    int start, stop;     /* strip */
    int prepend_scheme;  /* metaspace */
} st_tok_dec;

typedef struct {
    char *content;
    size_t len;
    uint32_t id;
    int special;
} st_tok_added;

struct st_tokenizer {
    char *path;
    /* the model */
    int byte_level;          /* BPE runs on raw bytes (a ByteLevel pre-tokenizer) */
    st_tok_strmap strings;   /* token string as in the file -> id */
    st_tok_strmap vocab;     /* model-space bytes -> id (raw bytes when byte level) */
    st_tok_pairmap merges;
    char **id_token;         /* id -> token string as in the file (NULL: no such id) */
    uint32_t *id_token_len;
    uint8_t *id_special;     /* added token marked special */
    uint32_t n_ids;          /* max id + 1 */
    int64_t unk_id;          /* -1: none */
    int fuse_unk, byte_fallback, ignore_merges;
    uint32_t byte_token[256]; /* byte fallback: id of "<0xXX>", UINT32_MAX if missing */
    uint32_t byte_sym[256];   /* byte level: id of the byte's single character */
    st_tok_strmap cache;      /* word -> offset into cache_ids (len in cache_len) */
    uint32_t *cache_ids;
    size_t cache_ids_len, cache_ids_cap;
    /* the pipeline */
    st_tok_added *added;
    int n_added;
    uint8_t added_first[256]; /* some added token starts with this byte */
    st_tok_norm *norms;
    int n_norms;
    st_tok_pre *pres;
    int n_pres;
    st_tok_dec *decs;
    int n_decs;
    uint32_t *template_before, *template_after; /* post-processor: ids around $A */
    int n_before, n_after;
    pcre2_match_data *md;
};

/* The loader's state (tokenizer_load.c) and, in tokenizer_json.c, the
 * messages and JSON accessors every part of the file shares.  Each message
 * function prints one line and returns the exit status to pass up. */
typedef struct {
    st_tokenizer *t;
    const char *path;
    int64_t *added_ids; /* the library's id of each added token, in file order */
} st_tok_loader;
int st_tok_refuse(st_tok_loader *L, const char *what, const char *name); /* unsupported */
int st_tok_bad(st_tok_loader *L, const char *what);                     /* malformed */
int st_tok_oom(st_tok_loader *L);
const char *st_tok_type_of(json_t *o);
int st_tok_bool_member(json_t *o, const char *k, int dflt);
char *st_tok_dup_n(const char *s, size_t n);

/* tokenizer_pipeline.c: one part of the file each (a Sequence recurses). */
int st_tok_add_normalizer(st_tok_loader *L, json_t *o);
int st_tok_add_pre(st_tok_loader *L, json_t *o);
int st_tok_add_decoder(st_tok_loader *L, json_t *o);
int st_tok_add_post(st_tok_loader *L, json_t *o);

/* tokenizer_bpe.c: characters, maps and the merge */
/* Length of the UTF-8 character at s (1 for a byte that starts none). */
size_t st_tok_utf8_len(const unsigned char *s, size_t n);
/* GPT-2's byte -> character map: the code point, and as UTF-8 (1 or 2
 * bytes). */
unsigned st_tok_byte_code_point(unsigned b);
size_t st_tok_byte_char(unsigned b, char out[2]);
/* The map backwards for the UTF-8 character at s: returns its length and
 * sets *byte to the byte it stands for, or -1 when it is outside the map. */
size_t st_tok_char_to_byte(const unsigned char *s, size_t n, int *byte);
int st_tok_strmap_put(st_tok_strmap *m, const char *k, size_t len, uint32_t val);
int st_tok_strmap_get(const st_tok_strmap *m, const char *k, size_t len, uint32_t *val);
void st_tok_strmap_free(st_tok_strmap *m);
int st_tok_pairmap_put(st_tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank,
                       uint32_t result);
void st_tok_pairmap_free(st_tok_pairmap *m);
/* BPE on one pre-tokenised word (model-space bytes); appends to out. */
int st_tok_bpe_word(st_tokenizer *t, const char *w, size_t len, st_token_list *out);


#endif
