/* AdamW and the learning-rate schedules.  The update works on any
 * contiguous slice of parameters, so the sharded engine can apply it to the
 * slice a rank owns. */
#ifndef ST_OPTIM_H
#define ST_OPTIM_H

#include <stdint.h>

#include "config.h"

/* Learning rate for step (0-based) of cfg->train.steps. */
double st_lr_at(const st_config *cfg, int64_t step);

/* One AdamW step over n elements with bias correction for step t (1-based).
 * grad_scale multiplies the gradient first (clipping); weight_decay is
 * decoupled, lr * wd * p, and is passed as 0 for tensors that do not decay. */
void st_adamw(float *p, const float *g, float *m, float *v, int64_t n,
              double lr, double beta1, double beta2, double eps,
              double weight_decay, double grad_scale, int64_t t);

#endif
