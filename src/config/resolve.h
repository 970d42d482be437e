/* The second half of loading the configuration (resolve.c), after
 * config_load.c has read the file and the overrides and given every key
 * left unset its schema default. */
#ifndef ST_CONFIG_RESOLVE_H
#define ST_CONFIG_RESOLVE_H

#include "config/config.h"

/* The preset, model.init's config.json and the derived defaults, each
 * filling only what the file and command line left alone.  0, or an exit
 * status after one error line. */
int st_config_resolve(st_config *cfg);

/* The checks across keys, then st_config_check_sizes.  0, or
 * ST_EXIT_USAGE after one error line naming the key to edit. */
int st_config_validate(const st_config *cfg);

#endif
