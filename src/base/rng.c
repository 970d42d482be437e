/* Counter-based random numbers: see rng.h for why they are stateless. */
#include "base/rng.h"

#include <math.h>

/* The hash and the uniform are rng.h's inline bodies (shared with the
 * CUDA kernels). */
uint64_t st_hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return st_hash3_inline(a, b, c);
}

double st_uniform3(uint64_t a, uint64_t b, uint64_t c)
{
    return st_uniform3_inline(a, b, c);
}

double st_normal3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = st_hash3(a, b, c);
    /* u1 in (0, 1] so log() is finite. */
    double u1 = ((double)(h >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(st_mix64(h) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t st_below3(uint64_t n, uint64_t a, uint64_t b, uint64_t c)
{
    /* Rejection keeps the result unbiased; the loop almost never repeats. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t h = st_hash3(a, b, c);
    while (h >= limit)
        h = st_mix64(h);
    return h % n;
}
