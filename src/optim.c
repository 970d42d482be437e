/* AdamW and learning-rate schedules (see optim.h). */
#include "optim.h"

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

void st_adamw(float *p, const float *g, float *m, float *v, int64_t n,
              double lr, double beta1, double beta2, double eps,
              double weight_decay, double grad_scale, int64_t t)
{
    const double c1 = 1.0 - pow(beta1, (double)t);
    const double c2 = 1.0 - pow(beta2, (double)t);
    const float b1 = (float)beta1, b2 = (float)beta2;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float gi = (float)(g[i] * grad_scale);
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        double mhat = m[i] / c1, vhat = v[i] / c2;
        p[i] = (float)(p[i] - lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p[i]));
    }
}
