/* Token data set: the llm.c shard files named by a glob, memory-mapped so
 * that a set larger than RAM costs only page cache, validated once at open
 * so that training never meets a bad token mid-run, and read through
 * windows that are pure functions of their index, which is what makes a
 * step's data independent of world size, micro-batching and restarts.
 *
 * Windows.  A window is seq_len + 1 consecutive tokens of ONE file (inputs
 * are its first seq_len tokens, targets the last seq_len); no window ever
 * straddles two files, because consecutive shards are unrelated text.
 *  - Training windows may start at any token: a file of n tokens offers
 *    n - seq_len of them (none if n < seq_len + 1).  They are numbered
 *    file by file in name order (window_start holds the prefix sums), and
 *    sample j of step k takes the window numbered st_below3(n_windows, key,
 *    k, j) where key is derived from the seed and ST_RNG_DATA.
 *  - Evaluation windows tile each file without overlap: a file of n tokens
 *    offers floor((n - 1) / seq_len) windows, starting at tokens 0,
 *    seq_len, 2 * seq_len, ... (each window's last token is the next one's
 *    first, as its target).  They are numbered file by file in name order
 *    and eval window i is number i modulo their total, so successive evals
 *    walk the set from its start and wrap around.
 * Instruction data (a loss mask beside every file, loss_mask.c) is read by
 * example instead: sample j of step k is example st_below3(n_examples,
 * key, k, j) from its first token, eval sample i is example i modulo
 * their number. */
#include "data/data.h"

#include "base/files.h"
#include "base/log.h"
#include "base/rng.h"

#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    HEADER_INTS = 256,
    HEADER_BYTES = HEADER_INTS * 4,
    MAGIC_U16 = 20240520,
    VERSION_U16 = 1,
    MAGIC_U32 = 20240801,
    VERSION_U32 = 7,
};

static void install_bus_guard(void);


static uint32_t token_at(const st_token_file *f, int64_t i)
{
    const unsigned char *p = f->map + HEADER_BYTES + (size_t)i * (size_t)f->token_bytes;
    if (f->token_bytes == 2)
        return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return st_le32_load(p);
}

/* glob(3)'s error callback has no user pointer; remember the first failure
 * so the message can name the directory that could not be read. */
static _Thread_local char glob_err_path[4096];
static _Thread_local int glob_err_errno;

static int glob_errfunc(const char *epath, int eerrno)
{
    if (!glob_err_path[0]) {
        snprintf(glob_err_path, sizeof glob_err_path, "%s", epath);
        glob_err_errno = eerrno;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Map the regular file f->path read-only into f->map.  The mapping keeps
 * the file alive, so the descriptor is closed at once; *size is the file's
 * size for the header check. */
static int map_token_file(st_token_file *f, off_t *size)
{
    const char *path = f->path;
    /* A FIFO the glob matches must not hang the open: it is refused as not
     * a regular file. */
    struct stat st;
    int fd = st_open_regular_stat(path, &st);
    if (fd == ST_OPEN_FAILED) {
        st_error(path, "cannot open: %s; check the data.train/data.val glob",
                 strerror(errno));
        return ST_EXIT_USAGE;
    }
    if (fd == ST_OPEN_NOT_REGULAR) {
        st_error(path, "not a regular file; make the glob match only token files");
        return ST_EXIT_USAGE;
    }
    int rc = 0;
    if (st.st_size < HEADER_BYTES) {
        st_error(path, "file is %lld bytes, shorter than the %d-byte header; "
                 "is this a token file?", (long long)st.st_size, HEADER_BYTES);
        rc = ST_EXIT_USAGE;
    } else if ((uintmax_t)st.st_size > (uintmax_t)SIZE_MAX) {
        st_error(path, "file is %lld bytes, too large to map on this system",
                 (long long)st.st_size);
        rc = ST_EXIT_USAGE;
    }
    if (rc) {
        close(fd);
        return rc;
    }
    size_t bytes = (size_t)st.st_size;
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    if (close(fd) != 0 && map != MAP_FAILED) {
        st_error(path, "cannot close: %s", strerror(errno));
        munmap(map, bytes);
        return ST_EXIT_FAILURE;
    }
    if (map == MAP_FAILED) {
        st_error(path, "cannot map: %s", strerror(map_errno));
        return ST_EXIT_FAILURE;
    }
    f->map = map;
    f->map_bytes = bytes;
    *size = st.st_size;
    return 0;
}

/* The header of a mapped file: magic and version (which give the token
 * width), and a token count that matches the file's size. */
static int check_token_header(st_token_file *f, off_t size)
{
    const char *path = f->path;
    int32_t magic = (int32_t)st_le32_load(f->map);
    int32_t version = (int32_t)st_le32_load(f->map + 4);
    int32_t count = (int32_t)st_le32_load(f->map + 8);
    int expect_version = magic == MAGIC_U16 ? VERSION_U16 : VERSION_U32;
    if (magic != MAGIC_U16 && magic != MAGIC_U32) {
        st_error(path, "bad magic %d (expected %d or %d); "
                 "is this an llm.c token file?",
                 (int)magic, MAGIC_U16, MAGIC_U32);
        return ST_EXIT_USAGE;
    }
    if (version != expect_version) {
        st_error(path, "version %d with magic %d (expected version %d); "
                 "the file was written by an unsupported tool",
                 (int)version, (int)magic, expect_version);
        return ST_EXIT_USAGE;
    }
    f->token_bytes = magic == MAGIC_U16 ? 2 : 4;
    if (count < 0) {
        st_error(path, "header token count is %d, negative; the header is corrupt",
                 (int)count);
        return ST_EXIT_USAGE;
    }
    /* count < 2^31 and token_bytes <= 4, so this cannot overflow int64. */
    int64_t expect = (int64_t)HEADER_BYTES + (int64_t)count * f->token_bytes;
    if ((int64_t)size != expect) {
        int64_t diff = (int64_t)size - expect;
        st_error(path, "file is %lld bytes but its header promises %d tokens "
                 "of %d bytes, %lld bytes in all; the file is %s by %lld bytes",
                 (long long)size, (int)count, f->token_bytes,
                 (long long)expect, diff < 0 ? "truncated" : "too long",
                 (long long)(diff < 0 ? -diff : diff));
        return ST_EXIT_USAGE;
    }
    f->n_tokens = count;
    return 0;
}

/* Every token id is below vocab_size (and fits the int32 windows). */
static int check_token_ids(const st_token_file *f, int64_t vocab_size)
{
    int64_t limit = vocab_size < INT32_MAX ? vocab_size : (int64_t)INT32_MAX + 1;
    if (f->token_bytes == 2 && limit >= 65536)
        return 0; /* no 16-bit id can be out of range */
    for (int64_t i = 0; i < f->n_tokens; i++) {
        uint32_t t = token_at(f, i);
        if ((int64_t)t >= limit) {
            st_error(f->path, "token %lld is %lu, not below vocab_size %lld; "
                     "model.vocab_size may be too small for this data",
                     (long long)i, (unsigned long)t, (long long)vocab_size);
            return ST_EXIT_USAGE;
        }
    }
    return 0;
}

/* Map one file and check its header, size and tokens.  f->path is set by
 * the caller; on failure nothing stays mapped. */
static int open_token_file(st_token_file *f, int64_t vocab_size)
{
    off_t size = 0;
    int rc = map_token_file(f, &size);
    if (rc)
        return rc;
    rc = check_token_header(f, size);
    rc = rc ? rc : check_token_ids(f, vocab_size);
    if (rc) {
        munmap((void *)f->map, f->map_bytes);
        f->map = NULL;
        f->map_bytes = 0;
    }
    return rc;
}

/* The files glob_pattern matches, sorted bytewise into *g; the caller
 * frees g whatever this returns. */
static int find_token_files(glob_t *g, const char *glob_pattern, const char *cfg_file,
                            int cfg_line)
{
    glob_err_path[0] = '\0';
    glob_err_errno = 0;
    int grc = glob(glob_pattern, GLOB_ERR, glob_errfunc, g);
    if (grc == GLOB_ABORTED && glob_err_errno != ENOENT &&
        glob_err_errno != ENOTDIR) {
        st_error(glob_err_path[0] ? glob_err_path : glob_pattern,
                 "cannot read directory: %s; check its permissions",
                 strerror(glob_err_errno));
        return ST_EXIT_USAGE;
    }
    if (grc == GLOB_NOSPACE) {
        st_error(glob_pattern, "out of memory expanding the glob");
        return ST_EXIT_FAILURE;
    }
    if (grc != 0 || g->gl_pathc == 0) {
        st_error_at(cfg_file, cfg_line, "no file matches '%s'; check the path "
                    "(relative paths are relative to the working directory)",
                    glob_pattern);
        return ST_EXIT_USAGE;
    }
    if (g->gl_pathc > (size_t)INT32_MAX) {
        st_error_at(cfg_file, cfg_line, "too many files match '%s'", glob_pattern);
        return ST_EXIT_USAGE;
    }
    /* glob sorts with strcoll; the window numbering must not depend on the
     * locale, so sort bytewise. */
    qsort(g->gl_pathv, g->gl_pathc, sizeof *g->gl_pathv, cmp_str);
    return 0;
}

int st_dataset_open(st_dataset *ds, const char *glob_pattern, int64_t seq_len,
                    int64_t vocab_size, const char *cfg_file, int cfg_line)
{
    memset(ds, 0, sizeof *ds);
    /* A file holds fewer than 2^31 tokens, so a longer window could never
     * fit; the bound also keeps seq_len + 1 from overflowing. */
    if (seq_len < 1 || seq_len >= INT32_MAX || vocab_size < 1) {
        st_error_at(cfg_file, cfg_line, "seq_len %lld must be in [1, %d) and "
                    "vocab_size %lld at least 1", (long long)seq_len, INT32_MAX,
                    (long long)vocab_size);
        return ST_EXIT_USAGE;
    }
    install_bus_guard();
    /* Zeroed so globfree is safe whatever glob returns. */
    glob_t g = {0};
    int rc = find_token_files(&g, glob_pattern, cfg_file, cfg_line);
    if (rc) {
        globfree(&g);
        return rc;
    }
    int n = (int)g.gl_pathc;
    rc = ST_EXIT_FAILURE;
    ds->files = calloc((size_t)n, sizeof *ds->files);
    ds->window_start = calloc((size_t)n + 1, sizeof *ds->window_start);
    if (!ds->files || !ds->window_start) {
        st_error(glob_pattern, "out of memory");
        goto fail;
    }
    ds->seq_len = seq_len;
    for (int i = 0; i < n; i++) {
        ds->files[i].path = strdup(g.gl_pathv[i]);
        if (!ds->files[i].path) {
            st_error(glob_pattern, "out of memory");
            goto fail;
        }
        ds->n_files = i + 1;
        rc = open_token_file(&ds->files[i], vocab_size);
        int has_mask = 0;
        rc = rc ? rc : st_mask_file_open(&ds->files[i], &has_mask);
        if (rc != 0)
            goto fail;
        if (i > 0 && has_mask != ds->masked) {
            rc = ST_EXIT_USAGE;
            st_error(ds->files[i].path, "%s loss mask (NAME.mask) but %s %s; hint: a "
                     "set is either instruction data (every shard with its mask) or plain "
                     "text (none); make the glob match one kind", has_mask ? "has a" : "has no",
                     ds->files[0].path, ds->masked ? "has one" : "has none");
            goto fail;
        }
        ds->masked = has_mask;
        int64_t nt = ds->files[i].n_tokens;
        ds->n_tokens += nt;
        ds->window_start[i + 1] = ds->window_start[i] + (nt > seq_len ? nt - seq_len : 0);
    }
    ds->n_windows = ds->window_start[n];
    if (ds->masked) {
        /* Examples are padded, so even a short set makes whole sequences. */
        rc = st_dataset_index_examples(ds, glob_pattern);
        if (rc)
            goto fail;
        globfree(&g);
        return 0;
    }
    rc = ST_EXIT_USAGE;
    if (ds->n_tokens < seq_len + 1) {
        st_error(n == 1 ? ds->files[0].path : glob_pattern,
                 "only %lld tokens in %d file%s, but a window needs seq_len + 1 = "
                 "%lld; use more data or a smaller model.seq_len",
                 (long long)ds->n_tokens, n, n == 1 ? "" : "s",
                 (long long)seq_len + 1);
        goto fail;
    }
    if (ds->n_windows == 0) {
        st_error(glob_pattern, "no file holds seq_len + 1 = %lld tokens, and "
                 "windows never span two files; use larger shards or a smaller "
                 "model.seq_len", (long long)seq_len + 1);
        goto fail;
    }
    globfree(&g);
    return 0;
fail:
    globfree(&g);
    st_dataset_close(ds);
    return rc;
}

void st_dataset_close(st_dataset *ds)
{
    for (int i = 0; i < ds->n_files; i++) {
        if (ds->files[i].map)
            munmap((void *)ds->files[i].map, ds->files[i].map_bytes);
        st_mask_file_close(&ds->files[i]);
        free(ds->files[i].path);
    }
    free(ds->files);
    free(ds->window_start);
    free(ds->ex_file);
    free(ds->ex_off);
    free(ds->ex_len);
    free(ds->ex_targets);
    memset(ds, 0, sizeof *ds);
}

/* A token file truncated while it is mapped makes a read past its new end
 * raise SIGBUS.  copy_window reads under a guard that turns that into one
 * error line naming the file, never a crash with a backtrace; st_fatal,
 * because a window read, mid-step, has no error path to return through.
 * SIGBUS is delivered to the thread that faulted, so the jump buffer is
 * per thread. */
static _Thread_local sigjmp_buf bus_jump;
static _Thread_local volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig)
{
    if (bus_armed)
        siglongjmp(bus_jump, 1);
    /* Not ours: the default action, as if no handler were installed. */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_bus_guard(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

/* Tokens [start, start + n) of f into out, and their loss bits into loss
 * (when both exist), under the guard. */
static void copy_window(const st_token_file *f, int64_t start, int64_t n, int32_t *out,
                        uint8_t *loss)
{
    const int64_t seq_len = n - 1;
    if (sigsetjmp(bus_jump, 1)) {
        bus_armed = 0;
        st_fatal("%s: the token file shrank while this run was reading it (tokens %lld-%lld "
                 "are no longer there); hint: never rewrite or truncate token files under a "
                 "running job; rerun once the data is in place", f->path, (long long)start,
                 (long long)(start + seq_len));
    }
    bus_armed = 1;
    for (int64_t k = 0; k <= seq_len; k++)
        out[k] = (int32_t)token_at(f, start + k);
    if (loss && f->mask)
        for (int64_t k = 0; k <= seq_len; k++)
            loss[k] = f->mask[start + k] & ST_MASK_LOSS;
    bus_armed = 0;
}

/* Example e from its first token; the tail past its end is padding. */
static int64_t copy_example(const st_dataset *ds, int64_t e, int32_t *out, uint8_t *loss)
{
    const int64_t want = ds->seq_len + 1;
    const int64_t len = ds->ex_len[e] < want ? ds->ex_len[e] : want;
    copy_window(&ds->files[ds->ex_file[e]], ds->ex_off[e], len, out, loss);
    for (int64_t k = len; k < want; k++) {
        out[k] = 0;
        if (loss)
            loss[k] = 0;
    }
    if (loss)
        loss[0] = 0; /* never a target */
    return ds->ex_targets[e];
}

/* Plain text: every target counts. */
static int64_t all_count(const st_dataset *ds, uint8_t *loss)
{
    if (loss)
        memset(loss, 1, (size_t)ds->seq_len + 1);
    return ds->seq_len;
}

/* The data key: hashing the seed with the domain tag keeps data draws
 * apart from every other stream drawn from the same seed. */
static uint64_t data_key(uint64_t seed) { return st_hash3(seed, ST_RNG_DATA, 0); }

static int64_t train_example(const st_dataset *ds, uint64_t seed, int64_t step, int64_t j)
{
    return (int64_t)st_below3((uint64_t)ds->n_examples, data_key(seed), (uint64_t)step,
                              (uint64_t)j);
}

int64_t st_dataset_train_sample(const st_dataset *ds, uint64_t seed, int64_t step,
                                int64_t j, int32_t *out, uint8_t *loss)
{
    if (ds->masked)
        return copy_example(ds, train_example(ds, seed, step, j), out, loss);
    int64_t w = (int64_t)st_below3((uint64_t)ds->n_windows, data_key(seed), (uint64_t)step,
                                   (uint64_t)j);
    /* First file whose prefix sum exceeds w, minus one: skips files that
     * offer no window (equal prefix sums). */
    int lo = 0, hi = ds->n_files;      /* window_start[hi] > w always */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (ds->window_start[mid] <= w)
            lo = mid;
        else
            hi = mid;
    }
    copy_window(&ds->files[lo], w - ds->window_start[lo], ds->seq_len + 1, out, NULL);
    return all_count(ds, loss);
}

int64_t st_dataset_train_targets(const st_dataset *ds, uint64_t seed, int64_t step,
                                 int64_t j)
{
    return ds->masked ? ds->ex_targets[train_example(ds, seed, step, j)] : ds->seq_len;
}

void st_dataset_train_window(const st_dataset *ds, uint64_t seed, int64_t step,
                             int64_t j, int32_t *out)
{
    st_dataset_train_sample(ds, seed, step, j, out, NULL);
}

static int64_t eval_windows_in(const st_token_file *f, int64_t seq_len)
{
    return f->n_tokens > seq_len ? (f->n_tokens - 1) / seq_len : 0;
}

int64_t st_dataset_eval_sample(const st_dataset *ds, int64_t i, int32_t *out, uint8_t *loss)
{
    if (ds->masked) {
        int64_t e = i % ds->n_examples;
        return copy_example(ds, e < 0 ? e + ds->n_examples : e, out, loss);
    }
    int64_t total = 0;
    for (int f = 0; f < ds->n_files; f++)
        total += eval_windows_in(&ds->files[f], ds->seq_len);
    int64_t r = i % total;
    if (r < 0)
        r += total;
    for (int f = 0; f < ds->n_files; f++) {
        int64_t nf = eval_windows_in(&ds->files[f], ds->seq_len);
        if (r < nf) {
            copy_window(&ds->files[f], r * ds->seq_len, ds->seq_len + 1, out, NULL);
            break;
        }
        r -= nf;
    }
    return all_count(ds, loss);
}

void st_dataset_eval_window(const st_dataset *ds, int64_t i, int32_t *out)
{
    st_dataset_eval_sample(ds, i, out, NULL);
}

/* Tokens are converted to the file's width CHUNK at a time. */
enum { CHUNK = 65536 };

/* The body of a token file, for st_file_write_atomic. */
typedef struct {
    const uint32_t *tokens;
    int64_t n;
    int version, token_bytes;
    unsigned char *buf;      /* CHUNK tokens of the file's width */
} token_file;

static int write_tokens(int fd, void *ctx)
{
    const token_file *tf = ctx;
    unsigned char header[HEADER_BYTES];
    memset(header, 0, sizeof header);
    st_le32_store(header, tf->version == VERSION_U16 ? MAGIC_U16 : MAGIC_U32);
    st_le32_store(header + 4, (uint32_t)tf->version);
    st_le32_store(header + 8, (uint32_t)tf->n);
    if (st_write_all(fd, header, sizeof header))
        return -1;
    for (int64_t i = 0; i < tf->n; i += CHUNK) {
        int64_t m = tf->n - i < CHUNK ? tf->n - i : CHUNK;
        for (int64_t k = 0; k < m; k++) {
            uint32_t t = tf->tokens[i + k];
            unsigned char *p = tf->buf + (size_t)k * (size_t)tf->token_bytes;
            if (tf->token_bytes == 2) {
                p[0] = (unsigned char)t;
                p[1] = (unsigned char)(t >> 8);
            } else {
                st_le32_store(p, t);
            }
        }
        if (st_write_all(fd, tf->buf, (size_t)m * (size_t)tf->token_bytes))
            return -1;
    }
    return 0;
}

int st_write_token_file(const char *path, const uint32_t *tokens, int64_t n,
                        int version)
{
    int token_bytes;
    if (version == VERSION_U16)
        token_bytes = 2;
    else if (version == VERSION_U32)
        token_bytes = 4;
    else {
        st_error(path, "cannot write token file version %d; use 1 (uint16) or 7 (uint32)",
                 version);
        return ST_EXIT_USAGE;
    }
    if (n < 0 || n > INT32_MAX) {
        st_error(path, "%lld tokens do not fit the header's int32 count; "
                 "split them into smaller shards", (long long)n);
        return ST_EXIT_USAGE;
    }
    if (version == VERSION_U16) {
        for (int64_t i = 0; i < n; i++) {
            if (tokens[i] > 65535) {
                st_error(path, "token %lld is %lu, too large for a version 1 "
                         "(uint16) file; write version 7", (long long)i,
                         (unsigned long)tokens[i]);
                return ST_EXIT_USAGE;
            }
        }
    }

    int refused = st_refuse_special(path);
    if (refused)
        return refused;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    token_file tf = {tokens, n, version, token_bytes, malloc((size_t)CHUNK * 4)};
    if (!tmp || !tf.buf) {
        st_error(path, "out of memory");
        free(tmp);
        free(tf.buf);
        return ST_EXIT_FAILURE;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    int step = st_file_write_atomic(path, tmp, 0644, write_tokens, &tf);
    free(tf.buf);
    switch (step) {
    case ST_ATOMIC_CREATE:
        st_error(tmp, "cannot create: %s; check the directory exists and is writable",
                 strerror(errno));
        break;
    case ST_ATOMIC_WRITE:
        st_error(tmp, "cannot write: %s; check free disk space", strerror(errno));
        break;
    case ST_ATOMIC_RENAME:
        st_error(path, "cannot rename %s into place: %s", tmp, strerror(errno));
        break;
    case ST_ATOMIC_SYNC_DIR:
        st_error(path, "cannot sync its directory: %s", strerror(errno));
        break;
    }
    free(tmp);
    return step ? ST_EXIT_FAILURE : 0;
}
