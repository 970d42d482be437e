/* The element types that cross layer boundaries: what a collective carries
 * (comm.h) and what a kernel reads (kernels.h).  It lives at the bottom so
 * that comm and kernels, which must not include each other, name the same
 * types. */
#ifndef ST_DTYPE_H
#define ST_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ST_DT_F32,   /* float */
    ST_DT_BF16,  /* bfloat16 stored as uint16_t; sums accumulate in fp32 */
    ST_DT_F64    /* double: loss and norm partial sums */
} st_dtype;

static inline size_t st_dtype_size(st_dtype dt)
{
    return dt == ST_DT_BF16 ? 2 : dt == ST_DT_F64 ? 8 : 4;
}

/* Round each element to the nearest bfloat16 (ties to even), stored back as
 * float: emulates bf16 storage on the CPU. */
void st_round_bf16(float *dst, const float *src, int64_t n);
/* The same rounding into 16-bit bfloat16 words (what travels in a bf16
 * collective), and back to float. */
void st_pack_bf16(uint16_t *dst, const float *src, int64_t n);
void st_unpack_bf16(float *dst, const uint16_t *src, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
