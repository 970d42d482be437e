/* The one command-line parser of every subcommand.  A command describes
 * its arguments in a static table - its options (name, kind, where the
 * value goes, the range it must lie in, the message when it does not), its
 * positionals and whether it takes -s overrides - and st_args_parse reads
 * argv against it.  Every bad argument is reported the same way: one
 * `shardtrain: error: command line:N: ...; hint` line, where N is the
 * argument's index in the whole command line ("shardtrain" is 0, the
 * subcommand 1), and exit status 2. */
#ifndef ST_ARGS_H
#define ST_ARGS_H

#include <stdarg.h>
#include <stddef.h>

#include "config/config.h"

#define ST_MAX_OVERRIDES 256
#define ST_ARGS_MAX_OPTIONS 16
#define ST_ARGS_MAX_POSITIONALS 2
#define ST_ARGS_MAX_REPEATS 64   /* values of a repeated last positional */

typedef enum {
    ST_ARG_FLAG,    /* no value; sets an int to 1 */
    ST_ARG_STRING,  /* a const char *, one of `choices` when those are given */
    ST_ARG_INT,     /* an int64_t in [min, max] */
    ST_ARG_NUMBER,  /* a double in [lo, hi], or [lo, hi) with hi_open */
} st_arg_kind;

/* When a value is checked and stored.  The commands differ here, and each
 * keeps the order in which it has always reported errors. */
typedef enum {
    ST_ARG_CHECK_WHEN_READ, /* every occurrence, in command-line order */
    ST_ARG_CHECK_AT_END,    /* only the last occurrence, after every argument
                             * has been read and the positionals counted */
} st_arg_check;

typedef struct {
    const char *name;           /* "--tokens" */
    st_arg_kind kind;
    size_t offset;              /* of the destination in the command's struct */
    st_arg_check check;
    long long min, max;         /* ST_ARG_INT */
    double lo, hi;              /* ST_ARG_NUMBER */
    int hi_open;                /* ST_ARG_NUMBER: hi itself is refused */
    const char *const *choices; /* ST_ARG_STRING: NULL-terminated, NULL = any */
    int path;                   /* ST_ARG_STRING: names a file or directory, so
                                 * the empty string is refused */
    const char *bad;            /* a bad value: a format with one %s, the value */
    const char *not_whole;      /* ST_ARG_NUMBER: non-NULL demands a whole number
                                 * and is the message for a fraction */
} st_arg_option;

/* In an st_args_spec initialiser: the options of a static table. */
#define ST_ARGS_OPTIONS(table) \
    .options = (table), .n_options = (int)(sizeof(table) / sizeof((table)[0]))

typedef struct {
    int overrides;              /* takes -s/--set SECTION.KEY=VALUE */
    const st_arg_option *options;
    int n_options;              /* at most ST_ARGS_MAX_OPTIONS */
    /* Names, as in the usage.  Every command's positionals are paths
     * (CONFIG, CHECKPOINT, OUT_DIR, ...), so an empty one is refused. */
    const char *positionals[ST_ARGS_MAX_POSITIONALS];
    int n_positionals;          /* at most this many */
    int last_repeats;           /* the last positional may come up to
                                 * ST_ARGS_MAX_REPEATS times (LOG_DIR...) */
    int n_required;             /* st_args_parse refuses fewer (see st_args_missing) */
} st_args_spec;

typedef struct {
    st_override overrides[ST_MAX_OVERRIDES];
    int n_overrides;
    const char *positional[ST_ARGS_MAX_REPEATS];
    int n_positional;
    int value_at[ST_ARGS_MAX_OPTIONS]; /* index of each option's last value; 0: not given */
} st_args;

/* Read argv[2..argc) (argv[1] is the subcommand) against spec: options
 * store their values in dest at their offsets (dest holds the defaults
 * beforehand), overrides and positionals go to *a.  Then, when fewer than
 * spec->n_required positionals came, st_args_missing; then the options
 * checked at the end, in table order.  Returns 0, or ST_EXIT_USAGE after
 * printing the first error. */
int st_args_parse(const st_args_spec *spec, int argc, char **argv, void *dest, st_args *a);

/* "missing CONFIG" (the name of a single positional) or "missing
 * arguments" at `position` when fewer than n positionals came; 0 when they
 * all did.  For the commands that report it later than st_args_parse
 * would, or at another position. */
int st_args_missing(const st_args_spec *spec, const st_args *a, int n, int position);

/* Where option `name` last got its value (0 when it was not given). */
int st_args_value_at(const st_args_spec *spec, const st_args *a, const char *name);

/* Print the error for argument argno and return ST_EXIT_USAGE
 * (st_arg_verror: for wrappers with their own arguments). */
int st_arg_error(int argno, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int st_arg_verror(int argno, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
