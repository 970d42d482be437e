/* Bounds on products of configuration keys.  Each integer key has its own
 * range in the schema, but a size is a product of several (parameters,
 * activations, tokens of a run), and a product of in-range keys can still
 * overflow the 64-bit arithmetic that sizes allocations and counts tokens.
 * These checks run with the other cross-key checks, so `shardtrain check`
 * refuses what `train` could not run (issue 17). */
#ifndef ST_LIMITS_H
#define ST_LIMITS_H

#include "config/config.h"

/* The largest value any product below may reach: far past any machine's
 * memory in bytes, and still 8x short of int64's end, so a few further
 * additions or a factor of sizeof(float) cannot overflow. */
#define ST_SIZE_LIMIT ((int64_t)1 << 59)

/* The longest path a path key may hold, in bytes: the buffers that append
 * a file name to a directory (4096 and more) keep room for the name. */
#define ST_PATH_LIMIT 3072

/* 0, or ST_EXIT_USAGE after one error line naming the key whose product is
 * too large, or whose path is too long or empty where a directory is
 * needed. */
int st_config_check_sizes(const st_config *cfg);

#endif
