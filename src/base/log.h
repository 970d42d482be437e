/* Diagnostics and exit statuses shared by every layer.
 *
 * Every user-facing failure is one line on stderr in the form
 *   shardtrain: error: WHERE: what is wrong; hint
 * where WHERE is FILE:LINE for configuration problems and FILE for data
 * problems.  Library code reports and returns an error code; only the CLI
 * decides to exit, so tests can drive the library without dying. */
#ifndef ST_LOG_H
#define ST_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* Documented in shardtrain(1), EXIT STATUS. */
enum st_exit {
    ST_EXIT_OK = 0,       /* success */
    ST_EXIT_FAILURE = 1,  /* runtime failure: I/O error, out of memory */
    ST_EXIT_USAGE = 2,    /* bad input: command line, configuration, data or weight files */
    ST_EXIT_PREEMPTED = 3, /* SIGUSR1/SIGTERM: a checkpoint was written, the run can resume */
    ST_EXIT_TIMEOUT = 4,  /* a collective did not complete within parallel.timeout_s,
                           * or MPI reported it failed (watchdog.h) */
    ST_EXIT_NONFINITE = 5, /* train.nonfinite_limit non-finite steps in a row; stopped */
};

/* Rank that prints informational output; errors are printed by every rank
 * unless held (below). */
void st_log_set_rank(int rank);
int st_log_rank(void);

/* Held error lines: under several ranks the same bad input is seen by all
 * of them, and a user should read its line once.  While holding, st_error
 * and friends keep their lines instead of printing them; the runtime's
 * status agreement then has the lowest failing rank print its lines and
 * the others drop theirs (runtime.h, st_runtime_agree).  Held lines are
 * never lost: st_die, st_bug, st_fatal, st_log_unhold and the process's
 * exit print any still held.  Warnings and st_info are never held. */
void st_log_hold(void);
/* Whether any error line is held. */
int st_log_held(void);
/* Prints (print != 0) or drops the held lines; holding goes on. */
void st_log_release(int print);
/* Prints the held lines and stops holding: for a path that reports on
 * every rank at once and never reaches an agreement (the watchdog, an
 * abort). */
void st_log_unhold(void);

/* "shardtrain: error: WHERE: MESSAGE".  where may be NULL. */
void st_error(const char *where, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "shardtrain: error: FILE:LINE: MESSAGE" (line <= 0 prints FILE only). */
void st_error_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* st_error_at for wrappers that take their own arguments (st_config_error). */
void st_verror_at(const char *file, int line, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void st_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Text from a file (a tensor name, a parser's message that quotes the
 * input), safe inside a one-line message: control bytes and backslashes
 * escaped as \xNN (so an escape in the output is never ambiguous), long
 * text cut with "...".  Returns buf. */
const char *st_printable(const char *s, char *buf, size_t n);

/* vsnprintf for a message that is kept in a fixed buffer before it is
 * printed (a parser's recorded error, an argument error whose hint is
 * added after it): when the text does not fit in n bytes it is cut, at a
 * UTF-8 character boundary, and ends with "...", so that a reader knows
 * there was more; text that fits is left as it is.  st_format_append
 * formats after the text already in buf, and marks the end of the whole
 * buffer when the addition is cut.  A buffer under 4 bytes has no room
 * for the mark and is only cut.  Each returns buf. */
const char *st_vformat(char *buf, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
const char *st_format(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *st_format_append(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A size for people: "1.47 GiB", or "12.3 MiB" below one GiB. */
void st_format_bytes(char *buf, size_t n, double bytes);

/* Informational line on stdout, rank 0 only. */
void st_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print an error and exit with status.  For programs' main functions (the
 * test programs); library code reports with st_error and returns the
 * status, and the CLI exits with it. */
void st_die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* The two ways library code may end the process, both with
 * ST_EXIT_FAILURE.  Each use says why returning is not possible there.
 * st_bug: a state the code never makes ("shardtrain: error: internal:
 * MESSAGE"), e.g. a bad enum value or a free of a foreign block.
 * st_fatal: cannot continue and has no error path to return through, e.g.
 * the tracking allocator out of memory or a failed CUDA call inside a
 * kernel, both mid-step. */
void st_bug(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void st_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
