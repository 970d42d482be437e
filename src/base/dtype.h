/* The element types that cross layer boundaries: what a collective carries
 * (comm.h) and what a kernel reads (kernels.h).  It lives at the bottom so
 * that comm and kernels, which must not include each other, name the same
 * types. */
#ifndef ST_DTYPE_H
#define ST_DTYPE_H

#include <stddef.h>

typedef enum {
    ST_DT_F32,   /* float */
    ST_DT_BF16,  /* bfloat16 stored as uint16_t; sums accumulate in fp32 */
    ST_DT_F64    /* double: loss and norm partial sums */
} st_dtype;

static inline size_t st_dtype_size(st_dtype dt)
{
    return dt == ST_DT_BF16 ? 2 : dt == ST_DT_F64 ? 8 : 4;
}

#endif
