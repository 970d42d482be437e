/* A vectorisable single-precision exp for the CPU backend's elementwise
 * loops (softmax, cross-entropy, GELU, SiLU).  libm's expf is one call per
 * element, and its vector variants are only used under -ffast-math, which
 * this project does not build with; the loss's double exp cost more than
 * a fifth of a small model's step (docs/benchmarks.md).  Written as plain
 * arithmetic on floats and ints, so that a loop under `omp simd` compiles
 * to vector instructions and gives the same bits on every run.
 *
 * Method (Cephes' expf, a standard fact): x = n ln2 + r with n an integer
 * and |r| <= ln2/2, e^r by a degree-7 polynomial, and 2^n put straight into
 * the exponent bits.  Relative error within 2 ulp of libm's expf over the
 * range (tests/test_units.c measures it).  Inputs below -87.3 give 0, so
 * exp(-inf) = 0 as the masked scores need; inputs above 88 give e^88
 * (finite: the callers pass x <= 0, or use it in 1 / (1 + e^x)). */
#ifndef ST_CPU_MATH_H
#define ST_CPU_MATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float st_expf(float x)
{
    const float lo = -87.33654f, hi = 88.0f;
    /* These selects vectorise only because the project builds with
     * -fno-trapping-math (Makefile.am says why). */
    const int below = x < lo, above = x > hi;
    float xc = below ? lo : x;
    xc = above ? hi : xc;
    /* n = round(x / ln2) by adding and removing 1.5 * 2^23 (round to
     * nearest even in the float adder; no rounding instructions needed). */
    const float shift = 12582912.0f;
    const float t = xc * 1.44269504088896341f + shift;
    const float n = t - shift;
    /* ln2 split in two so that n * ln2_hi is exact. */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t e = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    const float y = p * scale;
    return below ? 0.0f : y;
}

#endif
