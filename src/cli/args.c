/* The command-line parser (see args.h).  strtoll/strtod accept leading
 * blanks and stop at the first bad character; a value is valid only when
 * the whole string was consumed and it lies in range, so "2x" and "" are
 * errors rather than 2 and 0.  An option takes the next argument as its
 * value whatever it looks like, so `--prompt -s` prompts with "-s". */
#include "cli/args.h"
#include "base/log.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int st_arg_verror(int argno, const char *fmt, va_list ap)
{
    /* The message (an argument it quotes can be any length) is cut at 512
     * bytes, before the hint rather than through it; st_vformat marks
     * the cut so that the quoted argument is not read as whole. */
    char msg[512];
    st_vformat(msg, sizeof msg, fmt, ap);
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

static int whole_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int whole_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE with a finite result is underflow: "1e-320" is a number in
     * range, held as the nearest double (subnormal, or 0 below that), as
     * every reader of decimals does.  Overflow gives an infinity. */
    if ((errno && !(errno == ERANGE && isfinite(v))) || end == s || *end ||
        !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int is_one_of(const char *const *choices, const char *s)
{
    for (; *choices; choices++)
        if (!strcmp(*choices, s))
            return 1;
    return 0;
}

/* Check value s (argument `at`) of option o and store it in dest. */
static int store_value(const st_arg_option *o, const char *s, int at, void *dest)
{
    char *field = (char *)dest + o->offset;
    long long i;
    double x;
    switch (o->kind) {
    case ST_ARG_FLAG:
        *(int *)field = 1;
        return 0;
    case ST_ARG_STRING:
        if (o->choices && !is_one_of(o->choices, s))
            return st_arg_error(at, o->bad, s);
        /* "" would name the current directory to some calls and nothing
         * to others: never a file the user meant. */
        if (o->path && !*s)
            return st_arg_error(at, "%s '' is an empty path", o->name);
        *(const char **)field = s;
        return 0;
    case ST_ARG_INT:
        if (whole_int(s, o->min, o->max, &i))
            return st_arg_error(at, o->bad, s);
        *(int64_t *)field = i;
        return 0;
    case ST_ARG_NUMBER:
        if (whole_double(s, o->lo, o->hi, &x) || (o->hi_open && x >= o->hi))
            return st_arg_error(at, o->bad, s);
        if (o->not_whole && x != floor(x))
            return st_arg_error(at, o->not_whole, s);
        *(double *)field = x;
        return 0;
    }
    return 0;
}

static int find_option(const st_args_spec *spec, const char *name)
{
    for (int k = 0; k < spec->n_options; k++)
        if (!strcmp(spec->options[k].name, name))
            return k;
    return -1;
}

/* -s/--set at argv[*i]: its SECTION.KEY=VALUE is the next argument. */
static int take_override(int argc, char **argv, int *i, st_args *a)
{
    const char *arg = argv[*i];
    if (*i + 1 >= argc)
        return st_arg_error(*i, "%s needs SECTION.KEY=VALUE", arg);
    if (a->n_overrides == ST_MAX_OVERRIDES)
        return st_arg_error(*i, "more than 256 overrides");
    a->overrides[a->n_overrides].text = argv[*i + 1];
    a->overrides[a->n_overrides].argno = *i + 1;
    a->n_overrides++;
    (*i)++;
    return 0;
}

/* The option at argv[*i], and its value when it takes one. */
static int take_option(const st_args_spec *spec, int argc, char **argv, int *i, void *dest,
                       st_args *a)
{
    const char *arg = argv[*i];
    int k = find_option(spec, arg);
    if (k < 0)
        return st_arg_error(*i, "unknown option '%s'", arg);
    const st_arg_option *o = &spec->options[k];
    if (o->kind == ST_ARG_FLAG) {
        a->value_at[k] = *i;
        return store_value(o, arg, *i, dest);
    }
    if (*i + 1 >= argc)
        return st_arg_error(*i, "%s needs a value", arg);
    a->value_at[k] = ++*i;
    return o->check == ST_ARG_CHECK_WHEN_READ ? store_value(o, argv[*i], *i, dest) : 0;
}

int st_args_parse(const st_args_spec *spec, int argc, char **argv, void *dest, st_args *a)
{
    assert(spec->n_options <= ST_ARGS_MAX_OPTIONS);
    memset(a, 0, sizeof *a);
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (spec->overrides && (!strcmp(arg, "-s") || !strcmp(arg, "--set")))
            rc = take_override(argc, argv, &i, a);
        else if (arg[0] == '-' && arg[1] != '\0') /* a lone "-" is a path */
            rc = take_option(spec, argc, argv, &i, dest, a);
        else if (a->n_positional == spec->n_positionals && !spec->last_repeats)
            rc = st_arg_error(i, "unexpected argument '%s'", arg);
        else if (a->n_positional == ST_ARGS_MAX_REPEATS)
            rc = st_arg_error(i, "more than %d %s arguments", ST_ARGS_MAX_REPEATS,
                              spec->positionals[spec->n_positionals - 1]);
        else if (!*arg) {
            int k = a->n_positional < spec->n_positionals ? a->n_positional
                                                           : spec->n_positionals - 1;
            rc = st_arg_error(i, "%s '' is an empty path", spec->positionals[k]);
        } else {
            a->positional[a->n_positional++] = arg;
            rc = 0;
        }
        if (rc)
            return rc;
    }
    int rc = st_args_missing(spec, a, spec->n_required, argc);
    for (int k = 0; k < spec->n_options && !rc; k++) {
        const st_arg_option *o = &spec->options[k];
        int at = a->value_at[k];
        if (at && o->check == ST_ARG_CHECK_AT_END)
            rc = store_value(o, argv[at], at, dest);
    }
    return rc;
}

int st_args_missing(const st_args_spec *spec, const st_args *a, int n, int position)
{
    if (a->n_positional >= n)
        return 0;
    return st_arg_error(position, "missing %s",
                        spec->n_positionals == 1 ? spec->positionals[0] : "arguments");
}

int st_args_value_at(const st_args_spec *spec, const st_args *a, const char *name)
{
    int k = find_option(spec, name);
    return k < 0 ? 0 : a->value_at[k];
}
