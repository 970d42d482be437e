/* st_cuda_gemm for the host emulation (tests/gpu/emu/run_model.sh): cuBLASLt
 * cannot run without a GPU, so the emulated build links this instead of
 * cuda/gemm_lt.cu.  It gives ops.h's meaning (fp32 or bf16 operands, fp32
 * or bf16 output, fp32 compute) by widening the operands to fp32 and
 * calling the CPU reference st_gemm, rounding a bf16 output once.  It
 * therefore exercises the callers' shapes, transposes and strides, not
 * cuBLASLt: under the emulation fp32 products agree with the CPU exactly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "kernels/cpu_gemm.h"
#include "kernels/cpu_ops.h" /* C, with its own extern "C" guard */
#include "ops.h"

/* The emulated shardtrain's device block table (devmem.c), when linked:
 * the operands must be device memory, as for cuBLASLt. */
extern "C" __attribute__((weak)) int emu_dev_contains(const void *p);
extern "C" __attribute__((weak)) void emu_dev_open(void);
extern "C" __attribute__((weak)) void emu_dev_close(void);
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

struct st_cuda_gemm_ctx {
    int unused;
};

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

extern "C" {

cudaError_t st_cuda_gemm_create(st_cuda_gemm_ctx **ctx, size_t)
{
    *ctx = (st_cuda_gemm_ctx *)calloc(1, sizeof **ctx);
    return *ctx ? cudaSuccess : cudaErrorMemoryAllocation;
}

void st_cuda_gemm_destroy(st_cuda_gemm_ctx *ctx) { free(ctx); }

cudaError_t st_cuda_gemm(st_cuda_gemm_ctx *, int ab_type, int c_type, int trans_a,
                         int trans_b, int64_t M, int64_t N, int64_t K, const void *A,
                         int64_t lda, const void *B, int64_t ldb, float beta, void *C,
                         int64_t ldc, cudaStream_t)
{
    device_operand(A, "A");
    device_operand(B, "B");
    device_operand(C, "C");
    device_scope open_device;
    std::vector<float> a = widen(ab_type, A, trans_a ? K : M, trans_a ? M : K, lda);
    std::vector<float> b = widen(ab_type, B, trans_b ? N : K, trans_b ? K : N, ldb);
    if (c_type == ST_CUDA_F32) {
        st_gemm(trans_a, trans_b, M, N, K, a.data(), lda, b.data(), ldb, beta, (float *)C,
                ldc);
        return cudaSuccess;
    }
    std::vector<float> c = widen(ST_CUDA_BF16, C, M, N, ldc);
    st_gemm(trans_a, trans_b, M, N, K, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    for (int64_t r = 0; r < M; r++)
        st_pack_bf16((uint16_t *)C + r * ldc, &c[(size_t)(r * ldc)], N);
    return cudaSuccess;
}

} /* extern "C" */
