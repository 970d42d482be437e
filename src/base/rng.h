/* Counter-based randomness.  Every random number shardtrain draws is a pure
 * function of (seed, stream, index): parameter initialisation of element i
 * of tensor t, the window chosen for sample j of step k.  That makes results
 * independent of how work is split across ranks and micro-batches, which
 * the sharded engine and resumable checkpoints rely on. */
#ifndef ST_RNG_H
#define ST_RNG_H

#include <stdint.h>

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
