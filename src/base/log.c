/* Diagnostics: the single place that formats error, warning and progress
 * lines, so every message a user sees has the same shape. */
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_rank;

void st_log_set_rank(int rank) { log_rank = rank; }
int st_log_rank(void) { return log_rank; }

/* The held lines, in order, one growing buffer with each line's newline.
 * Bounded: the first lines are what explains a failure, so past the limit
 * further lines are counted and said to be left out.  The first line is
 * always kept whole, whatever its length. */
enum { HELD_MAX = 64 * 1024 };
static struct {
    int on;
    char *text;
    size_t len, cap;
    int dropped;
} held;

void st_log_release(int print)
{
    if (print && held.len) {
        fwrite(held.text, 1, held.len, stderr);
        if (held.dropped)
            fprintf(stderr, "shardtrain: error: %d further error line(s) left out\n",
                    held.dropped);
        fflush(stderr);
    }
    held.len = 0;
    held.dropped = 0;
}

static void print_held_at_exit(void) { st_log_release(1); }

void st_log_hold(void)
{
    static int registered;
    if (!registered && atexit(print_held_at_exit) == 0)
        registered = 1;
    held.on = registered; /* without the exit hook a held line could be lost */
}

int st_log_held(void) { return held.len > 0 || held.dropped > 0; }

void st_log_unhold(void)
{
    st_log_release(1);
    held.on = 0;
}

static void hold_line(const char *line, size_t len)
{
    if (held.len && held.len + len + 1 > HELD_MAX) {
        held.dropped++;
        return;
    }
    if (held.len + len + 1 > held.cap) {
        size_t cap = (held.len + len + 1) * 2;
        char *t = realloc(held.text, cap);
        if (!t) {
            held.dropped++;
            return;
        }
        held.text = t;
        held.cap = cap;
    }
    memcpy(held.text + held.len, line, len);
    held.text[held.len + len] = '\n';
    held.len += len + 1;
}

static void vreport(const char *kind, const char *file, int line,
                    const char *fmt, va_list ap)
{
    /* Build the line first and write it with one call so that lines from
     * several ranks sharing a terminal do not interleave mid-line.  Sized
     * to the message, never cut: a long path in it must not cost the
     * hint at its end. */
    char head[64], *where = NULL;
    snprintf(head, sizeof head, "shardtrain: %s: ", kind);
    if (file && line > 0 && asprintf(&where, "%s:%d: ", file, line) < 0)
        where = NULL;
    else if (file && line <= 0 && asprintf(&where, "%s: ", file) < 0)
        where = NULL;
    char *body = NULL;
    if (vasprintf(&body, fmt, ap) < 0)
        body = NULL;
    const char *w = where ? where : file ? "(out of memory) " : "";
    const char *b = body ? body : "(out of memory formatting this message)";
    size_t hl = strlen(head), wl = strlen(w), bl = strlen(b);
    char *buf = malloc(hl + wl + bl + 2);
    if (!buf) {
        fprintf(stderr, "%s%s%s\n", head, w, b);
    } else {
        memcpy(buf, head, hl);
        memcpy(buf + hl, w, wl);
        memcpy(buf + hl + wl, b, bl);
        if (held.on && !strcmp(kind, "error")) {
            hold_line(buf, hl + wl + bl);
        } else {
            buf[hl + wl + bl] = '\n';
            fwrite(buf, 1, hl + wl + bl + 1, stderr);
        }
        free(buf);
    }
    free(where);
    free(body);
}

void st_error(const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("error", where, 0, fmt, ap);
    va_end(ap);
}

void st_error_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("error", file, line, fmt, ap);
    va_end(ap);
}

void st_verror_at(const char *file, int line, const char *fmt, va_list ap)
{
    vreport("error", file, line, fmt, ap);
}

void st_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport("warning", NULL, 0, fmt, ap);
    va_end(ap);
}

void st_info(const char *fmt, ...)
{
    if (log_rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void vdie(int status, const char *fmt, va_list ap)
    __attribute__((noreturn));
static void vdie(int status, const char *fmt, va_list ap)
{
    /* Dying alone: nothing will agree on who prints. */
    st_log_unhold();
    vreport("error", NULL, 0, fmt, ap);
    exit(status);
}

void st_die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(status, fmt, ap);
}

void st_bug(const char *fmt, ...)
{
    /* The prefix is added here so that no caller can forget it. */
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    st_die(ST_EXIT_FAILURE, "internal: %s", msg ? msg : fmt);
}

void st_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(ST_EXIT_FAILURE, fmt, ap);
}
