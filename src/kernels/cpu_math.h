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
 * exp(-inf) = 0 as the masked scores need.
 *
 * Total over all floats, because a diverging run feeds it NaN and huge
 * values and must reach the non-finite step handling (skip, exit 5), not
 * undefined behaviour: NaN gives NaN, and inputs above ln(FLT_MAX) give
 * +inf (the callers use it in 1 / (1 + e^x), which then goes to 0).  The
 * input is clamped before the float-to-int conversion (a NaN or out-of-
 * range conversion is undefined in C) and the exponent bits are built in
 * unsigned arithmetic (a left shift of a negative int is undefined). */
#ifndef ST_CPU_MATH_H
#define ST_CPU_MATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float st_expf(float x)
{
    /* hi keeps n = round(x / ln2) <= 128: 2^128 is built as 2^127 * 2 below,
     * and e^89 overflows to +inf in that product. */
    const float lo = -87.33654f, hi = 89.0f;
    /* These selects vectorise only because the project builds with
     * -fno-trapping-math (Makefile.am says why). */
    const int below = x < lo, is_nan = x != x;
    float xc = below ? lo : x;
    xc = x > hi ? hi : xc;
    xc = is_nan ? 0.0f : xc;
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
    /* n is in [-126, 128] here.  Biased exponent 255 is not a power of two,
     * so n = 128 takes 2^127 and a second factor of 2; for n <= 127 that
     * factor is 1 and the product is the same bits as p * 2^n. */
    const int over = n > 127.0f;
    const float nc = over ? 127.0f : n;
    const uint32_t e = (uint32_t)((int32_t)nc + 127) << 23;
    float scale;
    memcpy(&scale, &e, sizeof scale);
    const float y = p * scale * (over ? 2.0f : 1.0f);
    return is_nan ? x : below ? 0.0f : y;
}

#endif
