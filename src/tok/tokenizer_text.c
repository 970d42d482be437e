/* The text pipeline of the tokenizer (tokenizer_impl.h), in the library's
 * order.  Encoding: text -> valid UTF-8 -> split on added tokens (leftmost
 * longest, on the raw text) -> per remaining segment the normaliser, then
 * the pre-tokenisers, each splitting every piece further -> BPE per piece
 * -> the post-processor's template.  Decoding: ids -> token strings (the
 * special ones dropped when asked) -> the decoder chain -> one string.
 *
 * Pieces are (offset, length) views into the segment or into a scratch
 * arena for the pre-tokenisers that insert text (ByteLevel's prefix
 * space, Metaspace's U+2581), so a GPT-2 or Llama 3 word costs no copy. */
#include "tok/tokenizer_impl.h"

#include "base/log.h"

#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Bytes of the valid UTF-8 sequence starting at s[0], or 0 when s starts
 * an invalid one, with *bad set to the length of its maximal subpart. */
static size_t utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned b = s[0];
    if (b < 0x80)
        return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf)
        need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        lo = b == 0xe0 ? 0xa0 : 0x80;
        hi = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        lo = b == 0xf0 ? 0x90 : 0x80;
        hi = b == 0xf4 ? 0x8f : 0xbf;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t i = 1; i <= need; i++) {
        unsigned c = i < n ? s[i] : 0;
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;
        if (i >= n || c < l || c > h) {
            *bad = i;
            return 0;
        }
    }
    return need + 1;
}

/* The text with each maximal invalid subpart replaced by U+FFFD, in a new
 * buffer; NULL with *len unchanged when the text is valid already, or
 * when out of memory (*oom set). */
static char *utf8_lossy(const char *text, size_t *len, int *oom)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = *len, i = 0, bad = 0;
    while (i < n) {
        size_t k = utf8_valid(s + i, n - i, &bad);
        if (!k)
            break;
        i += k;
    }
    if (i == n)
        return NULL;
    /* Each invalid byte grows to at most 3 bytes. */
    char *out = malloc(n * 3 + 1);
    if (!out) {
        *oom = 1;
        return NULL;
    }
    memcpy(out, text, i);
    size_t o = i;
    while (i < n) {
        size_t k = utf8_valid(s + i, n - i, &bad);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += bad;
        }
    }
    *len = o;
    return out;
}

/* ---- growable byte strings ------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static int buf_add(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* Append s with every occurrence of a replaced by r. */
static int buf_add_replaced(buf *b, const char *s, size_t n, const char *a, size_t alen,
                            const char *r, size_t rlen)
{
    size_t i = 0, from = 0;
    while (alen && i + alen <= n) {
        if (memcmp(s + i, a, alen) == 0) {
            if (buf_add(b, s + from, i - from) || buf_add(b, r, rlen))
                return -1;
            i += alen;
            from = i;
        } else {
            i++;
        }
    }
    return buf_add(b, s + from, n - from);
}

/* ---- pre-tokenisation ------------------------------------------------------ */

typedef struct {
    int arena;   /* 0: in the segment, 1: in the arena */
    size_t off, len;
    int at_start; /* begins at offset 0 of the original text */
} piece;

typedef struct {
    piece *p;
    size_t n, cap;
} pieces;

static int pieces_add(pieces *l, piece x)
{
    if (x.len == 0)
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        piece *p = realloc(l->p, cap * sizeof *p);
        if (!p)
            return -1;
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n++] = x;
    return 0;
}

typedef struct {
    const char *seg;
    buf arena;
    pieces cur, next;
} pretok;

static const char *piece_text(const pretok *pt, const piece *x)
{
    return (x->arena ? pt->arena.p : pt->seg) + x->off;
}

/* The parts of a split, arranged as the library's SplitDelimiterBehavior
 * arranges them: each part either starts a new piece or extends the last,
 * by whether it and the part before it matched. */
typedef struct {
    const piece *x;
    int behavior;
    piece cur;
    int have, prev_match;
    pieces *out;
} splitter;

static int split_part(splitter *sp, size_t off, size_t len, int match)
{
    const piece *x = sp->x;
    piece part = {x->arena, x->off + off, len, x->at_start && off == 0};
    int extend = 0;
    switch (sp->behavior) {
    case TOK_SPLIT_REMOVED:
        if (match) {
            sp->prev_match = match;
            return 0;
        }
        break;
    case TOK_SPLIT_MERGED_PREV:
        extend = match && !sp->prev_match;
        break;
    case TOK_SPLIT_MERGED_NEXT:
        extend = sp->prev_match;
        break;
    case TOK_SPLIT_CONTIGUOUS:
        extend = match == sp->prev_match;
        break;
    }
    sp->prev_match = match;
    if (extend && sp->have) {
        sp->cur.len = part.off + part.len - sp->cur.off;
        return 0;
    }
    if (sp->have && pieces_add(sp->out, sp->cur))
        return -1;
    sp->cur = part;
    sp->have = 1;
    return 0;
}

/* Split x at the matches of re; appends the pieces to out. */
static int split_piece(st_tokenizer *t, pretok *pt, const piece *x, const pcre2_code *re,
                       int behavior, pieces *out)
{
    const char *s = piece_text(pt, x);
    size_t start = 0, last = 0;
    splitter sp = {.x = x, .behavior = behavior, .out = out};
    while (start <= x->len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, x->len, start, PCRE2_NO_UTF_CHECK, t->md, NULL);
        if (rc < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match splits nothing; step one character */
            if (ms >= x->len)
                break;
            start = ms + st_tok_utf8_len((const unsigned char *)s + ms, x->len - ms);
            continue;
        }
        if ((ms > last && split_part(&sp, last, ms - last, 0)) || split_part(&sp, ms, me - ms, 1))
            return -1;
        last = start = me;
    }
    if (last < x->len && split_part(&sp, last, x->len - last, 0))
        return -1;
    return sp.have ? pieces_add(out, sp.cur) : 0;
}

/* A piece with prefix (when wanted) and every a replaced by r, copied into
 * the arena. */
static int rewrite_piece(pretok *pt, const piece *x, const char *prefix, size_t plen,
                         const char *a, size_t alen, const char *r, size_t rlen, piece *out)
{
    size_t off = pt->arena.n, src_off = x->off;
    int arena = x->arena;
    /* The source may live in the arena, which the append can move: copy
     * it out first. */
    char *tmp = malloc(x->len ? x->len : 1);
    if (!tmp)
        return -1;
    memcpy(tmp, (arena ? pt->arena.p : pt->seg) + src_off, x->len);
    int rc = buf_add(&pt->arena, prefix, plen) ||
             buf_add_replaced(&pt->arena, tmp, x->len, a, alen, r, rlen);
    free(tmp);
    if (rc)
        return -1;
    *out = (piece){1, off, pt->arena.n - off, x->at_start};
    return 0;
}

static int pre_step(st_tokenizer *t, pretok *pt, const st_tok_pre *p, const piece *x,
                    pieces *out)
{
    const char *s = piece_text(pt, x);
    piece y = *x;
    switch (p->kind) {
    case TOK_PRE_SPLIT:
        return split_piece(t, pt, x, p->re, p->behavior, out);
    case TOK_PRE_BYTELEVEL:
        if (p->add_prefix_space && s[0] != ' ' && rewrite_piece(pt, x, " ", 1, "", 0, "", 0, &y))
            return -1;
        return p->re ? split_piece(t, pt, &y, p->re, TOK_SPLIT_ISOLATED, out)
                     : pieces_add(out, y);
    case TOK_PRE_METASPACE: {
        int has_space = memchr(s, ' ', x->len) != NULL;
        int starts = x->len >= p->repl_len && memcmp(s, p->repl, p->repl_len) == 0;
        int prepend = p->prepend_scheme == TOK_PREPEND_ALWAYS ||
                      (p->prepend_scheme == TOK_PREPEND_FIRST && x->at_start);
        /* The library tests for the replacement after replacing spaces. */
        if (starts || (x->len && s[0] == ' '))
            prepend = 0;
        if ((has_space || prepend) &&
            rewrite_piece(pt, x, p->repl, prepend ? p->repl_len : 0, " ", 1, p->repl,
                          p->repl_len, &y))
            return -1;
        return p->split && p->re ? split_piece(t, pt, &y, p->re, TOK_SPLIT_MERGED_NEXT, out)
                                 : pieces_add(out, y);
    }
    }
    return 0;
}

/* Normaliser, pre-tokenisers and BPE on one segment between added tokens.
 * orig0: the segment's offset in the text. */
static int encode_segment(st_tokenizer *t, const char *seg, size_t n, size_t orig0,
                          st_token_list *out)
{
    if (n == 0)
        return 0;
    buf norm = {0};
    if (t->n_norms) {
        if (buf_add(&norm, seg, n))
            return -1;
        for (int i = 0; i < t->n_norms; i++) {
            const st_tok_norm *z = &t->norms[i];
            buf nx = {0};
            int rc = z->kind == TOK_NORM_PREPEND
                         ? (norm.n ? buf_add(&nx, z->a, z->alen) || buf_add(&nx, norm.p, norm.n)
                                   : buf_add(&nx, "", 0))
                         : buf_add_replaced(&nx, norm.p, norm.n, z->a, z->alen, z->b, z->blen);
            free(norm.p);
            norm = nx;
            if (rc) {
                free(norm.p);
                return -1;
            }
        }
        seg = norm.p;
        n = norm.n;
    }
    pretok pt = {.seg = seg};
    int rc = pieces_add(&pt.cur, (piece){0, 0, n, orig0 == 0});
    for (int i = 0; i < t->n_pres && !rc; i++) {
        pt.next.n = 0;
        for (size_t j = 0; j < pt.cur.n && !rc; j++)
            rc = pre_step(t, &pt, &t->pres[i], &pt.cur.p[j], &pt.next);
        pieces sw = pt.cur;
        pt.cur = pt.next;
        pt.next = sw;
    }
    for (size_t j = 0; j < pt.cur.n && !rc; j++)
        rc = st_tok_bpe_word(t, piece_text(&pt, &pt.cur.p[j]), pt.cur.p[j].len, out);
    free(pt.cur.p);
    free(pt.next.p);
    free(pt.arena.p);
    free(norm.p);
    return rc;
}

/* The longest added token at text[i], or -1. */
static int added_at(const st_tokenizer *t, const char *s, size_t n)
{
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < t->n_added; k++) {
        const st_tok_added *a = &t->added[k];
        if (a->len > best_len && a->len <= n && memcmp(s, a->content, a->len) == 0) {
            best = k;
            best_len = a->len;
        }
    }
    return best;
}

int st_tokenizer_encode(st_tokenizer *t, const char *text, size_t len, int add_special,
                        st_token_list *out)
{
    int oom = 0;
    char *fixed = utf8_lossy(text, &len, &oom);
    if (oom)
        return ST_EXIT_FAILURE;
    const char *s = fixed ? fixed : text;
    int rc = 0;
    for (int i = 0; add_special && i < t->n_before && !rc; i++)
        rc = st_token_list_push(out, t->template_before[i]);
    size_t seg = 0;
    for (size_t i = 0; i < len && !rc;) {
        int k = t->added_first[(unsigned char)s[i]] ? added_at(t, s + i, len - i) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        rc = encode_segment(t, s + seg, i - seg, seg, out) ||
             st_token_list_push(out, t->added[k].id);
        i += t->added[k].len;
        seg = i;
    }
    if (!rc)
        rc = encode_segment(t, s + seg, len - seg, seg, out);
    for (int i = 0; add_special && i < t->n_after && !rc; i++)
        rc = st_token_list_push(out, t->template_after[i]);
    free(fixed);
    return rc ? ST_EXIT_FAILURE : 0;
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct {
    buf *s;
    size_t n, cap;
} strings;

static int strings_add(strings *l, const char *p, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        buf *s = realloc(l->s, cap * sizeof *s);
        if (!s)
            return -1;
        l->s = s;
        l->cap = cap;
    }
    l->s[l->n] = (buf){0};
    return buf_add(&l->s[l->n++], p, n);
}

static void strings_free(strings *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i].p);
    free(l->s);
    memset(l, 0, sizeof *l);
}

/* A byte-level token's bytes: each character mapped back, or the token's
 * own bytes when a character is outside the map (the library's rule). */
static int byte_level_bytes(const buf *tok, buf *out)
{
    const unsigned char *s = (const unsigned char *)tok->p;
    size_t start = out->n;
    for (size_t i = 0; i < tok->n;) {
        int b;
        size_t k = st_tok_char_to_byte(s + i, tok->n - i, &b);
        if (b < 0) {
            out->n = start;
            return buf_add(out, tok->p, tok->n);
        }
        char c = (char)b;
        if (buf_add(out, &c, 1))
            return -1;
        i += k;
    }
    return 0;
}

static int hex_byte_token(const buf *s, unsigned char *b)
{
    if (s->n != 6 || memcmp(s->p, "<0x", 3) != 0 || s->p[5] != '>')
        return 0;
    unsigned v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v * 16 + (unsigned)d;
    }
    *b = (unsigned char)v;
    return 1;
}

/* Valid UTF-8 as one string, or U+FFFD per byte (the library's
 * ByteFallback decoder). */
static int flush_bytes(buf *pend, strings *out)
{
    if (!pend->n)
        return 0;
    size_t i = 0, bad;
    while (i < pend->n) {
        size_t k = utf8_valid((const unsigned char *)pend->p + i, pend->n - i, &bad);
        if (!k)
            break;
        i += k;
    }
    int rc = 0;
    if (i == pend->n)
        rc = strings_add(out, pend->p, pend->n);
    else
        for (size_t j = 0; j < pend->n && !rc; j++)
            rc = strings_add(out, "\xef\xbf\xbd", 3);
    pend->n = 0;
    return rc;
}

static int dec_step(const st_tok_dec *d, strings *in, strings *out)
{
    int rc = 0;
    switch (d->kind) {
    case TOK_DEC_BYTELEVEL: {
        buf all = {0};
        for (size_t i = 0; i < in->n && !rc; i++)
            rc = byte_level_bytes(&in->s[i], &all);
        size_t n = all.n;
        int oom = 0;
        char *fixed = rc ? NULL : utf8_lossy(all.p ? all.p : "", &n, &oom);
        if (!rc && !oom)
            rc = strings_add(out, fixed ? fixed : all.p ? all.p : "", n);
        free(fixed);
        free(all.p);
        return rc || oom ? -1 : 0;
    }
    case TOK_DEC_REPLACE:
        for (size_t i = 0; i < in->n && !rc; i++) {
            buf b = {0};
            rc = buf_add_replaced(&b, in->s[i].p, in->s[i].n, d->a, d->alen, d->b, d->blen) ||
                 strings_add(out, b.p ? b.p : "", b.n);
            free(b.p);
        }
        return rc;
    case TOK_DEC_BYTEFALLBACK: {
        buf pend = {0};
        for (size_t i = 0; i < in->n && !rc; i++) {
            unsigned char b;
            if (hex_byte_token(&in->s[i], &b))
                rc = buf_add(&pend, (const char *)&b, 1);
            else
                rc = flush_bytes(&pend, out) || strings_add(out, in->s[i].p, in->s[i].n);
        }
        if (!rc)
            rc = flush_bytes(&pend, out);
        free(pend.p);
        return rc;
    }
    case TOK_DEC_FUSE: {
        buf all = {0};
        for (size_t i = 0; i < in->n && !rc; i++)
            rc = buf_add(&all, in->s[i].p, in->s[i].n);
        if (!rc)
            rc = strings_add(out, all.p ? all.p : "", all.n);
        free(all.p);
        return rc;
    }
    case TOK_DEC_STRIP:
        for (size_t i = 0; i < in->n && !rc; i++) {
            const char *p = in->s[i].p;
            size_t n = in->s[i].n;
            for (int k = 0; k < d->start && n >= d->alen && memcmp(p, d->a, d->alen) == 0; k++)
                p += d->alen, n -= d->alen;
            for (int k = 0; k < d->stop && n >= d->alen &&
                            memcmp(p + n - d->alen, d->a, d->alen) == 0; k++)
                n -= d->alen;
            rc = strings_add(out, p, n);
        }
        return rc;
    case TOK_DEC_METASPACE:
        for (size_t i = 0; i < in->n && !rc; i++) {
            buf b = {0};
            rc = buf_add_replaced(&b, in->s[i].p, in->s[i].n, d->a, d->alen, " ", 1);
            size_t skip = i == 0 && d->prepend_scheme != TOK_PREPEND_NEVER && b.n &&
                          b.p[0] == ' ';
            if (!rc)
                rc = strings_add(out, b.p ? b.p + skip : "", b.n - skip);
            free(b.p);
        }
        return rc;
    }
    return 0;
}

int st_tokenizer_decode(const st_tokenizer *t, const uint32_t *ids, size_t n,
                        int skip_special, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    strings cur = {0}, next = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t id = ids[i];
        if (id >= t->n_ids || !t->id_token[id] || (skip_special && t->id_special[id]))
            continue;
        rc = strings_add(&cur, t->id_token[id], t->id_token_len[id]);
    }
    if (!t->n_decs && cur.n > 1) { /* no decoder: the library joins with spaces */
        buf all = {0};
        for (size_t i = 0; i < cur.n && !rc; i++)
            rc = (i && buf_add(&all, " ", 1)) || buf_add(&all, cur.s[i].p, cur.s[i].n);
        strings_free(&cur);
        if (!rc)
            rc = strings_add(&cur, all.p, all.n);
        free(all.p);
    }
    for (int k = 0; k < t->n_decs && !rc; k++) {
        rc = dec_step(&t->decs[k], &cur, &next);
        strings_free(&cur);
        cur = next;
        next = (strings){0};
    }
    buf all = {0};
    for (size_t i = 0; i < cur.n && !rc; i++)
        rc = buf_add(&all, cur.s[i].p, cur.s[i].n);
    if (!rc)
        rc = buf_add(&all, "", 0);
    strings_free(&cur);
    strings_free(&next);
    if (rc) {
        free(all.p);
        return ST_EXIT_FAILURE;
    }
    *text = all.p;
    *len = all.n;
    return 0;
}
