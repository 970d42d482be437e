/* st_cuda_gemm_ex (and so ops.h's inline st_cuda_gemm) for the host emulation
 * (tests/gpu/emu/run_model.sh, build_shardtrain.sh): cuBLASLt cannot run
 * without a GPU, so the emulated builds link this instead of
 * cuda/gemm_lt.cu.  It does two things gemm_lt.cu's caller relies on:
 *
 *   - it checks every call with cuda/gemm_check.h, base and fast-path
 *     rules both (stricter than the real path, which checks the base rules
 *     only), and refuses a bad one with "cuda emulation: cuBLASLt check:
 *     <reason>" on stderr and cudaErrorInvalidValue, which the model's TRY
 *     passes up so the emulated run fails where the caller went wrong;
 *   - it computes ops.h's meaning on the CPU: operands widened to fp32,
 *     P = op(A) op(B) + beta*C by the CPU reference st_gemm, the epilogue
 *     (bias, GELU with the CPU backend's tanh formula, GELU', the bias
 *     gradient) in fp32, and D (and aux, bias for BGRADB) rounded once to
 *     their storage type.
 *
 * It exercises the callers' shapes, transposes, strides and epilogue
 * operands, not cuBLASLt's kernels: under the emulation fp32 products agree
 * with the CPU exactly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cpu_gemm.h"
#include "kernels/cpu_ops.h" /* C, with its own extern "C" guard */
#include "gemm_check.h"
#include "ops.h"

/* The emulated shardtrain's device block table (devmem.c), when linked:
 * the operands must be device memory, as for cuBLASLt. */
extern "C" __attribute__((weak)) int emu_dev_contains(const void *p);
extern "C" __attribute__((weak)) void emu_dev_open(void);
extern "C" __attribute__((weak)) void emu_dev_close(void);
extern "C" __attribute__((weak)) void *emu_dev_alloc_raw(size_t n);
extern "C" __attribute__((weak)) size_t emu_dev_unregister(void *p);
extern "C" __attribute__((weak)) void emu_race_sync_device(void);
/* devmem.c's launch record: each product is recorded with its shape after
 * the checks, and not computed when recording only. */
extern "C" __attribute__((weak)) int emu_rec_only(void);
extern "C" __attribute__((weak)) int emu_recording(void);
extern "C" __attribute__((weak)) void emu_rec(const char *fmt, ...);
/* races.c's check, when linked: the product is an operation on its stream
 * that reads A, B, C (beta != 0) and the bias or aux its epilogue reads,
 * and writes D, what its epilogue writes and its context's workspace. */
extern "C" __attribute__((weak)) void emu_race_op(uintptr_t s, const char *what);
extern "C" __attribute__((weak)) void emu_race_access(const void *p, int write);
/* gemm_lt.cu's context owns one cuBLASLt workspace, which each product
 * writes: products on two streams sharing a context must be ordered.  The
 * race check sees it as a small device block of its own (where devmem.c is
 * linked), written by every product made with the context. */
struct st_cuda_gemm_ctx {
    void *workspace;
};

static void race_operands(const st_cuda_gemm_ctx *ctx, const st_cuda_gemm_desc *d,
                          cudaStream_t s)
{
    if (!emu_race_op)
        return;
    emu_race_op((uintptr_t)s, "st_cuda_gemm");
    auto touch = [](const void *p, int write) {
        if (p)
            emu_race_access(p, write);
    };
    if (ctx)
        touch(ctx->workspace, 1);
    if (d->K > 0) {
        touch(d->A, 0);
        touch(d->B, 0);
    }
    if (d->beta != 0.0f)
        touch(d->C, 0);
    const int ep = d->epilogue;
    touch(d->bias, ep == ST_CUDA_EPI_BGRADB);
    touch(d->aux, ep == ST_CUDA_EPI_GELU_AUX_BIAS);
    touch(d->D, 1);
}
struct device_scope { /* the device arena is addressable inside one */
    device_scope() { if (emu_dev_open) emu_dev_open(); }
    ~device_scope() { if (emu_dev_close) emu_dev_close(); }
};
static void device_operand(const void *p, const char *which)
{
    if (p && emu_dev_contains && !emu_dev_contains(p)) {
        fprintf(stderr, "cuda emulation: st_cuda_gemm: %s (%p) is not device memory\n", which,
                p);
        abort();
    }
}


/* A stored rows x cols matrix at row stride ld, widened to fp32 (same
 * stride, so the st_gemm call keeps the caller's ld). */
static std::vector<float> widen(int type, const void *p, int64_t rows, int64_t cols,
                                int64_t ld)
{
    std::vector<float> out((size_t)(rows > 0 ? (rows - 1) * ld + cols : 0));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int64_t i = r * ld + c;
            if (type == ST_CUDA_BF16)
                st_unpack_bf16(&out[i], (const uint16_t *)p + i, 1);
            else
                out[i] = ((const float *)p)[i];
        }
    return out;
}

static float load(int type, const void *p, int64_t i)
{
    float v;
    if (type == ST_CUDA_BF16)
        st_unpack_bf16(&v, (const uint16_t *)p + i, 1);
    else
        v = ((const float *)p)[i];
    return v;
}

static void store(int type, void *p, int64_t i, float v)
{
    if (type == ST_CUDA_BF16)
        st_pack_bf16((uint16_t *)p + i, &v, 1);
    else
        ((float *)p)[i] = v;
}

extern "C" {

/* The workspace is never used here, but it is allocated at gemm_lt.cu's
 * size, so that the emulated device's memory (devmem.c's size and
 * high-water mark) counts what the real one would hold. */
cudaError_t st_cuda_gemm_create(st_cuda_gemm_ctx **ctx, size_t workspace_bytes)
{
    *ctx = (st_cuda_gemm_ctx *)calloc(1, sizeof **ctx);
    if (!*ctx)
        return cudaErrorMemoryAllocation;
    const size_t ws = workspace_bytes ? workspace_bytes : ST_CUDA_GEMM_WORKSPACE;
    if (emu_dev_alloc_raw && !((*ctx)->workspace = emu_dev_alloc_raw(ws))) {
        free(*ctx);
        *ctx = nullptr;
        return cudaErrorMemoryAllocation;
    }
    return cudaSuccess;
}

void st_cuda_gemm_destroy(st_cuda_gemm_ctx *ctx)
{
    if (ctx && ctx->workspace && emu_dev_unregister) {
        if (emu_race_sync_device)
            emu_race_sync_device(); /* gemm_lt.cu's cudaFree waits for the device */
        emu_dev_unregister(ctx->workspace);
    }
    free(ctx);
}

cudaError_t st_cuda_gemm_ex(st_cuda_gemm_ctx *ctx, const st_cuda_gemm_desc *d,
                            cudaStream_t stream)
{
    /* ST_EMU_GEMM_RULES=base: the base rules only, as the real path checks
     * them, for a test whose own shapes are meant to leave the fast path
     * (test_cuda_ops.cu's odd strides, which cuBLASLt runs on slower
     * kernels). */
    static const int fast = [] {
        const char *e = getenv("ST_EMU_GEMM_RULES");
        return !(e && strcmp(e, "base") == 0);
    }();
    char why[256];
    if (const char *r = st_gemm_check(d, fast, why, sizeof why)) {
        fprintf(stderr, "cuda emulation: cuBLASLt check: %s\n", r);
        return cudaErrorInvalidValue;
    }
    const int64_t M = d->M, N = d->N, K = d->K;
    if (K > 0) {
        device_operand(d->A, "A");
        device_operand(d->B, "B");
    }
    device_operand(d->C, "C");
    device_operand(d->D, "D");
    device_operand(d->bias, "bias");
    device_operand(d->aux, "aux");
    race_operands(ctx, d, stream);
    if (emu_recording && emu_recording())
        emu_rec("gemm\t%lld\t%lld\t%lld\t%d\t%d\t%d\t%d\t%d\t%d\t%g\t%d", (long long)d->M,
                (long long)d->N, (long long)d->K, d->ab_type, d->c_type, d->d_type, d->trans_a,
                d->trans_b, d->epilogue, (double)d->beta, d->in_place);
    if (emu_rec_only && emu_rec_only())
        return cudaSuccess;
    device_scope open_device;

    /* P = op(A) op(B) + beta*C in fp32, M x N at row stride N; beta 0
     * never reads C (which may be NULL or garbage then). */
    std::vector<float> p((size_t)(M * N), 0.0f);
    if (d->beta == 1.0f)
        for (int64_t r = 0; r < M; r++)
            for (int64_t c = 0; c < N; c++)
                p[(size_t)(r * N + c)] = load(d->c_type, d->C, r * d->ldc + c);
    std::vector<float> a;
    if (K > 0) {
        a = widen(d->ab_type, d->A, d->trans_a ? K : M, d->trans_a ? M : K, d->lda);
        std::vector<float> b =
            widen(d->ab_type, d->B, d->trans_b ? N : K, d->trans_b ? K : N, d->ldb);
        st_gemm(d->trans_a, d->trans_b, M, N, K, a.data(), d->lda, b.data(), d->ldb, d->beta,
                p.data(), N);
    }

    const int ep = d->epilogue;
    if (ep == ST_CUDA_EPI_BGRADB) /* bias[i] = sum_k op(A)[i,k], summed in fp32 */
        for (int64_t i = 0; i < M; i++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++)
                sum += d->trans_a ? a[(size_t)(k * d->lda + i)] : a[(size_t)(i * d->lda + k)];
            store(d->bias_type, d->bias, i, sum);
        }
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N; c++) {
            float v = p[(size_t)(r * N + c)];
            if (ep == ST_CUDA_EPI_BIAS || ep == ST_CUDA_EPI_GELU_AUX_BIAS)
                v += load(d->bias_type, d->bias, c);
            if (ep == ST_CUDA_EPI_GELU_AUX_BIAS) {
                store(d->d_type, d->aux, r * d->aux_ld + c, v);
                const float pre = v;
                st_gelu_forward(&v, &pre, 1);
            } else if (ep == ST_CUDA_EPI_DGELU) {
                const float x = load(d->d_type, d->aux, r * d->aux_ld + c), dout = v;
                st_gelu_backward(&v, &x, &dout, 1);
            }
            store(d->d_type, d->D, r * d->ldd + c, v);
        }
    return cudaSuccess;
}

} /* extern "C" */
