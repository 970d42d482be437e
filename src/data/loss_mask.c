/* Loss-mask files: which tokens of instruction data count in the loss, and
 * where each example starts (data/data.h has the format).  prepare writes
 * one beside each token shard of instruction data; the data reader maps
 * it next to its shard and indexes the examples, because such data is
 * read one example per sequence (no packing: an example never attends to
 * another, and needs no document mask in the attention kernels).
 *
 * The mask is a file of its own rather than a bit inside the token file so
 * that the token shards keep llm.c's format, which other tools read. */
#include "data/data.h"

#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    HEADER_INTS = 256,
    HEADER_BYTES = HEADER_INTS * 4,
};


char *st_mask_path(const char *token_path)
{
    const size_t n = strlen(token_path);
    const int bin = n >= 4 && !strcmp(token_path + n - 4, ".bin");
    const size_t stem = bin ? n - 4 : n;
    char *p = malloc(stem + sizeof ".mask");
    if (p) {
        memcpy(p, token_path, stem);
        memcpy(p + stem, ".mask", sizeof ".mask");
    }
    return p;
}

/* ---- writing ------------------------------------------------------------ */

typedef struct {
    const uint8_t *mask;
    int64_t n;
} mask_body;

static int write_mask(int fd, void *ctx)
{
    const mask_body *b = ctx;
    unsigned char header[HEADER_BYTES];
    memset(header, 0, sizeof header);
    st_le32_store(header, ST_MASK_MAGIC);
    st_le32_store(header + 4, ST_MASK_VERSION);
    st_le32_store(header + 8, (uint32_t)b->n);
    if (st_write_all(fd, header, sizeof header))
        return -1;
    return st_write_all(fd, b->mask, (size_t)b->n);
}

int st_write_mask_file(const char *path, const uint8_t *mask, int64_t n)
{
    if (n < 0 || n > INT32_MAX) {
        st_error(path, "%lld mask entries do not fit the header's int32 count",
                 (long long)n);
        return ST_EXIT_USAGE;
    }
    int refused = st_refuse_special(path);
    if (refused)
        return refused;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mask_body b = {mask, n};
    int step = st_file_write_atomic(path, tmp, 0644, write_mask, &b);
    if (step == ST_ATOMIC_DONE)
        return 0;
    st_error(step == ST_ATOMIC_CREATE || step == ST_ATOMIC_WRITE ? tmp : path,
             "cannot write the loss mask: %s; check the directory and free disk space",
             strerror(errno));
    return ST_EXIT_FAILURE;
}

/* ---- reading ------------------------------------------------------------ */

static void unmap_mask(st_token_file *f)
{
    if (f->mask_map)
        munmap((void *)f->mask_map, f->mask_map_bytes);
    f->mask_map = NULL;
    f->mask = NULL;
    f->mask_map_bytes = 0;
}

/* The header, the size and every entry of a mapped mask file. */
static int check_mask(const st_token_file *f, const char *path, off_t size)
{
    const unsigned char *h = f->mask_map;
    const int32_t magic = (int32_t)st_le32_load(h), version = (int32_t)st_le32_load(h + 4);
    const int32_t count = (int32_t)st_le32_load(h + 8);
    if (magic != ST_MASK_MAGIC || version != ST_MASK_VERSION) {
        st_error(path, "not a loss-mask file (magic %d version %d, expected %d version %d); "
                 "hint: only `shardtrain prepare` writes NAME.mask beside NAME.bin",
                 (int)magic, (int)version, ST_MASK_MAGIC, ST_MASK_VERSION);
        return ST_EXIT_USAGE;
    }
    if ((int64_t)count != f->n_tokens || (int64_t)size != HEADER_BYTES + (int64_t)f->n_tokens) {
        st_error(path, "holds %d entries in %lld bytes, but %s has %lld tokens; hint: the "
                 "mask belongs to other data: run `shardtrain prepare` again",
                 (int)count, (long long)size, f->path, (long long)f->n_tokens);
        return ST_EXIT_USAGE;
    }
    const unsigned char *m = h + HEADER_BYTES;
    if (f->n_tokens > 0 && !(m[0] & ST_MASK_START)) {
        st_error(path, "its first token does not start an example; the file is corrupt "
                 "(examples never span two shards)");
        return ST_EXIT_USAGE;
    }
    for (int64_t i = 0; i < f->n_tokens; i++)
        if (m[i] & ~(ST_MASK_LOSS | ST_MASK_START)) {
            st_error(path, "entry %lld is %u, not a combination of 1 (counts in the loss) "
                     "and 2 (starts an example); the file is corrupt", (long long)i,
                     (unsigned)m[i]);
            return ST_EXIT_USAGE;
        }
    return 0;
}

int st_mask_file_open(st_token_file *f, int *present)
{
    *present = 0;
    char *path = st_mask_path(f->path);
    if (!path) {
        st_error(f->path, "out of memory");
        return ST_EXIT_FAILURE;
    }
    struct stat st;
    int fd = st_open_regular_stat(path, &st);
    int rc = 0;
    if (fd == ST_OPEN_FAILED) {
        if (errno != ENOENT) {
            st_error(path, "cannot open: %s", strerror(errno));
            rc = ST_EXIT_USAGE;
        }
        free(path);
        return rc;
    }
    *present = 1;
    if (fd == ST_OPEN_NOT_REGULAR) {
        st_error(path, "not a regular file; hint: NAME.mask beside a token shard is its "
                 "loss mask");
        free(path);
        return ST_EXIT_USAGE;
    }
    if (st.st_size < HEADER_BYTES) {
        st_error(path, "file is %lld bytes, shorter than the %d-byte header; the loss mask "
                 "is truncated", (long long)st.st_size, HEADER_BYTES);
        close(fd);
        free(path);
        return ST_EXIT_USAGE;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        st_error(path, "cannot map: %s", strerror(map_errno));
        free(path);
        return ST_EXIT_FAILURE;
    }
    f->mask_map = map;
    f->mask_map_bytes = (size_t)st.st_size;
    f->mask = f->mask_map + HEADER_BYTES;
    rc = check_mask(f, path, st.st_size);
    if (rc)
        unmap_mask(f);
    free(path);
    return rc;
}

void st_mask_file_close(st_token_file *f) { unmap_mask(f); }

/* Targets that count in an example's sequence: entries 1..m-1 of its first
 * m = min(len, seq_len + 1) tokens (entry 0 is never a target). */
static int64_t counted_targets(const unsigned char *mask, int64_t len, int64_t seq_len)
{
    const int64_t m = len < seq_len + 1 ? len : seq_len + 1;
    int64_t c = 0;
    for (int64_t k = 1; k < m; k++)
        c += mask[k] & ST_MASK_LOSS;
    return c;
}

int st_dataset_index_examples(st_dataset *ds, const char *what)
{
    int64_t n = 0;
    for (int f = 0; f < ds->n_files; f++)
        for (int64_t i = 0; i < ds->files[f].n_tokens; i++)
            n += (ds->files[f].mask[i] & ST_MASK_START) != 0;
    ds->ex_file = malloc(sizeof *ds->ex_file * (size_t)(n ? n : 1));
    ds->ex_off = malloc(sizeof *ds->ex_off * (size_t)(n ? n : 1));
    ds->ex_len = malloc(sizeof *ds->ex_len * (size_t)(n ? n : 1));
    ds->ex_targets = malloc(sizeof *ds->ex_targets * (size_t)(n ? n : 1));
    if (!ds->ex_file || !ds->ex_off || !ds->ex_len || !ds->ex_targets) {
        st_error(what, "out of memory indexing %lld examples", (long long)n);
        return ST_EXIT_FAILURE;
    }
    int64_t e = 0, cut = 0, empty = 0;
    for (int f = 0; f < ds->n_files; f++) {
        const st_token_file *tf = &ds->files[f];
        for (int64_t i = 0; i < tf->n_tokens; i++) {
            if (!(tf->mask[i] & ST_MASK_START))
                continue;
            int64_t end = i + 1;
            while (end < tf->n_tokens && !(tf->mask[end] & ST_MASK_START))
                end++;
            ds->ex_file[e] = f;
            ds->ex_off[e] = i;
            ds->ex_len[e] = end - i;
            ds->ex_targets[e] = counted_targets(tf->mask + i, end - i, ds->seq_len);
            cut += end - i > ds->seq_len + 1;
            empty += ds->ex_targets[e] == 0;
            e++;
        }
    }
    ds->n_examples = n;
    if (n == 0 || empty == n) {
        st_error(what, "%s: none of its %lld examples has a completion token within the "
                 "first seq_len + 1 = %lld tokens, so nothing would count in the loss; hint: "
                 "a larger model.seq_len or shorter prompts", n ? "instruction data" : "no data",
                 (long long)n, (long long)ds->seq_len + 1);
        return ST_EXIT_USAGE;
    }
    if (st_log_rank() == 0 && cut)
        st_warn("%s: %lld of %lld examples are longer than seq_len + 1 = %lld tokens and are "
                "cut to that length (their ends are never trained on)", what,
                (long long)cut, (long long)n, (long long)ds->seq_len + 1);
    if (st_log_rank() == 0 && empty)
        st_warn("%s: %lld of %lld examples have no completion token within the first "
                "seq_len + 1 = %lld tokens and add nothing to the loss", what,
                (long long)empty, (long long)n, (long long)ds->seq_len + 1);
    return 0;
}
