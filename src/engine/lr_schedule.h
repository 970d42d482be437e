/* The learning-rate schedules.  The optimizer's update itself is a kernel
 * (kernels.h's adamw), so that it runs where the shard lives. */
#ifndef ST_LR_SCHEDULE_H
#define ST_LR_SCHEDULE_H

#include <stdint.h>

#include "config/config.h"

/* Learning rate for step (0-based) of cfg->train.steps. */
double st_lr_at(const st_config *cfg, int64_t step);

#endif
