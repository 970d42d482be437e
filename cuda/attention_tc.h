/* Internal to cuda/: the tensor-core attention kernels for bf16 storage
 * (attention_tc.cu), called by the bf16 entry points of attention.h when
 * the layout allows them.  Same arguments and semantics as attention.h;
 * the caller has already checked the sizes (args_ok in attention.cu) and,
 * for the backward, computed D = rowsum(dO * O) into `D` ([B, H, T] fp32).
 * Return value: 0, or the cudaError_t of a failed launch or attribute
 * call. */
#ifndef ST_CUDA_ATTENTION_TC_H
#define ST_CUDA_ATTENTION_TC_H

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

namespace st_cuda {

/* The tensor-core kernels move 16-byte chunks (cp.async) and store pairs:
 * every pointer 16-byte aligned and every row stride a multiple of 8
 * elements.  n_ptr pointers, n_ld strides. */
bool attn_tc_layout_ok(const void *const *ptr, int n_ptr, const int64_t *ld, int n_ld);

int attn_tc_forward(__nv_bfloat16 *out, int64_t ldo, float *lse,
                    const __nv_bfloat16 *q, int64_t ldq, const __nv_bfloat16 *k, int64_t ldk,
                    const __nv_bfloat16 *v, int64_t ldv,
                    int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                    cudaStream_t stream);

int attn_tc_backward(__nv_bfloat16 *dq, int64_t lddq, __nv_bfloat16 *dk, int64_t lddk,
                     __nv_bfloat16 *dv, int64_t lddv,
                     const __nv_bfloat16 *dout, int64_t lddo, const float *lse, const float *D,
                     const __nv_bfloat16 *q, int64_t ldq, const __nv_bfloat16 *k, int64_t ldk,
                     const __nv_bfloat16 *v, int64_t ldv,
                     int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                     cudaStream_t stream);

} /* namespace st_cuda */

#endif
