/* Command-line helpers shared by the subcommands' parsers (cli.c,
 * estimate_cli.c, bench_comm.c), so that every subcommand reports a bad
 * argument the same way: one `shardtrain: error: command line:N:` line,
 * where N is the argument's position on the shardtrain command line, and
 * exit status 2. */
#ifndef ST_ARGS_H
#define ST_ARGS_H

#include "config/config.h"

#include <stdarg.h>

#define ST_MAX_OVERRIDES 256

/* Print the error for argument argno and return ST_EXIT_USAGE
 * (st_arg_verror: for wrappers with their own arguments). */
int st_arg_error(int argno, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int st_arg_verror(int argno, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Whole-string integer / number in [lo, hi]: 0, or -1 when not. */
int st_arg_int(const char *s, long long lo, long long hi, long long *out);
int st_arg_double(const char *s, double lo, double hi, double *out);

/* If argv[*i] is -s or --set, store its SECTION.KEY=VALUE in ov[*n_ov]
 * (at most ST_MAX_OVERRIDES) and step *i over it.  offset turns an index
 * of argv into a command-line position (subcommands that receive argv + 1
 * pass 1).  Returns -1 when argv[*i] is not an override, 0 when taken,
 * ST_EXIT_USAGE (after printing) when its value is missing or there are
 * too many. */
int st_arg_override(int argc, char **argv, int *i, int offset, st_override *ov, int *n_ov);

#endif
