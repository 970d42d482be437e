/* Diagnostics: the single place that formats error, warning and progress
 * lines, so every message a user sees has the same shape. */
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>

static int log_rank;

void st_log_set_rank(int rank) { log_rank = rank; }
int st_log_rank(void) { return log_rank; }

static void vreport(const char *kind, const char *file, int line,
                    const char *fmt, va_list ap)
{
    /* Build the line first and write it with one call so that lines from
     * several ranks sharing a terminal do not interleave mid-line. */
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "shardtrain: %s: ", kind);
    if (file && line > 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s:%d: ", file, line);
    else if (file)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s: ", file);
    if (n < (int)sizeof buf)
        vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", buf);
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
