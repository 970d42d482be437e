/* The work of `shardtrain prepare` (the command is cli/cmd_prepare.c):
 * turn a plain text file into train and val shards, either with the
 * byte-level tokeniser (token = byte value, vocabulary 256), so a demo or
 * a test needs no external tokeniser, or with a model's Hugging Face
 * tokenizer.json (tok/tokenizer.h), the whole file encoded as one text as
 * the library's encode(text) does, or, for JSONL, each document on its own
 * (prepare_jsonl.c).  Shards are uint16 (version 1) when
 * every id fits, uint32 (version 7) for larger vocabularies such as
 * Llama 3's 128,256.  The val split is the tail of the tokens rather than
 * random windows, so no val window has ever been seen in training.  Each
 * shard is written through st_write_token_file, which writes atomically.
 * JSONL instruction data (prompt/completion or messages lines) also gets a
 * loss mask beside each shard (loss_mask.c); its shards and its val split
 * fall on example boundaries, since it is read one example per sequence.
 * A run that fails part-way removes both splits' shards, its own and an
 * earlier run's, rather than leave a partial or mixed set for a glob. */
#include "data/data.h"
#include "tok/tokenizer.h"

#include "base/files.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read a whole file.  Missing, unreadable and empty inputs are the user's
 * to fix (ST_EXIT_USAGE); an I/O error part-way is a runtime failure. */
static int read_input(const char *path, unsigned char **data, int64_t *len)
{
    *data = NULL;
    *len = 0;
    /* Regular files only, opened without blocking: a FIFO is an error, not
     * a hang. */
    struct stat st;
    int fd = st_open_regular_stat(path, &st);
    if (fd == ST_OPEN_FAILED) {
        st_error(path, "cannot open input: %s; check the path", strerror(errno));
        return ST_EXIT_USAGE;
    }
    if (fd == ST_OPEN_NOT_REGULAR) {
        st_error(path, "input is %s, not a regular file; give a text file",
                 S_ISDIR(st.st_mode) ? "a directory" : "a pipe, socket or device");
        return ST_EXIT_USAGE;
    }
    /* Grow as we go rather than trusting st_size, so pipes and files that
     * change under us still read correctly. */
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 &&
                 (uintmax_t)st.st_size < (uintmax_t)SIZE_MAX
                     ? (size_t)st.st_size + 1 : 65536;
    size_t n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        st_error(path, "out of memory reading the input");
        close(fd);
        return ST_EXIT_FAILURE;
    }
    for (;;) {
        if (n == cap) {
            if (cap > SIZE_MAX / 2) {
                st_error(path, "input too large");
                free(buf);
                close(fd);
                return ST_EXIT_FAILURE;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                st_error(path, "out of memory reading the input");
                free(buf);
                close(fd);
                return ST_EXIT_FAILURE;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            /* EISDIR and friends mean the path is not readable text. */
            int usage = errno == EISDIR || errno == EACCES;
            st_error(path, "cannot read input: %s", strerror(errno));
            free(buf);
            close(fd);
            return usage ? ST_EXIT_USAGE : ST_EXIT_FAILURE;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (close(fd) != 0) {
        st_error(path, "cannot close input: %s", strerror(errno));
        free(buf);
        return ST_EXIT_FAILURE;
    }
    if (n == 0) {
        st_error(path, "input is empty; give a non-empty text file");
        free(buf);
        return ST_EXIT_USAGE;
    }
    if ((uintmax_t)n > (uintmax_t)INT64_MAX) {
        st_error(path, "input too large");
        free(buf);
        return ST_EXIT_FAILURE;
    }
    *data = buf;
    *len = (int64_t)n;
    return 0;
}

/* mkdir -p of the directory part of out_prefix. */
static int make_parent_dirs(const char *out_prefix)
{
    char *dir = strdup(out_prefix);
    if (!dir) {
        st_error(out_prefix, "out of memory");
        return ST_EXIT_FAILURE;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) {
        free(dir);
        return 0;
    }
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            st_error(dir, "cannot create output directory: %s", strerror(e));
            free(dir);
            return e == EACCES || e == ENOTDIR || e == EROFS
                       ? ST_EXIT_USAGE : ST_EXIT_FAILURE;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        st_error(dir, "output directory is not a directory; choose another OUT_PREFIX");
        free(dir);
        return ST_EXIT_USAGE;
    }
    free(dir);
    return 0;
}

static char *shard_path(const char *out_prefix, const char *split, int64_t k)
{
    size_t len = strlen(out_prefix) + strlen(split) + 48;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s_%s_%06lld.bin", out_prefix, split, (long long)k);
    return p;
}

/* The longest name prepare makes from OUT_PREFIX: a loss mask's
 * temporary (six digits: a seventh shard digit would need a million
 * shards, which st_write_token_file's own errors then report). */
#define LONGEST_SUFFIX "_train_000000.mask.tmp"

/* NAME_MAX of the file system OUT_PREFIX's shards go to, asked of its
 * nearest directory that exists (the rest is made at the start, on the
 * same file system as a rule); NAME_MAX itself when it cannot be asked. */
static long name_max_of(const char *out_prefix)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(out_prefix, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == out_prefix ? 1 : (int)(slash - out_prefix),
                 out_prefix);
    for (;;) {
        const long m = pathconf(dir, _PC_NAME_MAX);
        if (m > 0)
            return m;
        if (!strcmp(dir, ".") || !strcmp(dir, "/"))
            return NAME_MAX;
        char *up = strrchr(dir, '/');
        if (!up)
            snprintf(dir, sizeof dir, ".");
        else
            up[up == dir] = '\0';
    }
}

/* Whether name, an entry of OUT_PREFIX's directory (base: OUT_PREFIX's
 * last part), is one prepare may write for split: 1 for shard K's .bin or
 * its loss mask's .mask, 2 for the temporary (.tmp) either is written
 * through, 0 for neither; K as shard_path prints it (six digits, more
 * without a leading zero). */
static int written_name(const char *name, const char *base, const char *split)
{
    const size_t b = strlen(base), s = strlen(split);
    if (strncmp(name, base, b) || name[b] != '_' || strncmp(name + b + 1, split, s) ||
        name[b + 1 + s] != '_')
        return 0;
    const char *d = name + b + s + 2, *e = d;
    while (*e >= '0' && *e <= '9')
        e++;
    if (e - d < 6 || e - d > 18 || (e - d > 6 && *d == '0'))
        return 0;
    static const char *const ends[] = {".bin", ".mask", ".bin.tmp", ".mask.tmp"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(e, ends[i]))
            return i < 2 ? 1 : 2;
    return 0;
}

/* A directory that cannot be listed (search permission without read) is
 * probed name by name instead, up to the first shard number with neither
 * shard nor mask: a split's shards are numbered without gaps, so this
 * sees every earlier run's files though not a stray name past a gap. */
static int probe_outputs(const char *out_prefix, const char *split)
{
    for (int64_t k = 0, more = 1; more; k++) {
        char *path = shard_path(out_prefix, split, k);
        char *mp = path ? st_mask_path(path) : NULL;
        if (!mp) {
            free(path);
            st_error(out_prefix, "out of memory");
            return ST_EXIT_FAILURE;
        }
        struct stat st;
        more = lstat(path, &st) == 0 || lstat(mp, &st) == 0;
        int rc = more ? st_refuse_special(path) : 0;
        if (!rc && more)
            rc = st_refuse_special(mp);
        free(path);
        free(mp);
        if (rc)
            return rc;
    }
    return 0;
}

/* Refuses, before the input is read, an OUT_PREFIX whose shards could not
 * be written: names over the file system's limits (found otherwise only
 * at the first shard, whose failure then looked like a disk error), or a
 * FIFO, device or directory where a shard or loss mask of either split
 * is (renaming over it would replace a device with a file), or a FIFO or
 * device where its temporary is.  How many shards the text makes is not known yet, so every
 * entry of the directory with such a name is checked, whatever its
 * number: probing upwards from shard 0 stopped at the first gap and left
 * one further on to the write of its shard, after the work.  One error
 * line and ST_EXIT_USAGE, or 0. */
static int check_outputs(const char *out_prefix)
{
    const char *base = strrchr(out_prefix, '/');
    base = base ? base + 1 : out_prefix;
    const size_t name = strlen(base) + strlen(LONGEST_SUFFIX);
    const size_t whole = strlen(out_prefix) + strlen(LONGEST_SUFFIX);
    const long name_max = name_max_of(out_prefix);
    if (name > (size_t)name_max || whole >= PATH_MAX) {
        const int in_name = name > (size_t)name_max;
        st_error(out_prefix, "%s with " LONGEST_SUFFIX " after it would be %zu bytes, over "
                 "the %ld %s; hint: give a shorter OUT_PREFIX",
                 in_name ? "its file name" : "it", in_name ? name : whole,
                 in_name ? name_max : (long)PATH_MAX - 1,
                 in_name ? "this file system allows in a name" : "a path may have");
        return ST_EXIT_USAGE;
    }
    static const char *const splits[] = {"train", "val"};
    /* OUT_PREFIX's directory part, its slash kept, so that it prefixes
     * the names read from it ("" for the working directory). */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)(base - out_prefix), out_prefix);
    DIR *d = opendir(dir[0] ? dir : ".");
    if (!d) {
        /* Not there yet (made before the first shard), or its error is
         * the write's to report. */
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        int rc = 0;
        for (int s = 0; s < 2 && !rc; s++)
            rc = probe_outputs(out_prefix, splits[s]);
        return rc;
    }
    int rc = 0;
    struct dirent *e;
    char path[PATH_MAX + NAME_MAX + 2];
    while (!rc && (e = readdir(d))) {
        int kind = written_name(e->d_name, base, splits[0]);
        if (!kind)
            kind = written_name(e->d_name, base, splits[1]);
        if (!kind)
            continue;
        snprintf(path, sizeof path, "%s%s", dir, e->d_name);
        /* A temporary is created in place, never renamed over: a FIFO or
         * device there would be opened (refused only after the open,
         * which a device may act on), but a directory cannot be, and
         * fails its shard's write as a full disk does, replacing
         * nothing. */
        struct stat st;
        if (kind == 2 && lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            continue;
        rc = st_refuse_special(path);
    }
    closedir(d);
    return rc;
}

/* The tokens to write: bytes (byte level) or ids (a tokenizer), and for
 * instruction data the loss mask (data/data.h), one entry per token. */
typedef struct {
    const unsigned char *bytes;
    const uint32_t *ids;
    const uint8_t *mask;
    int version; /* 1: uint16, 7: uint32 */
} token_source;

/* Removes path's loss mask if one is there: a shard rewritten as plain
 * text must not keep the mask of an earlier run's instruction data.  why
 * ("stale", "partial") names it in the messages; quiet leaves a failure
 * to the caller to report. */
static int remove_mask_of(const char *path, const char *why, int quiet)
{
    char *mp = st_mask_path(path);
    if (!mp) {
        if (!quiet)
            st_error(path, "out of memory");
        return ST_EXIT_FAILURE;
    }
    int rc = 0;
    if (unlink(mp) == 0) {
        st_info("removed %s %s", why, mp);
    } else if (errno != ENOENT) {
        if (!quiet)
            st_error(mp, "cannot remove %s loss mask: %s; delete it by hand", why,
                     strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    free(mp);
    return rc;
}

/* One shard of m tokens at off, with its mask or without one. */
static int write_shard(const char *path, const token_source *src, int64_t off, int64_t m,
                       uint32_t *scratch)
{
    const uint32_t *tokens = scratch;
    if (src->ids)
        tokens = src->ids + off;
    else
        for (int64_t i = 0; i < m; i++)
            scratch[i] = src->bytes[off + i];
    int rc = st_write_token_file(path, tokens, m, src->version);
    if (rc)
        return rc;
    if (!src->mask) {
        st_info("wrote %s (%lld tokens)", path, (long long)m);
        return remove_mask_of(path, "stale", 0);
    }
    char *mp = st_mask_path(path);
    if (!mp) {
        st_error(path, "out of memory");
        return ST_EXIT_FAILURE;
    }
    rc = st_write_mask_file(mp, src->mask + off, m);
    if (!rc) {
        int64_t ex = 0, counted = 0;
        for (int64_t i = 0; i < m; i++) {
            ex += (src->mask[off + i] & ST_MASK_START) != 0;
            counted += src->mask[off + i] & ST_MASK_LOSS;
        }
        st_info("wrote %s (%lld tokens, %lld examples) and its loss mask %s (%lld tokens "
                "trained)", path, (long long)m, (long long)ex, mp, (long long)counted);
    }
    free(mp);
    return rc;
}

/* How many tokens from off the next shard takes: shard_tokens, or with a
 * mask the whole examples that fit (at least one: an example never spans
 * two shards). */
static int64_t shard_length(const token_source *src, int64_t off, int64_t left,
                            int64_t shard_tokens)
{
    if (!src->mask || left <= shard_tokens)
        return left < shard_tokens ? left : shard_tokens;
    int64_t cut = 0;
    for (int64_t i = 1; i <= shard_tokens; i++)
        if (src->mask[off + i] & ST_MASK_START)
            cut = i;
    if (cut)
        return cut;
    int64_t i = shard_tokens + 1;
    while (i < left && !(src->mask[off + i] & ST_MASK_START))
        i++;
    return i;
}

/* Delete shards PREFIX_SPLIT_K.bin, K from k up, and their masks, while
 * they exist (a split's shards are numbered without gaps).  `why` names
 * them in the messages ("stale", "partial"); quiet prints no error (the
 * caller reports what is left). */
static int remove_shards_from(const char *out_prefix, const char *split, int64_t k,
                              const char *why, int quiet)
{
    /* A mask that cannot be removed fails the run even when its shard
     * went: the error is printed where it happens, the status kept here. */
    int failed = 0;
    for (;; k++) {
        char *path = shard_path(out_prefix, split, k);
        if (!path) {
            if (!quiet)
                st_error(out_prefix, "out of memory");
            return ST_EXIT_FAILURE;
        }
        int rc = unlink(path);
        int e = errno;
        if (rc == 0)
            st_info("removed %s %s", why, path);
        else if (e != ENOENT && !quiet)
            st_error(path, "cannot remove %s shard: %s; delete it by hand", why,
                     strerror(e));
        failed |= remove_mask_of(path, why, quiet) != 0;
        free(path);
        if (rc != 0)
            return e == ENOENT && !failed ? 0 : ST_EXIT_FAILURE;
    }
}

/* Write tokens [off0, off0 + n) as shards PREFIX_SPLIT_000000.bin, ...,
 * then delete higher-numbered shards of the same split (and their masks)
 * left by an earlier run: they would otherwise be picked up by the data
 * glob and silently mix old text into the set. */
static int write_split(const char *out_prefix, const char *split, const token_source *src,
                       int64_t off0, int64_t n, int64_t shard_tokens, uint32_t *scratch)
{
    int64_t k = 0;
    for (int64_t off = 0; off < n; k++) {
        int64_t m = shard_length(src, off0 + off, n - off, shard_tokens);
        char *path = shard_path(out_prefix, split, k);
        if (!path) {
            st_error(out_prefix, "out of memory");
            return ST_EXIT_FAILURE;
        }
        int rc = write_shard(path, src, off0 + off, m, scratch);
        free(path);
        if (rc != 0)
            return rc;
        off += m;
    }
    return remove_shards_from(out_prefix, split, k, "stale", 0);
}

/* Where JSONL lines go: a tokenizer's ids or bytes, and the loss mask of
 * every token. */
typedef struct {
    st_tokenizer *tok;
    int64_t eos;
    st_token_list *ids;
    unsigned char *bytes;
    size_t n, cap;
    uint8_t *mask;
    size_t mask_cap;
} doc_sink;

static size_t sink_tokens(const doc_sink *d) { return d->tok ? d->ids->n : d->n; }

static int grow(void **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 65536;
    while (c < need)
        c *= 2;
    void *b = realloc(*buf, c);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

/* One segment's tokens (and the end mark after it). */
static int add_segment(doc_sink *d, const st_segment *g, int first)
{
    if (d->tok) {
        if (st_tokenizer_encode(d->tok, g->text, g->len, first, d->ids) ||
            (g->end && d->eos >= 0 && st_token_list_push(d->ids, (uint32_t)d->eos)))
            return -1;
        return 0;
    }
    if (grow((void **)&d->bytes, &d->cap, d->n + g->len + 1))
        return -1;
    memcpy(d->bytes + d->n, g->text, g->len);
    d->n += g->len;
    if (g->end)
        d->bytes[d->n++] = '\n';
    return 0;
}

static int add_example(void *ctx, const st_segment *segs, int n)
{
    doc_sink *d = ctx;
    const size_t start = sink_tokens(d);
    for (int i = 0; i < n; i++) {
        const size_t before = sink_tokens(d);
        if (add_segment(d, &segs[i], i == 0) ||
            grow((void **)&d->mask, &d->mask_cap, sink_tokens(d))) {
            st_error(NULL, "out of memory encoding the text");
            return ST_EXIT_FAILURE;
        }
        /* An empty segment (an empty prompt) adds no token, and before the
         * first token the mask is not yet allocated: memset on NULL is
         * undefined even for no bytes. */
        if (sink_tokens(d) > before)
            memset(d->mask + before, segs[i].loss ? ST_MASK_LOSS : 0, sink_tokens(d) - before);
    }
    if (sink_tokens(d) > start)
        d->mask[start] |= ST_MASK_START;
    return 0;
}

/* The input's tokens: into *ids with a tokenizer, else as bytes (which may
 * replace *bytes and *n, for JSONL); *mask: the loss mask when the input
 * is instruction data, else NULL.  *version: the shards' width. */
static int tokenise(const st_prepare_options *o, const char *input, unsigned char **bytes,
                    int64_t *n, st_token_list *ids, uint8_t **mask, int *version)
{
    doc_sink d = {.eos = -1, .ids = ids};
    int rc = 0, instruction = 0;
    *version = 1;
    *mask = NULL;
    if (o->tokenizer) {
        if ((rc = st_tokenizer_load(o->tokenizer, &d.tok)))
            return rc;
        *version = st_tokenizer_vocab_size(d.tok) <= 65536 ? 1 : 7;
        d.eos = st_tokenizer_eos_id(d.tok);
    }
    if (o->jsonl)
        rc = st_jsonl_examples(input, *bytes, *n, add_example, &d, &instruction);
    else if (d.tok && st_tokenizer_encode(d.tok, (const char *)*bytes, (size_t)*n, 1, ids)) {
        st_error(input, "out of memory encoding the text");
        rc = ST_EXIT_FAILURE;
    }
    if (!rc && !d.tok && o->jsonl) {
        free(*bytes);
        *bytes = d.bytes;
        *n = (int64_t)d.n;
        d.bytes = NULL;
    }
    if (!rc && instruction) {
        *mask = d.mask;
        d.mask = NULL;
    }
    if (!rc && d.tok)
        st_info("encoded %s into %zu tokens with %s (vocabulary %lld, %s shards)", input,
                ids->n, o->tokenizer, (long long)st_tokenizer_vocab_size(d.tok),
                *version == 1 ? "uint16" : "uint32");
    free(d.bytes);
    free(d.mask);
    st_tokenizer_free(d.tok);
    return rc;
}

/* Instruction data's val split: the last val_fraction of the examples,
 * whole.  *n_val gets its tokens. */
static int split_examples(const char *input, const uint8_t *mask, int64_t n,
                          double val_fraction, int64_t *n_val)
{
    int64_t examples = 0;
    for (int64_t i = 0; i < n; i++)
        examples += (mask[i] & ST_MASK_START) != 0;
    int64_t val = (int64_t)((double)examples * val_fraction);
    if (val >= examples)
        val = examples - 1;
    if (val_fraction > 0.0 && val < 1) {
        st_error(input, "%lld examples with val fraction %g leave no val example; use more "
                 "examples or --val-fraction 0", (long long)examples, val_fraction);
        return ST_EXIT_USAGE;
    }
    int64_t seen = 0, cut = n;
    for (int64_t i = 0; i < n && val > 0; i++)
        if ((mask[i] & ST_MASK_START) && seen++ == examples - val) {
            cut = i;
            break;
        }
    *n_val = n - cut;
    return 0;
}

int st_prepare_text(const char *input, const char *out_prefix, const st_prepare_options *o)
{
    const double val_fraction = o->val_fraction;
    const char *tokenizer = o->tokenizer;
    int64_t shard_tokens = o->shard_tokens;
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        st_error(NULL, "val fraction %g is outside [0, 1)", val_fraction);
        return ST_EXIT_USAGE;
    }
    if (shard_tokens < 1) {
        st_error(NULL, "shard size %lld must be at least 1 token",
                 (long long)shard_tokens);
        return ST_EXIT_USAGE;
    }
    /* The header's count is an int32. */
    if (shard_tokens > INT32_MAX)
        shard_tokens = INT32_MAX;

    int rc = check_outputs(out_prefix);
    if (rc != 0)
        return rc;
    unsigned char *bytes;
    int64_t n;
    rc = read_input(input, &bytes, &n);
    if (rc != 0)
        return rc;
    token_source src = {.version = 1};
    st_token_list ids = {0};
    uint8_t *mask = NULL;
    rc = tokenise(o, input, &bytes, &n, &ids, &mask, &src.version);
    if (rc != 0) {
        free(bytes);
        st_token_list_free(&ids);
        return rc;
    }
    src.mask = mask;
    src.bytes = bytes;
    if (tokenizer) {
        free(bytes);
        bytes = NULL;
        src.bytes = NULL;
        src.ids = ids.ids;
        n = (int64_t)ids.n;
    }

    int64_t n_val = (int64_t)((double)n * val_fraction);
    if (n_val >= n)           /* rounding of a fraction just under 1 */
        n_val = n - 1;
    uint32_t *scratch = NULL;
    if (mask && (rc = split_examples(input, mask, n, val_fraction, &n_val)))
        goto out;
    int64_t n_train = n - n_val;
    if (val_fraction > 0.0 && n_val < 2) {
        st_error(input, "%lld %s with val fraction %g leave %lld val tokens, "
                 "fewer than 2; use a larger input or --val-fraction 0",
                 (long long)n, tokenizer ? "tokens" : "bytes", val_fraction, (long long)n_val);
        rc = ST_EXIT_USAGE;
        goto out;
    }
    if ((rc = make_parent_dirs(out_prefix)))
        goto out;
    /* A shard of instruction data may hold one example longer than
     * shard_tokens. */
    int64_t biggest = n_train > n_val ? n_train : n_val;
    size_t scratch_len = (size_t)(biggest < shard_tokens || mask ? biggest : shard_tokens);
    scratch = scratch_len <= SIZE_MAX / sizeof(uint32_t)
                  ? malloc(scratch_len * sizeof(uint32_t)) : NULL;
    if (!scratch) {
        st_error(input, "out of memory");
        rc = ST_EXIT_FAILURE;
        goto out;
    }
    rc = write_split(out_prefix, "train", &src, 0, n_train, shard_tokens, scratch);
    if (rc == 0)
        rc = write_split(out_prefix, "val", &src, n_train, n_val, shard_tokens, scratch);
    /* A run that stops part-way (a full disk) has replaced some of an
     * earlier run's shards and not the rest: the glob would read a mix of
     * the two, or a part of the text, as if whole.  Nothing of either
     * split is kept; the error above says why. */
    if (rc != 0 && (remove_shards_from(out_prefix, "train", 0, "partial", 1) |
                    remove_shards_from(out_prefix, "val", 0, "partial", 1)))
        st_warn("%s_train_* / %s_val_*: could not remove every shard and loss mask of "
                "this failed run; delete what is left by hand before training on it",
                out_prefix, out_prefix);
out:
    free(scratch);
    free(bytes);
    free(mask);
    st_token_list_free(&ids);
    return rc;
}
