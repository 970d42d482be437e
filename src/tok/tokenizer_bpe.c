/* The BPE model of the tokenizer (tokenizer_impl.h): its hash maps and
 * the merge of one pre-tokenised word.
 *
 * The merge order is the library's (tokenizers' bpe/word.rs): all adjacent
 * pairs that have a merge go into a priority queue ordered by merge rank,
 * ties broken by leftmost position; the top is applied unless one of its
 * symbols was consumed since it was queued, and the pairs it forms with its
 * neighbours are queued.  This gives the same result as GPT-2's original
 * "merge the lowest-ranked pair everywhere, repeat" but in O(n log n), which
 * matters for metaspace models whose pre-tokeniser leaves a whole line as
 * one word.
 *
 * Words are cached (the library caches too): most words of a text repeat,
 * and a cache hit costs one hash lookup.  Caching never changes a result. */
#include "tok/tokenizer_impl.h"

#include "base/log.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- characters ------------------------------------------------------------ */

size_t st_tok_utf8_len(const unsigned char *s, size_t n)
{
    size_t l = s[0] < 0x80 ? 1 : s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;
    return l < n ? l : n;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the other 68 take code points 256, 257, ... in byte order. */
unsigned st_tok_byte_code_point(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
        return b;
    unsigned n = 0;
    for (unsigned c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff)))
            n++;
    return 256 + n;
}

/* The inverse: the non-printable bytes in order are 0x00-0x20, 0x7f-0xa0
 * and 0xad (68 in all). */
static int code_point_byte(unsigned cp)
{
    if (cp < 256)
        return st_tok_byte_code_point(cp) == cp ? (int)cp : -1;
    unsigned k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(0x7f + k - 33) : k == 67 ? 0xad : -1;
}

size_t st_tok_char_to_byte(const unsigned char *s, size_t n, int *byte)
{
    size_t k = st_tok_utf8_len(s, n);
    unsigned cp = k == 1 ? s[0] : k == 2 ? (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu) : 0x10000;
    /* Only the 1- and 2-byte forms name a code point below 324. */
    *byte = (k == 1 && s[0] >= 0x80) ? -1 : code_point_byte(cp);
    return k;
}

size_t st_tok_byte_char(unsigned b, char out[2])
{
    unsigned cp = st_tok_byte_code_point(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* ---- maps ---------------------------------------------------------------- */

static uint64_t key_hash(const char *k, size_t len)
{
    uint64_t h = XXH3_64bits(k, len);
    return h ? h : 1;
}

static int strmap_grow(st_tok_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    st_tok_strmap n = {.cap = cap, .arena = m->arena, .arena_len = m->arena_len,
                       .arena_cap = m->arena_cap, .used = m->used};
    n.hash = calloc(cap, sizeof *n.hash);
    n.key_off = malloc(cap * sizeof *n.key_off);
    n.key_len = malloc(cap * sizeof *n.key_len);
    n.val = malloc(cap * sizeof *n.val);
    if (!n.hash || !n.key_off || !n.key_len || !n.val) {
        free(n.hash), free(n.key_off), free(n.key_len), free(n.val);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->hash[i])
            continue;
        size_t j = m->hash[i] & (cap - 1);
        while (n.hash[j])
            j = (j + 1) & (cap - 1);
        n.hash[j] = m->hash[i];
        n.key_off[j] = m->key_off[i];
        n.key_len[j] = m->key_len[i];
        n.val[j] = m->val[i];
    }
    free(m->hash), free(m->key_off), free(m->key_len), free(m->val);
    *m = n;
    return 0;
}

static size_t strmap_slot(const st_tok_strmap *m, uint64_t h, const char *k, size_t len)
{
    size_t j = h & (m->cap - 1);
    while (m->hash[j] && !(m->hash[j] == h && m->key_len[j] == len &&
                           memcmp(m->arena + m->key_off[j], k, len) == 0))
        j = (j + 1) & (m->cap - 1);
    return j;
}

/* Insert or overwrite.  Returns 0, -1 when out of memory. */
int st_tok_strmap_put(st_tok_strmap *m, const char *k, size_t len, uint32_t val)
{
    if ((m->used + 1) * 2 > m->cap && strmap_grow(m))
        return -1;
    uint64_t h = key_hash(k, len);
    size_t j = strmap_slot(m, h, k, len);
    if (m->hash[j]) {
        m->val[j] = val;
        return 0;
    }
    if (len > UINT32_MAX || m->arena_len + len > UINT32_MAX)
        return -1;
    if (m->arena_len + len > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 65536;
        while (cap < m->arena_len + len)
            cap *= 2;
        char *a = realloc(m->arena, cap);
        if (!a)
            return -1;
        m->arena = a;
        m->arena_cap = cap;
    }
    memcpy(m->arena + m->arena_len, k, len);
    m->hash[j] = h;
    m->key_off[j] = (uint32_t)m->arena_len;
    m->key_len[j] = (uint32_t)len;
    m->val[j] = val;
    m->arena_len += len;
    m->used++;
    return 0;
}

int st_tok_strmap_get(const st_tok_strmap *m, const char *k, size_t len, uint32_t *val)
{
    if (!m->cap)
        return 0;
    size_t j = strmap_slot(m, key_hash(k, len), k, len);
    if (!m->hash[j])
        return 0;
    *val = m->val[j];
    return 1;
}

void st_tok_strmap_free(st_tok_strmap *m)
{
    free(m->hash), free(m->key_off), free(m->key_len), free(m->val), free(m->arena);
    memset(m, 0, sizeof *m);
}

static uint64_t pair_key(uint32_t a, uint32_t b) { return ((uint64_t)a << 32 | b) + 1; }

static size_t pair_slot(const st_tok_pairmap *m, uint64_t key)
{
    size_t j = (size_t)(XXH3_64bits(&key, sizeof key) & (m->cap - 1));
    while (m->key[j] && m->key[j] != key)
        j = (j + 1) & (m->cap - 1);
    return j;
}

/* The first merge of a pair wins, as in the library (later duplicates are
 * ignored).  Returns 0, -1 when out of memory. */
int st_tok_pairmap_put(st_tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank,
                       uint32_t result)
{
    if ((m->used + 1) * 2 > m->cap) {
        st_tok_pairmap n = {.cap = m->cap ? m->cap * 2 : 1024, .used = m->used};
        n.key = calloc(n.cap, sizeof *n.key);
        n.rank = malloc(n.cap * sizeof *n.rank);
        n.result = malloc(n.cap * sizeof *n.result);
        if (!n.key || !n.rank || !n.result) {
            free(n.key), free(n.rank), free(n.result);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = pair_slot(&n, m->key[i]);
                n.key[j] = m->key[i];
                n.rank[j] = m->rank[i];
                n.result[j] = m->result[i];
            }
        st_tok_pairmap_free(m);
        *m = n;
    }
    uint64_t key = pair_key(a, b);
    size_t j = pair_slot(m, key);
    if (m->key[j])
        return 0;
    m->key[j] = key;
    m->rank[j] = rank;
    m->result[j] = result;
    m->used++;
    return 0;
}

static int pair_get(const st_tok_pairmap *m, uint32_t a, uint32_t b, uint32_t *rank,
                    uint32_t *result)
{
    if (!m->cap)
        return 0;
    size_t j = pair_slot(m, pair_key(a, b));
    if (!m->key[j])
        return 0;
    *rank = m->rank[j];
    *result = m->result[j];
    return 1;
}

void st_tok_pairmap_free(st_tok_pairmap *m)
{
    free(m->key), free(m->rank), free(m->result);
    memset(m, 0, sizeof *m);
}

int st_token_list_push(st_token_list *l, uint32_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        uint32_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids)
            return -1;
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return 0;
}

void st_token_list_free(st_token_list *l)
{
    free(l->ids);
    memset(l, 0, sizeof *l);
}

/* ---- the merge ----------------------------------------------------------- */

typedef struct {
    uint32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes covered; 0 once merged into its left neighbour */
} symbol;

typedef struct {
    uint32_t rank, result;
    int32_t pos;
} merge;

/* Min-heap on (rank, pos). */
static int merge_before(const merge *a, const merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct {
    merge *h;
    size_t n, cap;
} heap;

static int heap_push(heap *q, merge m)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        merge *h = realloc(q->h, cap * sizeof *h);
        if (!h)
            return -1;
        q->h = h;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0 && merge_before(&m, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = m;
    return 0;
}

static merge heap_pop(heap *q)
{
    merge top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n)
            break;
        if (c + 1 < q->n && merge_before(&q->h[c + 1], &q->h[c]))
            c++;
        if (!merge_before(&q->h[c], &last))
            break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n)
        q->h[i] = last;
    return top;
}

static void push_symbol(symbol *s, int32_t *n, uint32_t id, size_t len)
{
    s[*n] = (symbol){.id = id, .prev = *n - 1, .next = *n + 1, .len = (uint32_t)len};
    (*n)++;
}

/* The word's starting symbols: one per byte (byte level) or character,
 * with byte fallback and the unknown token as the library applies them. */
static int initial_symbols(st_tokenizer *t, const char *w, size_t len, symbol **out,
                           int32_t *n_out)
{
    symbol *s = malloc((len + 1) * sizeof *s);
    if (!s)
        return -1;
    int32_t n = 0;
    int pending_unk = 0; /* a fused unknown run is open at s[n-1] */
    for (size_t i = 0; i < len;) {
        size_t cl = t->byte_level ? 1 : st_tok_utf8_len((const unsigned char *)w + i, len - i);
        uint32_t id;
        int known = t->byte_level ? (id = t->byte_sym[(unsigned char)w[i]]) != UINT32_MAX
                                  : st_tok_strmap_get(&t->vocab, w + i, cl, &id);
        if (known) {
            push_symbol(s, &n, id, cl);
            pending_unk = 0;
        } else {
            int all = t->byte_fallback;
            for (size_t b = 0; all && b < cl; b++)
                all = t->byte_token[(unsigned char)w[i + b]] != UINT32_MAX;
            if (all) {
                for (size_t b = 0; b < cl; b++)
                    push_symbol(s, &n, t->byte_token[(unsigned char)w[i + b]], 1);
                pending_unk = 0;
            } else if (t->unk_id >= 0) {
                if (t->fuse_unk && pending_unk) {
                    s[n - 1].len += (uint32_t)cl;
                } else {
                    push_symbol(s, &n, (uint32_t)t->unk_id, cl);
                    pending_unk = 1;
                }
            } /* no unknown token: the library drops the character */
        }
        i += cl;
    }
    if (n)
        s[n - 1].next = -1;
    *out = s;
    *n_out = n;
    return 0;
}

static int queue_pair(st_tokenizer *t, heap *q, const symbol *s, int32_t pos)
{
    uint32_t rank, result;
    int32_t nx = s[pos].next;
    if (nx < 0 || !pair_get(&t->merges, s[pos].id, s[nx].id, &rank, &result))
        return 0;
    return heap_push(q, (merge){rank, result, pos});
}

static int merge_word(st_tokenizer *t, const char *w, size_t len, st_token_list *out)
{
    uint32_t whole;
    if (t->ignore_merges && st_tok_strmap_get(&t->vocab, w, len, &whole))
        return st_token_list_push(out, whole);
    symbol *s;
    int32_t n;
    if (initial_symbols(t, w, len, &s, &n))
        return -1;
    heap q = {0};
    int rc = 0;
    for (int32_t i = 0; i + 1 < n && !rc; i++)
        rc = queue_pair(t, &q, s, i);
    while (!rc && q.n) {
        merge m = heap_pop(&q);
        symbol *a = &s[m.pos];
        if (a->len == 0 || a->next < 0)
            continue;
        uint32_t rank, result;
        /* Stale entry: a symbol of the pair changed since it was queued. */
        if (!pair_get(&t->merges, a->id, s[a->next].id, &rank, &result) ||
            result != m.result)
            continue;
        symbol *b = &s[a->next];
        a->id = m.result;
        a->len += b->len;
        a->next = b->next;
        b->len = 0;
        if (a->next >= 0)
            s[a->next].prev = m.pos;
        if (a->prev >= 0)
            rc = queue_pair(t, &q, s, a->prev);
        if (!rc)
            rc = queue_pair(t, &q, s, m.pos);
    }
    for (int32_t i = 0; i < n && !rc; i++)
        if (s[i].len)
            rc = st_token_list_push(out, s[i].id);
    free(q.h);
    free(s);
    return rc;
}

/* Words this long are not cached (the library's limit too): they are
 * rare, and a metaspace line would fill the cache with one-offs. */
#define CACHE_MAX_WORD 256
#define CACHE_MAX_WORDS 100000

int st_tok_bpe_word(st_tokenizer *t, const char *w, size_t len, st_token_list *out)
{
    if (len == 0)
        return 0;
    uint32_t at;
    if (len < CACHE_MAX_WORD && st_tok_strmap_get(&t->cache, w, len, &at)) {
        uint32_t k = t->cache_ids[at];
        for (uint32_t i = 0; i < k; i++)
            if (st_token_list_push(out, t->cache_ids[at + 1 + i]))
                return -1;
        return 0;
    }
    size_t before = out->n;
    if (merge_word(t, w, len, out))
        return -1;
    size_t k = out->n - before;
    if (len >= CACHE_MAX_WORD || t->cache.used >= CACHE_MAX_WORDS)
        return 0;
    if (t->cache_ids_len + k + 1 > t->cache_ids_cap) {
        size_t cap = t->cache_ids_cap ? t->cache_ids_cap * 2 : 65536;
        while (cap < t->cache_ids_len + k + 1)
            cap *= 2;
        uint32_t *c = realloc(t->cache_ids, cap * sizeof *c);
        if (!c)
            return 0; /* a cache that cannot grow is only slower */
        t->cache_ids = c;
        t->cache_ids_cap = cap;
    }
    at = (uint32_t)t->cache_ids_len;
    t->cache_ids[at] = (uint32_t)k;
    memcpy(t->cache_ids + at + 1, out->ids + before, k * sizeof(uint32_t));
    if (st_tok_strmap_put(&t->cache, w, len, at) == 0)
        t->cache_ids_len += k + 1;
    return 0;
}
