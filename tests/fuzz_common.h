/* What the file-reading fuzz targets (tests/fuzz_*.c) share: the parsers
 * under test take a path, not bytes, so each input is written to a file in
 * a private temporary directory; and every parser promises that a bad input
 * is reported as exactly one `shardtrain: error: ...` line, so stderr is
 * captured in memory around each call and that promise checked.  The
 * sanitizers write their reports to file descriptor 2 directly, so
 * replacing the stdio stream stderr hides nothing from libFuzzer.
 *
 * FUZZ_SELF_TEST=1 makes every accepted input abort (fuzz_accepted), so a
 * test can show that a crash really fails a run. */
#ifndef ST_FUZZ_COMMON_H
#define ST_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fuzz_require(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz: invariant broken: %s\n", what);
        abort();
    }
}

/* A directory of our own for the whole run (removed by nobody: it lives
 * under $TMPDIR, which the test harness cleans). */
static inline const char *fuzz_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/st-fuzz.XXXXXX", t && *t ? t : "/tmp");
        fuzz_require(mkdtemp(dir) != NULL, "mkdtemp");
    }
    return dir;
}

static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    fuzz_require(f != NULL, "open the input file for writing");
    fuzz_require(fwrite(data, 1, size, f) == size && fclose(f) == 0, "write the input file");
}

/* stderr as a memory stream from fuzz_capture to fuzz_released. */
static FILE *fuzz_real_stderr;
static char *fuzz_err;
static size_t fuzz_errlen;

static void fuzz_capture(void)
{
    if (!fuzz_real_stderr)
        fuzz_real_stderr = stderr;
    stderr = open_memstream(&fuzz_err, &fuzz_errlen);
    fuzz_require(stderr != NULL, "open_memstream");
}

/* Restore stderr; check the error promise when rc is non-zero: exactly
 * one line that starts "shardtrain: error: " (warnings may come before). */
static void fuzz_released(int rc)
{
    fclose(stderr);
    stderr = fuzz_real_stderr;
    if (rc != 0) {
        int errors = 0;
        for (char *p = fuzz_err; p && *p;) {
            char *nl = strchr(p, '\n');
            if (strncmp(p, "shardtrain: error: ", 19) == 0)
                errors++;
            if (!nl) {
                fprintf(stderr, "output: %s\n", fuzz_err);
                fuzz_require(0, "the error output ends in a newline");
            }
            p = nl + 1;
        }
        if (errors != 1)
            fprintf(stderr, "output: %s\n", fuzz_err ? fuzz_err : "(none)");
        fuzz_require(errors == 1, "a rejected input gives exactly one error line");
    }
    free(fuzz_err);
    fuzz_err = NULL;
    fuzz_errlen = 0;
}

static void fuzz_accepted(void)
{
    static int self_test = -1;
    if (self_test < 0)
        self_test = getenv("FUZZ_SELF_TEST") != NULL;
    fuzz_require(!self_test, "self-test: an accepted input aborts on purpose");
}

#endif
