/* Matrix products of the CUDA backend through cuBLASLt: st_cuda_gemm_ex
 * of cuda/ops.h (whose in-place wrapper st_cuda_gemm is inline there), with
 * exactly the meaning of st_gemm (src/kernels/cpu_gemm_openblas.c) for
 * the product: row-major storage, trans flags, row strides, beta 0 or 1,
 * plus an optional separate output D and a fused epilogue.  Inputs are fp32 or
 * bf16, the output fp32 or bf16, and the arithmetic always fp32
 * (CUBLAS_COMPUTE_32F), so fp32 inputs are not silently rounded to TF32
 * and bf16 products accumulate in fp32 on the tensor cores.  Every call is
 * first checked by cuda/gemm_check.h (its base rules: the fast-path
 * alignment rules are the emulation's, see there), so a malformed call
 * fails with the reason instead of reaching the device.
 *
 * Row-major -> column-major.  cuBLASLt is column-major.  A row-major
 * matrix X of r rows and row stride ld occupies the same memory as the
 * column-major matrix X^T (c rows, r columns, leading dimension ld).  So
 * the row-major product C = op(A) op(B) is, read column-major,
 *     C^T = op(B)^T op(A)^T,
 * a column-major product with the operands swapped: m' = N, n' = M, k = K,
 * first operand (cuBLASLt's "A") the memory of B, second (its "B") the
 * memory of A, output C/D with leading dimension ldc/ldd.  The first
 * operand's memory, read column-major, is B^T, and we need op(B)^T from
 * it: that is "no transpose" when trans_b = 0 (B^T itself) and
 * "transpose" when trans_b = 1 (op(B)^T = B = (B^T)^T).  Likewise the
 * second operand's transpose flag is trans_a.  The column-major shapes of
 * the stored operands are therefore
 *     B memory: trans_b ? K x N : N x K   (ld = ldb)
 *     A memory: trans_a ? M x K : K x M   (ld = lda)
 *     C, D memory: N x M                  (ld = ldc, ldd)
 * (rows x columns, column-major), which is what the layouts below say.
 *
 * The epilogues under the same swap:
 *   - BIAS, GELU_AUX_BIAS: cuBLASLt's bias has one entry per row of its D,
 *     i.e. m' = N: one per column of our row-major D, the output features
 *     of a linear layer, which is what a bias is.
 *   - The GELU aux matrix is column-major m' x n' = N x M at leading
 *     dimension aux_ld: our row-major M x N at row stride aux_ld, so
 *     cuBLASLt's "aux_ld >= rows of D, divisible by 8" is our
 *     "aux_ld >= N, divisible by 8".
 *   - BGRADB reduces cuBLASLt's second operand over k, one entry per
 *     column of its D (n' = M).  Its second operand is our A: the result is
 *     bias[i] = sum_k op(A)[i,k], i < M.  For a Linear weight gradient
 *     dW[out,in] = dy^T x (trans_a = 1, A = dy) that is the bias gradient,
 *     the column sums of dy.  (A GPT-2 Conv1D gradient dW[in,out] = x^T dy
 *     has dy as B: it would need BGRADA, which reduces cuBLASLt's first
 *     operand = our B, bias[j] = sum_k op(B)[k,j]; not offered yet.)
 *
 * The algorithm is picked by cuBLASLt's heuristic on every call (a few
 * microseconds of host time; a cache keyed by shape is the obvious next
 * step).  The heuristic is told the real alignment of each pointer, since
 * callers pass pointers into the middle of buffers (the k and v parts of a
 * fused qkv row, for instance).  The epilogues have been checked against
 * the CPU only through the emulation's implementation of this meaning
 * (tests/gpu/test_gemm_check.cpp): no GPU has run them yet. */
#include "common.cuh"
#include "gemm_check.h"

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

template <class T>
cublasStatus_t set_attr(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t a, const T &v)
{
    return cublasLtMatmulDescSetAttribute(op, a, &v, sizeof v);
}

/* The epilogue attributes of *d (the file comment says why bias and aux
 * mean what they mean after the row-major swap).  The bias and aux types
 * are D's: BIAS_DATA_TYPE is set anyway so that nothing depends on
 * cuBLASLt's default; the aux type is left to that default (D's type). */
cublasStatus_t set_epilogue(cublasLtMatmulDesc_t op, const st_cuda_gemm_desc *d)
{
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
    switch (d->epilogue) {
    case ST_CUDA_EPI_BIAS: e = CUBLASLT_EPILOGUE_BIAS; break;
    case ST_CUDA_EPI_GELU_AUX_BIAS: e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS; break;
    case ST_CUDA_EPI_DGELU: e = CUBLASLT_EPILOGUE_DGELU; break;
    case ST_CUDA_EPI_BGRADB: e = CUBLASLT_EPILOGUE_BGRADB; break;
    default: break;
    }
    cublasStatus_t st = set_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE, (uint32_t)e);
    if (st != CUBLAS_STATUS_SUCCESS || e == CUBLASLT_EPILOGUE_DEFAULT)
        return st;
    if (d->bias) {
        const int32_t bt = (int32_t)lt_type(d->bias_type);
        if ((st = set_attr(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, d->bias)) !=
                CUBLAS_STATUS_SUCCESS ||
            (st = set_attr(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt)) !=
                CUBLAS_STATUS_SUCCESS)
            return st;
    }
    if (d->aux) {
        const int64_t ld = d->aux_ld;
        if ((st = set_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, d->aux)) !=
                CUBLAS_STATUS_SUCCESS ||
            (st = set_attr(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld)) !=
                CUBLAS_STATUS_SUCCESS)
            return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* The descriptors of one call, destroyed together whatever happened. */
struct lt_call {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t a = NULL, b = NULL, c = NULL, d = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    ~lt_call()
    {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        if (d)
            cublasLtMatrixLayoutDestroy(d);
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
    ctx->workspace_bytes = workspace_bytes ? workspace_bytes : ST_CUDA_GEMM_WORKSPACE;
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

cudaError_t st_cuda_gemm_ex(st_cuda_gemm_ctx *ctx, const st_cuda_gemm_desc *d,
                            cudaStream_t s)
{
    char why[256];
    if (const char *r = st_gemm_check(d, 0, why, sizeof why)) {
        fprintf(stderr, "shardtrain: st_cuda_gemm_ex: %s\n", r);
        return cudaErrorInvalidValue;
    }
    const int64_t M = d->M, N = d->N, K = d->K;
    const size_t d_elem = d->d_type == ST_CUDA_BF16 ? 2 : 4;
    if (K == 0) { /* empty sum: D = beta * C (the checker allows no epilogue here) */
        if (d->beta == 0.0f)
            return cudaMemset2DAsync(d->D, (size_t)d->ldd * d_elem, 0, (size_t)N * d_elem,
                                     (size_t)M, s);
        if (d->in_place)
            return cudaSuccess;
        return cudaMemcpy2DAsync(d->D, (size_t)d->ldd * d_elem, d->C,
                                 (size_t)d->ldc * d_elem, (size_t)N * d_elem, (size_t)M,
                                 cudaMemcpyDeviceToDevice, s);
    }
    /* beta 0 never reads C: cuBLASLt still wants a C, so D stands in. */
    const void *C = d->C ? d->C : d->D;
    const int64_t ldc = d->C ? d->ldc : d->ldd;

    lt_call call;
    cublasStatus_t st;
    const cublasOperation_t op_first = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
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
    if ((st = set_epilogue(call.op, d)) != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "epilogue attributes");

    /* Column-major shapes of the stored operands (see the file comment). */
    const uint64_t first_rows = d->trans_b ? K : N, first_cols = d->trans_b ? N : K;
    const uint64_t second_rows = d->trans_a ? M : K, second_cols = d->trans_a ? K : M;
    if ((st = cublasLtMatrixLayoutCreate(&call.a, lt_type(d->ab_type), first_rows,
                                         first_cols, d->ldb)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&call.b, lt_type(d->ab_type), second_rows,
                                         second_cols, d->lda)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&call.c, lt_type(d->d_type), (uint64_t)N,
                                         (uint64_t)M, ldc)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&call.d, lt_type(d->d_type), (uint64_t)N,
                                         (uint64_t)M, d->ldd)) != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "matrix layout");

    const uint64_t ws = ctx->workspace_bytes;
    const uint32_t al_a = alignment_of(d->B), al_b = alignment_of(d->A),
                   al_c = alignment_of(C), al_d = alignment_of(d->D);
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
             call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d)) !=
            CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "preference");

    cublasLtMatmulHeuristicResult_t algo;
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, call.op, call.a, call.b, call.c, call.d,
                                        call.pref, 1, &algo, &found);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "heuristic");
    if (found < 1)
        return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic (no algorithm)");

    const float alpha = 1.0f;
    /* In place (D == C) cuBLASLt allows when the layouts are equal, which
     * the checker made sure of. */
    st = cublasLtMatmul(ctx->lt, call.op, &alpha, d->B, call.a, d->A, call.b, &d->beta, C,
                        call.c, d->D, call.d, &algo.algo, ctx->workspace,
                        ctx->workspace_bytes, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lt_fail(st, "matmul");
    return cudaGetLastError();
}

} /* extern "C" */
