/* The CPU backend's matrix product (cpu_gemm_openblas.c: OpenBLAS in a
 * fixed tile grid, bit-identical for any thread count).  Every dense
 * layer's forward and backward goes through it; the CUDA backend's st_cuda_gemm (cuda/ops.h)
 * has the same meaning, and the host emulation stands this one in for
 * cuBLASLt. */
#ifndef ST_CPU_GEMM_H
#define ST_CPU_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C[M,N] = beta*C + op(A)[M,K] * op(B)[K,N], row-major, beta 0 or 1.
 * op(X) = X when the trans flag is 0, X^T when 1; lda/ldb/ldc are row
 * strides of the stored matrices. */
void st_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
             const float *A, int64_t lda, const float *B, int64_t ldb,
             float beta, float *C, int64_t ldc);

/* C[M,N] = beta*C + alpha * op(A) * op(B) as one single-threaded library
 * call, for kernels that are already inside an OpenMP region (the CPU
 * attention's tile products).  Its bits depend only on its arguments. */
void st_gemm_serial(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc);

#ifdef __cplusplus
}
#endif

#endif
