/* The TensorBoard writer from the C side (tests/tensorboard.sh reads what
 * it writes back with PyPI's tensorboard).
 *
 *   test_tensorboard              TAP: CRC-32C's catalogue check value,
 *                                 chunked = whole, the events file's name
 *                                 and order, and the failures: a log.dir
 *                                 that is a file, a write past the file
 *                                 size limit (one error line, then quiet);
 *   test_tensorboard crc FILE...  the CRC-32C of each file, in hex, for a
 *                                 comparison with Debian's python3-crc32c;
 *   test_tensorboard write DIR    two writers' records in DIR, the second
 *                                 resuming from step 3 of the first, and
 *                                 DIR/expected.jsonl listing every record
 *                                 as it was asked for. */
#include "base/log.h"
#include "report/crc32c.h"
#include "report/tensorboard.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int print_file_crcs(int n, char **paths)
{
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f)
            st_die(ST_EXIT_USAGE, "%s: %s", paths[i], strerror(errno));
        unsigned char buf[4096];
        uint32_t crc = 0;
        for (size_t got; (got = fread(buf, 1, sizeof buf, f)) > 0;)
            crc = st_crc32c(crc, buf, got);
        fclose(f);
        printf("%08x %s\n", crc, paths[i]);
    }
    return 0;
}

/* Records every write into expected.jsonl so the reader compares the file
 * with what was asked for, not with a second copy of these values. */
static FILE *expected;

static void must(int rc, const char *what)
{
    if (rc)
        st_die(ST_EXIT_FAILURE, "%s failed", what);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void open_session(st_tb_writer **w, const char *dir, int64_t resumed_from)
{
    must(st_tb_open(w, dir, resumed_from), "st_tb_open");
    fprintf(expected, "{\"start\":%lld}\n", (long long)resumed_from + 1);
}

/* One line per record: {"step":N,"scalars":[[TAG,VALUE],...]} */
static void expect_scalars(int64_t step, const st_tb_value *v, int n)
{
    fprintf(expected, "{\"step\":%lld,\"scalars\":[", (long long)step);
    for (int i = 0; i < n; i++) {
        fprintf(expected, "%s[", i ? "," : "");
        json_string(expected, v[i].tag);
        fprintf(expected, ",%.17g]", v[i].value);
    }
    fprintf(expected, "]}\n");
}

static void scalars(st_tb_writer *w, int64_t step, const st_tb_value *v, int n)
{
    must(st_tb_scalars(w, step, v, n), "st_tb_scalars");
    expect_scalars(step, v, n);
}

static void scalar(st_tb_writer *w, const char *tag, int64_t step, double value)
{
    must(st_tb_scalar(w, tag, step, value), "st_tb_scalar");
    expect_scalars(step, &(st_tb_value){tag, value}, 1);
}

/* {"step":N,"text":[TAG,TEXT]}, or "block" for st_tb_text_block */
static void text(st_tb_writer *w, const char *tag, int64_t step, const char *s, int block)
{
    must((block ? st_tb_text_block : st_tb_text)(w, tag, step, s), "st_tb_text");
    fprintf(expected, "{\"step\":%lld,\"%s\":[", (long long)step, block ? "block" : "text");
    json_string(expected, tag);
    fputc(',', expected);
    json_string(expected, s);
    fprintf(expected, "]}\n");
}

/* Session 1 logs steps 1..5; session 2 resumes from a checkpoint of step 3
 * and logs 4..6 with other values, as a run does after a crash.  Texts:
 * plain Markdown and blocks with empty and indented lines.  The values
 * include what a float keeps exactly, what it rounds, zero, negatives, a
 * byte count past 2^24, and values only a float's range holds. */
static int write_sessions(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.jsonl", dir);
    if (!(expected = fopen(path, "w")))
        st_die(ST_EXIT_FAILURE, "%s: %s", path, strerror(errno));
    st_tb_writer *w;
    open_session(&w, dir, 0);
    text(w, "config", 1, "[model]\narch = gpt2   ; from default\n\n  [log]\n\n", 1);
    text(w, "notes", 1, "**bold** ünïcødé\n\n* a list", 0);
    for (int64_t s = 1; s <= 5; s++) {
        st_tb_value v[] = {
            {"train/loss", 5.5 / (double)s + 0.123456789},
            {"train/lr", 3e-4 * (double)s},
            {"memory/peak_bytes", 123456789.0 * (double)s},
            {"x/zero_negative", s == 2 ? 0.0 : -1.0 / 3.0 * (double)s},
        };
        scalars(w, s, v, 4);
        if (s == 2)
            scalar(w, "eval/val_loss", s, 1e-30);
        if (s == 4)
            scalar(w, "eval/val_loss", s, 3e38);
    }
    must(st_tb_close(w), "st_tb_close");

    open_session(&w, dir, 3);
    text(w, "config", 4, "second session", 1);
    for (int64_t s = 4; s <= 6; s++) {
        st_tb_value v[] = {
            {"train/loss", 2.0 + 1.0 / (double)s},
            {"train/lr", 1e-4},
            {"memory/peak_bytes", 987654321.0},
            {"x/zero_negative", -(double)s},
        };
        scalars(w, s, v, 4);
    }
    must(st_tb_close(w), "st_tb_close");
    fclose(expected);
    return 0;
}

/* The names of the events files in dir, sorted, into names[]; their count. */
static int event_files(const char *dir, char names[][512], int max)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;)
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0)
            snprintf(names[n++], 512, "%s", e->d_name);
    closedir(d);
    qsort(names, (size_t)n, 512, (int (*)(const void *, const void *))strcmp);
    return n;
}

static void check_crc(void)
{
    tap_ok(st_crc32c(0, "123456789", 9) == 0xE3069283u,
           "CRC-32C of \"123456789\" is the catalogue check value 0xE3069283 (got %08x)",
           st_crc32c(0, "123456789", 9));
    tap_ok(st_crc32c(0, "", 0) == 0, "CRC-32C of nothing is 0");
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (unsigned char)(i * 7919 + 13);
    uint32_t whole = st_crc32c(0, buf, sizeof buf);
    int same = 1;
    for (size_t cut = 0; cut <= sizeof buf; cut += 37)
        same &= st_crc32c(st_crc32c(0, buf, cut), buf + cut, sizeof buf - cut) == whole;
    tap_ok(same, "CRC-32C continued over two pieces equals the CRC of the whole");
    /* the mask is a rotation plus a constant: undoing it gives the CRC back */
    uint32_t m = st_crc32c_mask(whole) - 0xa282ead8u;
    tap_ok(((m << 15) | (m >> 17)) == whole, "the TFRecord mask undoes to the CRC");
}

static void check_files(const char *tmp)
{
    char dir[4096], names[4][512];
    snprintf(dir, sizeof dir, "%s/new/logs", tmp);
    st_tb_writer *a, *b;
    int rc = st_tb_open(&a, dir, 0);
    tap_ok(rc == 0, "st_tb_open creates the missing log directory and its file");
    if (rc)
        return;
    rc = st_tb_open(&b, dir, 7);
    tap_ok(rc == 0, "a second writer in the same second opens its own file");
    int n = event_files(dir, names, 4);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char want[600];
    snprintf(want, sizeof want, ".%s.%ld", host, (long)getpid());
    long long t0 = n == 2 ? atoll(names[0] + 20) : 0, t1 = n == 2 ? atoll(names[1] + 20) : 0;
    tap_ok(n == 2 && strstr(names[0], want) && strstr(names[1], want) && t1 > t0 &&
           t0 >= (long long)time(NULL) - 60,
           "two files events.out.tfevents.TIME.HOST.PID, the second one later "
           "(%s, %s)", n > 0 ? names[0] : "-", n > 1 ? names[1] : "-");
    tap_ok(b && strcmp(st_tb_path(b) + strlen(dir) + 1, names[1]) == 0,
           "st_tb_path names the newer writer's file");
    tap_ok(st_tb_close(a) == 0 && st_tb_close(b) == 0 && st_tb_close(NULL) == 0,
           "closing succeeds (and NULL is a no-op)");

    char file[4096];
    snprintf(file, sizeof file, "%s/plain", tmp);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    tap_ok(st_tb_open(&a, file, 0) == ST_EXIT_FAILURE && a == NULL,
           "a log directory that is a file: ST_EXIT_FAILURE, no writer");
}

/* Writes past RLIMIT_FSIZE fail with EFBIG: the first failure prints the
 * one error line (the script counts them on stderr), later ones return the
 * failure quietly, and close reports it again through its status. */
static void check_write_failure(const char *tmp)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/full", tmp);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 2000;
    signal(SIGXFSZ, SIG_IGN);
    char err_path[4096];
    snprintf(err_path, sizeof err_path, "%s/stderr", tmp);
    fflush(stderr);
    int saved = dup(2);
    if (!freopen(err_path, "w", stderr))
        st_die(ST_EXIT_FAILURE, "%s: %s", err_path, strerror(errno));
    st_tb_writer *w;
    int rc = st_tb_open(&w, dir, 0);
    char file[4096];
    snprintf(file, sizeof file, "%s", rc == 0 ? st_tb_path(w) : "-");
    setrlimit(RLIMIT_FSIZE, &lim);
    int first_fail = 0, later_ok = 0;
    for (int s = 1; s <= 100 && rc == 0; s++) {
        int r = st_tb_scalar(w, "train/loss", s, 1.0 / s);
        if (r && !first_fail)
            first_fail = s;
        later_ok += first_fail && r == 0;
    }
    tap_ok(rc == 0 && first_fail > 1 && later_ok == 0,
           "a write past the file size limit fails (from step %d on) and every later one too",
           first_fail);
    tap_ok(rc == 0 && st_tb_close(w) == ST_EXIT_FAILURE, "close reports the failure");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);

    char line[8192], want[4200];
    snprintf(want, sizeof want, "shardtrain: error: %s: cannot write TensorBoard events: ", file);
    int lines = 0, named = 0;
    FILE *f = fopen(err_path, "r");
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        named += strncmp(line, want, strlen(want)) == 0 && strstr(line, strerror(EFBIG));
        tap_diag("stderr: %s", strtok(line, "\n"));
    }
    if (f)
        fclose(f);
    tap_ok(lines == 1 && named == 1,
           "one error line, naming the file and why (%d lines)", lines);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "crc") == 0)
        return print_file_crcs(argc - 2, argv + 2);
    if (argc == 3 && strcmp(argv[1], "write") == 0)
        return write_sessions(argv[2]);
    if (argc != 1)
        st_die(ST_EXIT_USAGE, "usage: test_tensorboard [crc FILE... | write DIR]");
    char tmp[1024];
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/test_tensorboard.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp))
        st_die(ST_EXIT_FAILURE, "mkdtemp: %s", strerror(errno));
    check_crc();
    check_files(tmp);
    check_write_failure(tmp);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", tmp);
    return tap_done();
}
