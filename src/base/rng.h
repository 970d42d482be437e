/* Counter-based randomness.  Every random number shardtrain draws is a pure
 * function of (seed, stream, index): parameter initialisation of element i
 * of tensor t, the window chosen for sample j of step k.  That makes results
 * independent of how work is split across ranks and micro-batches, which
 * the sharded engine and resumable checkpoints rely on. */
#ifndef ST_RNG_H
#define ST_RNG_H

#include <stdint.h>

/* The hash and the uniform draw are also inline below, for device code:
 * nvcc compiles them for the GPU (cuda/model_common.cu's LoRA dropout mask)
 * from this same text, so both sides draw bit-identical numbers; rng.c's
 * exported functions are these inline bodies. */
#if defined(__CUDACC__)
#define ST_RNG_HD __host__ __device__
#else
#define ST_RNG_HD
#endif

/* splitmix64's finaliser: a bijective avalanche mix. */
static inline ST_RNG_HD uint64_t st_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline ST_RNG_HD uint64_t st_hash3_inline(uint64_t a, uint64_t b, uint64_t c)
{
    return st_mix64(st_mix64(st_mix64(a) ^ b) ^ c);
}
/* 53 bits times 2^-53: exact in double on host and device. */
static inline ST_RNG_HD double st_uniform3_inline(uint64_t a, uint64_t b, uint64_t c)
{
    return (double)(st_hash3_inline(a, b, c) >> 11) * (1.0 / 9007199254740992.0);
}

/* Strong 64-bit mix of three words (splitmix64 finaliser chained). */
uint64_t st_hash3(uint64_t a, uint64_t b, uint64_t c);
/* Uniform in [0, 1) with 53 bits, from the hash of (a, b, c). */
double st_uniform3(uint64_t a, uint64_t b, uint64_t c);
/* Standard normal from (a, b, c) via Box-Muller on two derived uniforms. */
double st_normal3(uint64_t a, uint64_t b, uint64_t c);
/* Uniform integer in [0, n) without modulo bias, n > 0. */
uint64_t st_below3(uint64_t n, uint64_t a, uint64_t b, uint64_t c);

/* Domain tags so different uses of one seed never collide. */
enum { ST_RNG_INIT = 1, ST_RNG_DATA = 2, ST_RNG_SAMPLE = 3, ST_RNG_TEST = 4, ST_RNG_DROPOUT = 5 };

#endif
