/* The learning-rate schedules (see lr_schedule.h): warmup, then cosine,
 * linear, constant or warmup-stable-decay. */
#include "engine/lr_schedule.h"

#include <math.h>

double st_lr_at(const st_config *cfg, int64_t step)
{
    const st_optim_config *o = &cfg->optim;
    const int64_t total = cfg->train.steps, warm = o->warmup_steps;
    if (step < warm)
        return o->lr * (double)(step + 1) / (double)warm;
    if (total <= warm)
        return o->lr;
    double progress = (double)(step - warm) / (double)(total - warm);
    switch (o->schedule) {
    case ST_SCHED_CONSTANT:
        return o->lr;
    case ST_SCHED_LINEAR:
        return o->lr - (o->lr - o->min_lr) * progress;
    case ST_SCHED_WSD: {
        /* warmup, stable at lr, then a linear decay over the last
         * decay_frac of all steps down to min_lr. */
        double decay_steps = o->decay_frac * (double)total;
        double start = (double)total - decay_steps;
        if ((double)step < start || decay_steps <= 0.0)
            return o->lr;
        double f = ((double)step - start) / decay_steps;
        return o->lr - (o->lr - o->min_lr) * f;
    }
    case ST_SCHED_COSINE:
    default:
        return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * progress));
    }
}
