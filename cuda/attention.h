/* Fused causal attention on the GPU: the CUDA counterpart of the CPU
 * reference st_attention_forward / st_attention_backward (src/kernels/cpu_ops.h),
 * with exactly its semantics and strided layout.  Flash-attention style:
 * the T x T score matrix never exists in memory; the forward keeps an
 * online softmax per query row and saves each row's log-sum-exp so the
 * backward can rebuild the probabilities tile by tile.
 *
 * Layout (identical to the CPU op; all strides in elements, not bytes):
 *   q, out, dout, dq: [B*T rows, H*hd]  at row strides ldq, ldo, lddo, lddq
 *   k, v, dk, dv:     [B*T rows, KV*hd] at row strides ldk, ldv, lddk, lddv
 *   lse:              [B, H, T] fp32 in both storage modes
 * Query head h reads kv head h / (H / KV) (grouped-query attention).
 * Scores are scaled by 1/sqrt(hd).  dq, dk and dv are overwritten.
 *
 * Two storage modes: fp32 (float *), and bf16 storage (uint16_t * holding
 * bfloat16 bit patterns, the same encoding as st_pack_bf16) with every
 * product, sum, exp and log done in fp32.  Head dims 64 and 128 only.
 *
 * bf16 storage runs on the tensor cores (attention_tc.cu) when every
 * pointer is 16-byte aligned and every row stride a multiple of 8
 * elements; other layouts use the CUDA-core kernels, with the same results
 * within the bf16 tolerance.
 *
 * All pointers are device pointers; work is queued on `stream` and the
 * functions return without synchronising.  Return value: 0 when the
 * kernels were queued; ST_CUDA_ATTN_EINVAL for arguments this
 * implementation refuses (hd not 64 or 128, H % KV != 0, a non-positive
 * size, a row stride smaller than the row, a NULL pointer); otherwise the
 * cudaError_t of the failed launch (always > 0).  That code is read with
 * cudaGetLastError, so an earlier unchecked error of the calling thread can
 * surface here too; errors inside the kernels show at the next sync.
 *
 * The backward needs a device workspace of
 * st_cuda_attention_backward_workspace_bytes(B, H, T) bytes (fp32
 * D = rowsum(dout * out) per query row); it must not alias any other
 * argument, and may be reused once the stream has passed the call.
 *
 * NOTHING HERE HAS RUN ON A GPU YET: see cuda/README. */
#ifndef ST_CUDA_ATTENTION_H
#define ST_CUDA_ATTENTION_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_CUDA_ATTN_EINVAL (-1)

int st_cuda_attention_forward_f32(float *out, int64_t ldo, float *lse,
                                  const float *q, int64_t ldq,
                                  const float *k, int64_t ldk,
                                  const float *v, int64_t ldv,
                                  int64_t B, int64_t T, int64_t H, int64_t KV,
                                  int64_t hd, cudaStream_t stream);

int st_cuda_attention_forward_bf16(uint16_t *out, int64_t ldo, float *lse,
                                   const uint16_t *q, int64_t ldq,
                                   const uint16_t *k, int64_t ldk,
                                   const uint16_t *v, int64_t ldv,
                                   int64_t B, int64_t T, int64_t H, int64_t KV,
                                   int64_t hd, cudaStream_t stream);

size_t st_cuda_attention_backward_workspace_bytes(int64_t B, int64_t H, int64_t T);

int st_cuda_attention_backward_f32(float *dq, int64_t lddq,
                                   float *dk, int64_t lddk,
                                   float *dv, int64_t lddv,
                                   const float *dout, int64_t lddo,
                                   const float *out, int64_t ldo,
                                   const float *lse,
                                   const float *q, int64_t ldq,
                                   const float *k, int64_t ldk,
                                   const float *v, int64_t ldv,
                                   int64_t B, int64_t T, int64_t H, int64_t KV,
                                   int64_t hd, void *workspace,
                                   cudaStream_t stream);

int st_cuda_attention_backward_bf16(uint16_t *dq, int64_t lddq,
                                    uint16_t *dk, int64_t lddk,
                                    uint16_t *dv, int64_t lddv,
                                    const uint16_t *dout, int64_t lddo,
                                    const uint16_t *out, int64_t ldo,
                                    const float *lse,
                                    const uint16_t *q, int64_t ldq,
                                    const uint16_t *k, int64_t ldk,
                                    const uint16_t *v, int64_t ldv,
                                    int64_t B, int64_t T, int64_t H, int64_t KV,
                                    int64_t hd, void *workspace,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
