/* Conversions between float and bfloat16 (see dtype.h).  They sit at the
 * bottom because every layer meets bf16 words: the CPU kernels emulate bf16
 * storage, the mpi backend carries them, and Hugging Face import reads
 * BF16 checkpoints. */
#include "base/dtype.h"

#include <string.h>

static inline uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) /* leave inf and NaN alone */
        u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void st_round_bf16(float *dst, const float *src, int64_t n)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)bf16_bits(src[i]) << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

void st_pack_bf16(uint16_t *dst, const float *src, int64_t n)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_bits(src[i]);
}

void st_unpack_bf16(float *dst, const uint16_t *src, int64_t n)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}
