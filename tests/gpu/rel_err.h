/* The error measure every GPU test reports against the CPU reference:
 * max |got - ref| / max |ref| over n elements, so one tolerance fits
 * outputs of any scale.  A NaN, or infinities that differ, count as an
 * infinite error: a kernel that produces them must never pass. */
#ifndef ST_TESTS_GPU_REL_ERR_H
#define ST_TESTS_GPU_REL_ERR_H

#include <math.h>
#include <stddef.h>

static inline double rel_err(const float *got, const float *ref, size_t n)
{
    double maxref = 0.0, maxdiff = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) {
            if (isnan(got[i]) || isnan(ref[i]) || got[i] != ref[i])
                return INFINITY;
            continue;
        }
        maxref = fmax(maxref, fabs((double)ref[i]));
        maxdiff = fmax(maxdiff, fabs((double)got[i] - (double)ref[i]));
    }
    return maxref > 0.0 ? maxdiff / maxref : maxdiff;
}

#endif
