/* Command-line helpers (see args.h).  strtoll/strtod accept leading
 * blanks and stop at the first bad character; a value is valid only when
 * the whole string was consumed and it lies in range, so "2x" and "" are
 * errors rather than 2 and 0. */
#include "cli/args.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_arg_verror(int argno, const char *fmt, va_list ap)
{
    /* The message is cut at 512 bytes so the hint always shows. */
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    st_error_at("command line", argno, "%s; hint: see shardtrain --help", msg);
    return ST_EXIT_USAGE;
}

int st_arg_error(int argno, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = st_arg_verror(argno, fmt, ap);
    va_end(ap);
    return rc;
}

int st_arg_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int st_arg_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

int st_arg_override(int argc, char **argv, int *i, int offset, st_override *ov, int *n_ov)
{
    const char *arg = argv[*i];
    if (strcmp(arg, "-s") && strcmp(arg, "--set"))
        return -1;
    if (*i + 1 >= argc)
        return st_arg_error(*i + offset, "%s needs SECTION.KEY=VALUE", arg);
    if (*n_ov == ST_MAX_OVERRIDES)
        return st_arg_error(*i + offset, "more than 256 overrides");
    ov[*n_ov].text = argv[*i + 1];
    ov[*n_ov].argno = *i + 1 + offset;
    (*n_ov)++;
    (*i)++;
    return 0;
}
