/* GPU test of the CUDA backend's matrix products (cuda/ops.h's st_cuda_gemm
 * and st_cuda_gemm_ex on cuBLASLt, cuda/gemm_lt.cu) against the CPU's
 * st_gemm on the same (bf16-rounded, in bf16 storage) inputs: fp32 and
 * bf16 operands with fp32 or bf16 output, every transpose pair, beta 0 and
 * 1, shapes from 1 x 1 x 1 to 128 x 96 x 256, with row strides padded and
 * some odd on purpose (cuBLASLt runs those on its slower kernels); then
 * st_cuda_gemm_ex with a separate D and each epilogue (BIAS,
 * GELU_AUX_BIAS, DGELU, BGRADB).  Error measure and tolerances as in
 * test_cuda_ops.cu (ops_check.h).
 *
 * Without a usable GPU the program prints one "Bail out!" line and exits
 * with status 1; under the host emulation (tests/gpu/emu/run_ops.sh) the
 * products are the CPU's behind cuBLASLt's checked interface. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cpu_gemm.h"
#include "kernels/cpu_ops.h"
#include "cpu_ref.h"
#include "ops.h"
#include "tap.h"
#include "gpu_check.h"
#include "ops_check.h"

/* ---- matrix products ------------------------------------------------------------ */

static void test_gemm(st_cuda_gemm_ctx *ctx, int abt, int ct, int ta, int tb, int64_t M,
                      int64_t N, int64_t K, int64_t pad, float beta)
{
    const bool abf = abt == ST_CUDA_BF16, cbf = ct == ST_CUDA_BF16;
    /* stored shapes (row-major): A is op(A)^T's shape when transposed */
    const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
    const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
    char shape[128];
    snprintf(shape, sizeof shape, "%s%s M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld beta=%g",
             ta ? "T" : "N", tb ? "T" : "N", (long long)M, (long long)N, (long long)K,
             (long long)lda, (long long)ldb, (long long)ldc, beta);
    char what[64];
    snprintf(what, sizeof what, "gemm a,b=%s c=%s", abf ? "bf16" : "f32", cbf ? "bf16" : "f32");
    Buf A(a_rows * lda, abf), B(b_rows * ldb, abf), Cm(M * ldc, cbf);
    A.fill(1.0f);
    B.fill(1.0f);
    Cm.fill(1.0f);
    std::vector<float> ref = Cm.h;
    st_gemm(ta, tb, M, N, K, A.h.data(), lda, B.h.data(), ldb, beta, ref.data(), ldc);
    if (beta == 0.0f) /* beta 0 must not read C: give it NaNs */
        Cm.poison();
    RUN(st_cuda_gemm(ctx, abt, ct, ta, tb, M, N, K, A.d, lda, B.d, ldb, beta, Cm.d, ldc,
                     g_stream));
    /* compare the M x N region only (padding is poisoned when beta = 0) */
    std::vector<float> got = Cm.down(), g2, r2;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            g2.push_back(got[i * ldc + j]);
            r2.push_back(ref[i * ldc + j]);
        }
    report(what, abf || cbf, shape, rel_err(g2, r2));
}

/* st_cuda_gemm_ex with a separate D and each epilogue, against the CPU
 * (st_gemm, st_gelu_*) computing cuda/ops.h's definitions on the same
 * inputs.  A call cuBLASLt refuses is a failed check, not a bail-out, so
 * the other epilogues still run. */
static void test_gemm_ex(st_cuda_gemm_ctx *ctx, bool bf, int epi)
{
    static const char *names[] = {"NONE (separate D)", "BIAS", "GELU_AUX_BIAS", "DGELU",
                                  "BGRADB"};
    const int64_t M = 128, N = 96, K = 256, ld = N + 8;
    const int ta = epi == ST_CUDA_EPI_BGRADB, tb = 1; /* BGRADB: dW = dy^T x */
    const int64_t lda = (ta ? M : K) + 8, ldb = (tb ? K : N) + 8;
    const int ty = bf ? ST_CUDA_BF16 : ST_CUDA_F32;
    Buf A((ta ? K : M) * lda, bf), B((tb ? N : K) * ldb, bf), Cm(M * ld, bf), D(M * ld, bf),
        bias(M, bf), aux(M * ld, bf);
    A.fill(1.0f);
    B.fill(1.0f);
    Cm.fill(1.0f);
    bias.fill(1.0f);
    aux.fill(2.0f);
    D.poison();
    const float beta = epi == ST_CUDA_EPI_GELU_AUX_BIAS ? 0.0f : 1.0f;
    std::vector<float> p = Cm.h, want_d, want_x;
    st_gemm(ta, tb, M, N, K, A.h.data(), lda, B.h.data(), ldb, beta, p.data(), ld);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float v = p[i * ld + j], x;
            if (epi == ST_CUDA_EPI_BIAS || epi == ST_CUDA_EPI_GELU_AUX_BIAS)
                v += bias.h[j];
            if (epi == ST_CUDA_EPI_GELU_AUX_BIAS) {
                want_x.push_back(v);
                x = v;
                st_gelu_forward(&v, &x, 1);
            } else if (epi == ST_CUDA_EPI_DGELU) {
                x = v;
                st_gelu_backward(&v, &aux.h[i * ld + j], &x, 1);
            }
            want_d.push_back(v);
        }
    if (epi == ST_CUDA_EPI_BGRADB)
        for (int64_t i = 0; i < M; i++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++)
                sum += A.h[k * lda + i];
            want_x.push_back(sum);
        }
    if (epi == ST_CUDA_EPI_GELU_AUX_BIAS)
        aux.poison();
    if (epi == ST_CUDA_EPI_BGRADB)
        bias.poison();

    st_cuda_gemm_desc d = {};
    d.ab_type = d.c_type = d.d_type = d.bias_type = ty;
    d.trans_a = ta;
    d.trans_b = tb;
    d.M = M;
    d.N = N;
    d.K = K;
    d.A = A.d;
    d.lda = lda;
    d.B = B.d;
    d.ldb = ldb;
    d.beta = beta;
    d.C = Cm.d;
    d.ldc = ld;
    d.D = D.d;
    d.ldd = ld;
    d.epilogue = epi;
    if (epi == ST_CUDA_EPI_BIAS || epi == ST_CUDA_EPI_GELU_AUX_BIAS ||
        epi == ST_CUDA_EPI_BGRADB) {
        d.bias = bias.d;
        d.bias_len = epi == ST_CUDA_EPI_BGRADB ? M : N;
    }
    if (epi == ST_CUDA_EPI_GELU_AUX_BIAS || epi == ST_CUDA_EPI_DGELU) {
        d.aux = aux.d;
        d.aux_ld = ld;
    }
    char what[64];
    snprintf(what, sizeof what, "gemm_ex %s", names[epi]);
    cudaError_t e = st_cuda_gemm_ex(ctx, &d, g_stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g_stream);
    if (e != cudaSuccess) {
        tap_ok(0, "%s %s: refused (%s)", what, bf ? "bf16" : "f32", cudaGetErrorString(e));
        return;
    }
    std::vector<float> got = D.down(), got_d, got_x;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            got_d.push_back(got[i * ld + j]);
    double err = rel_err(got_d, want_d);
    if (epi == ST_CUDA_EPI_GELU_AUX_BIAS) {
        const std::vector<float> a = aux.down();
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                got_x.push_back(a[i * ld + j]);
    } else if (epi == ST_CUDA_EPI_BGRADB) {
        got_x = bias.down();
    }
    if (!want_x.empty())
        err = fmax(err, rel_err(got_x, want_x));
    report(what, bf, "M=128 N=96 K=256 ld+8", err);
}

int main(void)
{
    if (!open_device("test_cuda_gemm"))
        return 1;
    st_cuda_gemm_ctx *ctx;
    CK(st_cuda_gemm_create(&ctx, 0));
    static const int types[3][2] = {
        {ST_CUDA_F32, ST_CUDA_F32}, {ST_CUDA_BF16, ST_CUDA_F32}, {ST_CUDA_BF16, ST_CUDA_BF16}};
    static const int64_t shapes[][4] = {/* M, N, K, pad */
                                        {1, 1, 1, 0},
                                        {33, 65, 17, 3},
                                        {128, 96, 256, 0},
                                        {128, 96, 256, 64}};
    for (const auto &ty : types)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (const auto &sh : shapes)
                    for (int beta = 0; beta < 2; beta++)
                        test_gemm(ctx, ty[0], ty[1], ta, tb, sh[0], sh[1], sh[2], sh[3],
                                  (float)beta);
    for (int bf = 0; bf < 2; bf++)
        for (int epi = ST_CUDA_EPI_NONE; epi <= ST_CUDA_EPI_BGRADB; epi++)
            test_gemm_ex(ctx, bf, epi);
    st_cuda_gemm_destroy(ctx);
    close_device();
    return tap_done();
}
