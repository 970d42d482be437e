/* Diagnostics: the single place that formats error, warning and progress
 * lines, so every message a user sees has the same shape. */
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_rank;

void st_log_set_rank(int rank) { log_rank = rank; }
int st_log_rank(void) { return log_rank; }

/* The held lines, in order, one buffer with each line's newline.  A fixed
 * size: the first lines are what explains a failure, so past the limit
 * further lines are counted and said to be left out. */
static struct {
    int on;
    char text[8192];
    size_t len;
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

/* Bytes that would break a line; with `backslash`, also the backslash, so
 * that an escape in quoted text is never ambiguous. */
static int needs_escape(unsigned char c, int backslash)
{
    return c < 0x20 || c == 0x7f || (backslash && c == '\\');
}

/* The one escaping loop: copy s into buf (n bytes), each byte needs_escape
 * picks as \xNN, while room for one more escape and the NUL is left.
 * Returns the first byte of s not copied; *len is the length written. */
static const char *escape_into(const char *s, char *buf, size_t n, int backslash,
                               size_t *len)
{
    size_t o = 0;
    for (; *s && o + 8 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (needs_escape(c, backslash))
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    *len = o;
    return s;
}

const char *st_printable(const char *s, char *buf, size_t n)
{
    size_t o;
    if (*escape_into(s, buf, n, 1, &o) && o + 4 <= n)
        memcpy(buf + o, "...", 4);
    return buf;
}

/* Marks buf[0, n), filled to its last byte by a cut vsnprintf, as cut.
 * The mark goes back over continuation bytes (at most 3: a UTF-8
 * character is 4 bytes at most) so that a character is never split. */
static void mark_cut(char *buf, size_t n)
{
    if (n < 4)
        return;
    const size_t room = n - 4;
    size_t cut = room;
    while (cut > 0 && room - cut < 3 && ((unsigned char)buf[cut] & 0xC0) == 0x80)
        cut--;
    memcpy(buf + cut, "...", 4);
}

static const char *vformat_at(char *buf, size_t n, size_t at, const char *fmt, va_list ap)
{
    if (!n)
        return buf;
    int len = vsnprintf(buf + at, n - at, fmt, ap);
    if (len < 0)   /* an encoding error: the text is dropped, not guessed */
        buf[at] = '\0';
    else if ((size_t)len >= n - at)
        mark_cut(buf, n);
    return buf;
}

const char *st_vformat(char *buf, size_t n, const char *fmt, va_list ap)
{
    return vformat_at(buf, n, 0, fmt, ap);
}

const char *st_format(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat_at(buf, n, 0, fmt, ap);
    va_end(ap);
    return buf;
}

const char *st_format_append(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat_at(buf, n, n ? strnlen(buf, n - 1) : 0, fmt, ap);
    va_end(ap);
    return buf;
}

/* An error or warning is one line whatever it quotes: a control byte that
 * slipped through unescaped (a newline inside a parser's message about a
 * hostile file) is written as \xNN rather than breaking the line. */
static void escape_controls(char **line)
{
    size_t len = 0, extra = 0;
    for (const unsigned char *p = (const unsigned char *)*line; *p; p++, len++)
        extra += needs_escape(*p, 0) ? 3 : 0;
    if (!extra)
        return;
    size_t n = len + extra + 9;   /* escape_into's margin: it copies all */
    char *out = malloc(n);
    if (!out) {   /* no memory: a blank is still one line */
        for (char *p = *line; *p; p++)
            if (needs_escape((unsigned char)*p, 0))
                *p = ' ';
        return;
    }
    escape_into(*line, out, n, 0, &len);
    free(*line);
    *line = out;
}

static void vreport(const char *kind, const char *file, int line,
                    const char *fmt, va_list ap)
{
    /* Built whole, however long (a path can be thousands of bytes and the
     * hint comes last, so a fixed buffer would cut exactly the hint), then
     * written with one call so that lines from several ranks sharing a
     * terminal do not interleave mid-line. */
    char *msg = NULL, *buf = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    const char *m = msg ? msg : "(out of memory formatting this message)";
    int n;
    if (file && line > 0)
        n = asprintf(&buf, "shardtrain: %s: %s:%d: %s", kind, file, line, m);
    else if (file)
        n = asprintf(&buf, "shardtrain: %s: %s: %s", kind, file, m);
    else
        n = asprintf(&buf, "shardtrain: %s: %s", kind, m);
    free(msg);
    if (n < 0) {
        fprintf(stderr, "shardtrain: %s: (out of memory formatting a message)\n", kind);
        return;
    }
    escape_controls(&buf);
    n = (int)strlen(buf);
    if (held.on && !strcmp(kind, "error")) {
        size_t len = (size_t)n;
        if (held.len + len + 1 < sizeof held.text) {
            memcpy(held.text + held.len, buf, len);
            held.text[held.len + len] = '\n';
            held.len += len + 1;
        } else {
            held.dropped++;
        }
        free(buf);
        return;
    }
    fprintf(stderr, "%s\n", buf);
    free(buf);
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

void st_format_bytes(char *buf, size_t n, double bytes)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if (bytes >= gib)
        snprintf(buf, n, "%.2f GiB", bytes / gib);
    else
        snprintf(buf, n, "%.1f MiB", bytes / (1024.0 * 1024.0));
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
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st_die(ST_EXIT_FAILURE, "internal: %s", msg);
}

void st_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdie(ST_EXIT_FAILURE, fmt, ap);
}
