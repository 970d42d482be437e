/* What the GPU test programs share: stopping on a CUDA error with TAP's
 * "Bail out!" (a failed runtime call leaves nothing trustworthy to check),
 * and the error measure every check reports against the CPU reference:
 * max |got - ref| / max |ref| over n elements, so one tolerance fits
 * outputs of any scale.  A NaN, or infinities that differ, count as an
 * infinite error: a kernel that produces them must never pass. */
#ifndef ST_TESTS_GPU_CHECK_H
#define ST_TESTS_GPU_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

static inline void bail(const char *what, cudaError_t e)
{
    printf("Bail out! %s: %s\n", what, cudaGetErrorString(e));
    fflush(stdout);
    exit(1);
}

/* Deterministic uniform(-1, 1) source (xorshift64), so a failure
 * reproduces; a program may reseed gpu_rng_state first. */
static uint64_t gpu_rng_state = 0x9e3779b97f4a7c15ull;
static inline float uniform_pm1(void)
{
    gpu_rng_state ^= gpu_rng_state << 13;
    gpu_rng_state ^= gpu_rng_state >> 7;
    gpu_rng_state ^= gpu_rng_state << 17;
    return (float)((gpu_rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* CK(call): the runtime call, or bail naming it. */
#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            bail(#call, e_);                                                               \
    } while (0)

/* The tolerances of rel_err for a result against its CPU op: fp32
 * storage, and bf16 storage (the output's rounding, 2^-9 relative, plus
 * fp32 noise); test_cuda_ops.cu says why. */
static const double kTolF32 = 1e-4, kTolBf16 = 2e-2;

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
