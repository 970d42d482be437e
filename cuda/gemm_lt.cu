/* Matrix products of the CUDA backend through cuBLASLt, with exactly the
 * meaning of st_gemm (src/kernels/cpu_gemm_openblas.c): row-major storage, trans flags,
 * row strides, beta 0 or 1.  Inputs are fp32 or bf16, the output fp32 or
 * bf16, and the arithmetic always fp32 (CUBLAS_COMPUTE_32F), so fp32
 * inputs are not silently rounded to TF32 and bf16 products accumulate in
 * fp32 on the tensor cores.
 *
 * Row-major -> column-major.  cuBLASLt is column-major.  A row-major
 * matrix X of r rows and row stride ld occupies the same memory as the
 * column-major matrix X^T (c rows, r columns, leading dimension ld).  So
 * the row-major product C = op(A) op(B) is, read column-major,
 *     C^T = op(B)^T op(A)^T,
 * a column-major product with the operands swapped: m' = N, n' = M, k = K,
 * first operand the memory of B, second the memory of A, output C with
 * leading dimension ldc.  The first operand's memory, read column-major,
 * is B^T, and we need op(B)^T from it: that is "no transpose" when
 * trans_b = 0 (B^T itself) and "transpose" when trans_b = 1 (op(B)^T = B
 * = (B^T)^T).  Likewise the second operand's transpose flag is trans_a.
 * The column-major shapes of the stored operands are therefore
 *     B memory: trans_b ? K x N : N x K   (ld = ldb)
 *     A memory: trans_a ? M x K : K x M   (ld = lda)
 *     C memory: N x M                     (ld = ldc)
 * (rows x columns, column-major), which is what the layouts below say.
 *
 * The algorithm is picked by cuBLASLt's heuristic on every call (a few
 * microseconds of host time; a cache keyed by shape is the obvious next
 * step).  The heuristic is told the real alignment of each pointer, since
 * callers pass pointers into the middle of buffers (the k and v parts of a
 * fused qkv row, for instance). */
#include "common.cuh"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>

struct st_cuda_gemm_ctx {
    cublasLtHandle_t lt;
    void *workspace; /* device memory, used stream-ordered: one ctx per stream */
    size_t workspace_bytes;
};

namespace {

/* Report a cuBLASLt failure once, with the call that failed. */
cudaError_t lt_fail(cublasStatus_t st, const char *what)
{
    fprintf(stderr, "shardtrain: cuBLASLt %s failed: %s (%d)\n", what,
            cublasLtGetStatusString(st), (int)st);
    return cudaErrorUnknown;
}

/* Largest power of two (at most 256) that divides the address. */
uint32_t alignment_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a % al) != 0)
        al >>= 1;
    return al;
}

cudaDataType_t lt_type(int t) { return t == ST_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* The descriptors of one call, destroyed together whatever happened. */
struct lt_call {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t a = NULL, b = NULL, c = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    ~lt_call()
    {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        if (c)
            cublasLtMatrixLayoutDestroy(c);
        if (b)
            cublasLtMatrixLayoutDestroy(b);
        if (a)
            cublasLtMatrixLayoutDestroy(a);
        if (op)
            cublasLtMatmulDescDestroy(op);
    }
};

} /* namespace */

extern "C" {

cudaError_t st_cuda_gemm_create(st_cuda_gemm_ctx **out, size_t workspace_bytes)
{
    *out = NULL;
    st_cuda_gemm_ctx *ctx = (st_cuda_gemm_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return cudaErrorMemoryAllocation;
    ctx->workspace_bytes = workspace_bytes ? workspace_bytes : (size_t)32 << 20;
    cublasStatus_t st = cublasLtCreate(&ctx->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        return lt_fail(st, "create");
    }
    cudaError_t e = cudaMalloc(&ctx->workspace, ctx->workspace_bytes);
    if (e != cudaSuccess) {
        cublasLtDestroy(ctx->lt);
        free(ctx);
        return e;
    }
    *out = ctx;
    return cudaSuccess;
}

void st_cuda_gemm_destroy(st_cuda_gemm_ctx *ctx)
{
    if (!ctx)
        return;
    cudaFree(ctx->workspace);
    cublasLtDestroy(ctx->lt);
    free(ctx);
}

cudaError_t st_cuda_gemm(st_cuda_gemm_ctx *ctx, int ab_type, int c_type, int trans_a,
                         int trans_b, int64_t M, int64_t N, int64_t K, const void *A,
                         int64_t lda, const void *B, int64_t ldb, float beta, void *C,
                         int64_t ldc, cudaStream_t s)
{
    if (M <= 0 || N <= 0)
        return cudaSuccess;
    const size_t c_elem = c_type == ST_CUDA_BF16 ? 2 : 4;
    if (K <= 0) { /* empty sum: C = beta * C, i.e. zero it when beta is 0 */
        if (beta != 0.0f)
            return cudaSuccess;
        return cudaMemset2DAsync(C, (size_t)ldc * c_elem, 0, (size_t)N * c_elem,
                                 (size_t)M, s);
    }

    lt_call call;
    cublasStatus_t st;
    const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if ((st = cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) !=
        CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "matmul descriptor");
    if ((st = cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &op_first, sizeof op_first)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                             &op_second, sizeof op_second)) !=
            CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "transpose attributes");

    /* Column-major shapes of the stored operands (see the file comment). */
    const uint64_t first_rows = trans_b ? K : N, first_cols = trans_b ? N : K;
    const uint64_t second_rows = trans_a ? M : K, second_cols = trans_a ? K : M;
    if ((st = cublasLtMatrixLayoutCreate(&call.a, lt_type(ab_type), first_rows, first_cols,
                                         ldb)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&call.b, lt_type(ab_type), second_rows,
                                         second_cols, lda)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&call.c, lt_type(c_type), (uint64_t)N, (uint64_t)M,
                                         ldc)) != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "matrix layout");

    const uint64_t ws = ctx->workspace_bytes;
    const uint32_t al_a = alignment_of(B), al_b = alignment_of(A), al_c = alignment_of(C);
    if ((st = cublasLtMatmulPreferenceCreate(&call.pref)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulPreferenceSetAttribute(
             call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulPreferenceSetAttribute(
             call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulPreferenceSetAttribute(
             call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulPreferenceSetAttribute(
             call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c)) !=
            CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatmulPreferenceSetAttribute(
             call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c)) !=
            CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "preference");

    cublasLtMatmulHeuristicResult_t algo;
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, call.op, call.a, call.b, call.c, call.c,
                                        call.pref, 1, &algo, &found);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "heuristic");
    if (found < 1)
        return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic (no algorithm)");

    const float alpha = 1.0f;
    /* D = C in place: cuBLASLt allows it when the layouts are equal. */
    st = cublasLtMatmul(ctx->lt, call.op, &alpha, B, call.a, A, call.b, &beta, C, call.c,
                        C, call.c, &algo.algo, ctx->workspace, ctx->workspace_bytes, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "matmul");
    return cudaGetLastError();
}

} /* extern "C" */
