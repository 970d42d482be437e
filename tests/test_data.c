/* Tests of the data layer: token files round-trip through the writer and
 * the memory-mapped reader, windows are deterministic, stay inside one file
 * and cover every file, and each kind of bad file is refused with exactly
 * one error line that names it.  Files are built in a private temporary
 * directory; bad files are made by writing a good one and corrupting it. */
#include "tap.h"

#include "data/data.h"
#include "base/log.h"
#include "base/rng.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[1024];
static char errbuf[8192];

static const char *pathf(const char *name)
{
    static char bufs[4][4096];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* Run st_dataset_open with stderr captured into errbuf, so the tests can
 * check the exact shape of the message. */
static int open_captured(st_dataset *ds, const char *pattern, int64_t seq_len,
                         int64_t vocab)
{
    char cap[4096];
    snprintf(cap, sizeof cap, "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) {
        perror("capture stderr");
        exit(99);
    }
    close(fd);
    int rc = st_dataset_open(ds, pattern, seq_len, vocab, "run.ini", 12);
    fflush(stderr);
    if (dup2(saved, 2) < 0) {
        perror("restore stderr");
        exit(99);
    }
    close(saved);
    FILE *f = fopen(cap, "rb");
    size_t n = f ? fread(errbuf, 1, sizeof errbuf - 1, f) : 0;
    errbuf[n] = '\0';
    if (f)
        fclose(f);
    return rc;
}

static int one_error_line(const char *needle)
{
    size_t len = strlen(errbuf);
    const char *nl = strchr(errbuf, '\n');
    return strncmp(errbuf, "shardtrain: error: ", 19) == 0 && nl &&
           nl == errbuf + len - 1 && strstr(errbuf, needle) != NULL;
}

/* Open must refuse with ST_EXIT_USAGE and one error line naming `needle`. */
static void expect_refused(const char *what, const char *pattern,
                           int64_t seq_len, int64_t vocab, const char *needle)
{
    st_dataset ds;
    int rc = open_captured(&ds, pattern, seq_len, vocab);
    tap_ok(rc == ST_EXIT_USAGE, "%s: refused with exit status 2 (got %d)", what, rc);
    if (!tap_ok(one_error_line(needle), "%s: one error line naming %s", what, needle))
        tap_diag("stderr was: %s", errbuf);
    tap_ok(ds.n_files == 0 && ds.files == NULL, "%s: dataset left empty", what);
    st_dataset_close(&ds);
}

static void write_or_die(const char *path, const uint32_t *t, int64_t n, int version)
{
    if (st_write_token_file(path, t, n, version) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(99);
    }
}

static void patch_int32(const char *path, int index, int32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)((uint32_t)v >> 8),
                          (unsigned char)((uint32_t)v >> 16),
                          (unsigned char)((uint32_t)v >> 24)};
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, b, 4, (off_t)index * 4) != 4 || close(fd) != 0) {
        perror(path);
        exit(99);
    }
}

static void resize(const char *path, off_t size)
{
    if (truncate(path, size) != 0) {
        perror(path);
        exit(99);
    }
}

static uint32_t *seq_tokens(int64_t n, uint32_t base, uint32_t mod)
{
    uint32_t *t = malloc((size_t)n * sizeof *t);
    if (!t)
        exit(99);
    for (int64_t i = 0; i < n; i++)
        t[i] = base + (uint32_t)(i % mod);
    return t;
}

static void test_round_trip(int version, uint32_t base, int64_t vocab)
{
    enum { N = 1000, S = 16 };
    char name[64];
    snprintf(name, sizeof name, "rt_v%d.bin", version);
    const char *p = pathf(name);
    uint32_t *t = seq_tokens(N, base, 997);
    write_or_die(p, t, N, version);
    struct stat st;
    tap_ok(stat(p, &st) == 0 && st.st_size == 1024 + (off_t)N * (version == 1 ? 2 : 4),
           "v%d: file size is header + tokens", version);
    snprintf(name, sizeof name, "rt_v%d.bin.tmp", version);
    tap_ok(access(pathf(name), F_OK) != 0, "v%d: no temporary file left", version);

    st_dataset ds;
    int rc = open_captured(&ds, p, S, vocab);
    tap_ok(rc == 0 && errbuf[0] == '\0', "v%d: opens silently", version);
    if (rc != 0) {
        free(t);
        return;
    }
    tap_ok(ds.n_files == 1 && ds.n_tokens == N && ds.n_windows == N - S &&
           ds.files[0].token_bytes == (version == 1 ? 2 : 4),
           "v%d: counts (files %d tokens %lld windows %lld)", version, ds.n_files,
           (long long)ds.n_tokens, (long long)ds.n_windows);
    int32_t w[S + 1];
    int all = 1;
    int64_t n_eval = (N - 1) / S;
    for (int64_t i = 0; i < n_eval; i++) {
        st_dataset_eval_window(&ds, i, w);
        for (int k = 0; k <= S; k++)
            all &= w[k] == (int32_t)t[i * S + k];
    }
    tap_ok(all, "v%d: eval windows read back the written tokens", version);
    st_dataset_eval_window(&ds, n_eval, w);
    int wraps = 1;
    for (int k = 0; k <= S; k++)
        wraps &= w[k] == (int32_t)t[k];
    tap_ok(wraps, "v%d: eval window %lld wraps to the start", version, (long long)n_eval);
    int in_file = 1;
    for (int j = 0; j < 200; j++) {
        st_dataset_train_window(&ds, 7, 3, j, w);
        /* Locate the window by its first token and check the rest. */
        int64_t start = -1;
        for (int64_t s = 0; s + S < N && start < 0; s++)
            if ((int32_t)t[s] == w[0] && (int32_t)t[s + 1] == w[1])
                start = s;
        int good = start >= 0;
        for (int k = 0; good && k <= S; k++)
            good = w[k] == (int32_t)t[start + k];
        in_file &= good;
    }
    tap_ok(in_file, "v%d: train windows are runs of the written tokens", version);
    st_dataset_close(&ds);
    tap_ok(ds.files == NULL && ds.n_files == 0, "v%d: close clears the dataset", version);
    free(t);
}

/* Three files whose tokens encode (file, position): token = 1000 * f + pos. */
static void test_multi_file(void)
{
    enum { S = 8, F = 3 };
    const int64_t sizes[F] = {50, 5 /* too short for a window */, 300};
    if (mkdir(pathf("multi"), 0700) != 0) {
        perror("mkdir");
        exit(99);
    }
    for (int f = 0; f < F; f++) {
        char name[64];
        snprintf(name, sizeof name, "multi/s_%d.bin", f);
        uint32_t *t = seq_tokens(sizes[f], (uint32_t)(1000 * (f + 1)), 1000);
        write_or_die(pathf(name), t, sizes[f], f == 2 ? 7 : 1);
        free(t);
    }
    st_dataset ds;
    int rc = open_captured(&ds, pathf("multi/s_*.bin"), S, 4000);
    if (!tap_ok(rc == 0, "multi: mixed v1/v7 set opens")) {
        tap_diag("stderr was: %s", errbuf);
        return;
    }
    tap_ok(ds.n_files == F && ds.n_windows == (50 - S) + 0 + (300 - S) &&
           ds.window_start[0] == 0 && ds.window_start[1] == 50 - S &&
           ds.window_start[2] == 50 - S && ds.window_start[3] == ds.n_windows,
           "multi: window counts per file");
    tap_ok(strstr(ds.files[0].path, "s_0") && strstr(ds.files[2].path, "s_2"),
           "multi: files sorted by name");

    int32_t a[S + 1], b[S + 1];
    int same = 1, differs = 0, inside = 1;
    int seen[F] = {0};
    for (int j = 0; j < 1000; j++) {
        st_dataset_train_window(&ds, 1234, 5, j, a);
        st_dataset_train_window(&ds, 1234, 5, j, b);
        same &= memcmp(a, b, sizeof a) == 0;
        st_dataset_train_window(&ds, 1234, 6, j, b);
        differs |= memcmp(a, b, sizeof a) != 0;
        int f = a[0] / 1000 - 1;
        int ok = f >= 0 && f < F && f != 1;
        for (int k = 0; ok && k <= S; k++) {
            int64_t pos = a[0] % 1000 + k;
            ok = a[k] / 1000 - 1 == f && pos < sizes[f] && a[k] % 1000 == pos;
        }
        inside &= ok;
        if (f >= 0 && f < F)
            seen[f]++;
    }
    tap_ok(same, "train windows: same (seed, step, j) gives the same window");
    tap_ok(differs, "train windows: another step gives other windows");
    st_dataset_train_window(&ds, 1234, 5, 0, a);
    st_dataset_train_window(&ds, 1235, 5, 0, b);
    int seed_differs = memcmp(a, b, sizeof a) != 0;
    for (int j = 1; j < 8 && !seed_differs; j++) {
        st_dataset_train_window(&ds, 1234, 5, j, a);
        st_dataset_train_window(&ds, 1235, 5, j, b);
        seed_differs = memcmp(a, b, sizeof a) != 0;
    }
    tap_ok(seed_differs, "train windows: another seed gives other windows");
    tap_ok(inside, "train windows: all in range, consecutive and within one file");
    tap_ok(seen[0] > 0 && seen[2] > 0 && seen[1] == 0,
           "train windows: spread over every file that holds a window "
           "(%d, %d, %d of 1000)", seen[0], seen[1], seen[2]);
    /* Files of 50 and 300 tokens offer 42 and 292 windows: shares near 12.6%. */
    tap_ok(seen[0] > 60 && seen[0] < 200,
           "train windows: file share follows its window count (%d of 1000)", seen[0]);

    /* Eval: file 0 gives floor(49/8) = 6 windows, file 1 none, file 2
     * floor(299/8) = 37; each starts where the previous one's inputs end. */
    int seq_ok = 1;
    int64_t expect_f[43], expect_pos[43];
    for (int i = 0; i < 43; i++) {
        expect_f[i] = i < 6 ? 0 : 2;
        expect_pos[i] = i < 6 ? i * S : (i - 6) * S;
    }
    for (int i = 0; i < 43 * 2 + 1; i++) {
        st_dataset_eval_window(&ds, i, a);
        int e = i % 43;
        for (int k = 0; k <= S; k++)
            seq_ok &= a[k] == (int32_t)(1000 * (expect_f[e] + 1) + expect_pos[e] + k);
    }
    tap_ok(seq_ok, "eval windows: sequential, per file, wrapping after 43");
    st_dataset_close(&ds);

    expect_refused("files each shorter than a window", pathf("multi/s_1.bin"), S, 4000,
                   pathf("multi/s_1.bin"));
}

static void test_write_errors(void)
{
    uint32_t t[3] = {1, 65536, 2};
    fflush(stderr);
    int saved = dup(2);
    int null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0 || dup2(null, 2) < 0)
        exit(99);
    close(null);
    int r1 = st_write_token_file(pathf("big.bin"), t, 3, 1);
    int r2 = st_write_token_file(pathf("badver.bin"), t, 3, 3);
    int r3 = st_write_token_file(pathf("nodir/x.bin"), t, 3, 7);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    tap_ok(r1 == ST_EXIT_USAGE && access(pathf("big.bin"), F_OK) != 0,
           "write: token > 65535 in a version 1 file is refused, nothing written");
    tap_ok(r2 == ST_EXIT_USAGE, "write: unknown version refused");
    tap_ok(r3 == ST_EXIT_FAILURE, "write: missing directory is a runtime failure");
    tap_ok(st_write_token_file(pathf("big7.bin"), t, 3, 7) == 0,
           "write: token > 65535 fits a version 7 file");
    st_dataset ds;
    tap_ok(open_captured(&ds, pathf("big7.bin"), 2, 65537) == 0,
           "read: version 7 token 65536 accepted with vocab 65537");
    st_dataset_close(&ds);
}

static void test_bad_files(void)
{
    enum { N = 100 };
    uint32_t *t = seq_tokens(N, 0, 50);
    const char *p;

    p = pathf("magic.bin");
    write_or_die(p, t, N, 1);
    patch_int32(p, 0, 12345);
    expect_refused("bad magic", p, 8, 256, p);

    p = pathf("version.bin");
    write_or_die(p, t, N, 1);
    patch_int32(p, 1, 7);
    expect_refused("bad version", p, 8, 256, p);

    p = pathf("version7.bin");
    write_or_die(p, t, N, 7);
    patch_int32(p, 1, 1);
    expect_refused("bad version (uint32 magic)", p, 8, 256, p);

    p = pathf("truncated.bin");
    write_or_die(p, t, N, 1);
    resize(p, 1024 + N * 2 - 1);
    expect_refused("truncated file", p, 8, 256, p);
    if (!tap_ok(strstr(errbuf, "1223") && strstr(errbuf, "1224"),
                "truncated file: message gives actual and expected sizes"))
        tap_diag("stderr was: %s", errbuf);

    p = pathf("trailing.bin");
    write_or_die(p, t, N, 7);
    resize(p, 1024 + N * 4 + 3);
    expect_refused("trailing bytes", p, 8, 256, p);

    p = pathf("vocab.bin");
    t[37] = 300;
    write_or_die(p, t, N, 1);
    t[37] = 37;
    expect_refused("token >= vocab_size", p, 8, 256, p);
    if (!tap_ok(strstr(errbuf, "token 37 ") && strstr(errbuf, "300") &&
                strstr(errbuf, "vocab_size"),
                "token >= vocab_size: message gives index, value and the hint"))
        tap_diag("stderr was: %s", errbuf);

    p = pathf("vocab_edge.bin");
    t[0] = 255;
    write_or_die(p, t, N, 1);
    t[0] = 0;
    expect_refused("token == vocab_size", p, 8, 255, p);

    p = pathf("few.bin");
    write_or_die(p, t, 8, 1);
    expect_refused("too few tokens", p, 8, 256, p);
    st_dataset ds;
    tap_ok(open_captured(&ds, p, 7, 256) == 0 && ds.n_windows == 1,
           "exactly seq_len + 1 tokens give one window");
    st_dataset_close(&ds);

    p = pathf("empty_glob_*.bin");
    expect_refused("empty glob", p, 8, 256, "run.ini:12: no file matches");
    tap_ok(strstr(errbuf, p) != NULL, "empty glob: message quotes the glob");
    expect_refused("missing directory in glob", "/nonexistent-shardtrain-dir/*.bin",
                   8, 256, "run.ini:12: no file matches");

    p = pathf("negative.bin");
    write_or_die(p, t, N, 1);
    patch_int32(p, 2, -5);
    expect_refused("negative header count", p, 8, 256, p);

    if (mkdir(pathf("d_dir.bin"), 0700) != 0)
        exit(99);
    write_or_die(pathf("d_a.bin"), t, N, 1);
    expect_refused("directory matched by the glob", pathf("d_*.bin"), 8, 256,
                   pathf("d_dir.bin"));

    p = pathf("short.bin");
    write_or_die(p, t, N, 1);
    resize(p, 1000);
    expect_refused("file shorter than the header", p, 8, 256, p);

    p = pathf("zero.bin");
    write_or_die(p, t, N, 1);
    resize(p, 0);
    expect_refused("empty file", p, 8, 256, p);

    /* A bad file after good ones: the good ones must be released too. */
    write_or_die(pathf("late_a.bin"), t, N, 1);
    write_or_die(pathf("late_b.bin"), t, N, 1);
    patch_int32(pathf("late_b.bin"), 0, 1);
    expect_refused("bad second file", pathf("late_*.bin"), 8, 256, pathf("late_b.bin"));
    free(t);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/shardtrain-data.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 99;
    }
    test_round_trip(1, 1, 1024);
    test_round_trip(7, 70000, 71000);
    test_multi_file();
    test_write_errors();
    test_bad_files();

    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", dir);
    return tap_done();
}
