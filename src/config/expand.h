/* ${VAR} and ${VAR:-default} in configuration values and -s overrides,
 * from the environment.  Its own file because it is its own small
 * language: names, defaults, and the errors that say which part is wrong. */
#ifndef ST_EXPAND_H
#define ST_EXPAND_H

#include <stddef.h>

/* A malloc'd copy of in with every ${VAR} and ${VAR:-default} replaced, or
 * NULL with the reason (no FILE:LINE; the caller adds it) in err[errn],
 * ending in "..." where it was cut to fit (a bad ${...} is quoted whole). */
char *st_config_expand_env(const char *in, char *err, size_t errn);

#endif
