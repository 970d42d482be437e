/* Where each configuration value came from, told to people: errors about
 * a key point at the file line or command-line argument that set it, and
 * `shardtrain check` lists every value with its origin.  st_config_load
 * records the origins (config_load.c). */
#ifndef ST_CONFIG_ORIGIN_H
#define ST_CONFIG_ORIGIN_H

#include "config/config.h"

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `shardtrain check`: print every key with its resolved value and where it
 * came from (default, preset, FILE:LINE, command line). */
void st_config_print(const st_config *cfg, FILE *out);

/* Where a key's value was set, for errors found after loading (for example
 * global_batch not divisible by micro_batch x ranks once the world size is
 * known): *file is the configuration file or "command line" (never NULL),
 * *line the file line or the override's position (0 for a default or a
 * preset: the message then names the file alone). */
void st_config_origin_of(const st_config *cfg, const char *section,
                         const char *key, const char **file, int *line);

/* The one way to report a problem with a key's value: prints
 * `shardtrain: error: WHERE: MESSAGE` with WHERE from st_config_origin_of
 * and returns ST_EXIT_USAGE, the status of every configuration error.
 * st_config_verror is the same for wrappers with their own arguments. */
int st_config_error(const st_config *cfg, const char *section, const char *key,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int st_config_verror(const st_config *cfg, const char *section, const char *key,
                     const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/* s[0, len) for quoting in a message: at most ST_QUOTE_MAX bytes, with
 * "..." after a cut so that a cut value is not read as the whole one
 * (the values config_load.c and resolve.c
 * refuse).  Returns buf. */
enum { ST_QUOTE_MAX = 64, ST_QUOTE_BUF = ST_QUOTE_MAX + 4 };
const char *st_config_quote(const char *s, size_t len, char buf[ST_QUOTE_BUF]);

#ifdef __cplusplus
}
#endif

#endif
