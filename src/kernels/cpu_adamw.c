/* AdamW on the CPU backend (see cpu_adamw.h): the numerical reference.
 * cuda/adamw.cu's per-slice fp64 kernel matches it bit for bit; the
 * per-unit fp32 kernel the CUDA backend runs stays within the bound stated
 * there (tests/gpu/test_cuda_adamw.cu). */
#include "kernels/cpu_adamw.h"

#include <math.h>

void st_adamw(float *p, const float *g, float *m, float *v, int64_t n,
              double lr, double beta1, double beta2, double eps,
              double weight_decay, double grad_scale, int64_t t)
{
    const double c1 = 1.0 - pow(beta1, (double)t);
    const double c2 = 1.0 - pow(beta2, (double)t);
    const float b1 = (float)beta1, b2 = (float)beta2;
    /* simd: each lane does the same IEEE operations as the scalar loop
     * (no contraction under -std=c11), so the bits are unchanged. */
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float gi = (float)(g[i] * grad_scale);
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        double mhat = m[i] / c1, vhat = v[i] / c2;
        p[i] = (float)(p[i] - lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p[i]));
    }
}
