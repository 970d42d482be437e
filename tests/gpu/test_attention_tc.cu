/* The tensor-core attention kernels (cuda/attention_tc.cu, reached through
 * the bf16 entry points of cuda/attention.h) against the CPU reference
 * st_attention_forward / st_attention_backward of libshardtrain.a.  Runs on
 * a GPU (make check-gpu) and, in make check, on the CPU under the exact
 * instruction emulation of tests/gpu/emu (tests/cuda_attention_emu.sh).
 *
 * Shapes: T in {1, 7, 64, 65, 129, 1024}, head widths 64 and 128,
 * n_head / n_kv_head 1 and 4 (and 2), batch 1 and 3, with q, k, v packed
 * in one row [q | k | v | pad] as the model writes them.  Per case: out,
 * lse, dq, dk and dv against the CPU; the padding columns of every output
 * untouched; the backward run twice gives the same bits.  Inputs are
 * rounded to bf16 first, so both sides see identical values, and the CPU
 * backward is given the GPU's bf16 output (what the model stores).
 *
 * Tolerances (the bf16 tolerances of test_cuda_attention.cu): outputs
 * 2e-2 of the largest reference element, the log-sum-exp 1e-4.  Sources of
 * difference: the probabilities enter P V, dS K and dS^T Q rounded to
 * bf16 (relative 2^-9), the outputs are rounded to bf16 once, and the
 * fp32 sums run in another order.
 *
 * A last case with a row stride that is not a multiple of 8 elements
 * must take the CUDA-core fallback and still match.  Under the emulation
 * the kernels' launch counts show which path ran.
 *
 * ST_ATTN_TC_QUICK=1 runs only the cases with T <= 129 and prints a digest
 * of every output (tests/cuda_attention_emu.sh compares it with the
 * digest of a run whose threads resume in reverse order). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "attention.h"
#include "kernels/cpu_ops.h" /* C, with its own extern "C" guard */
#include "gpu_check.h"
#include "tap.h"

struct shape {
    int64_t B, T, H, KV, hd;
};

static uint64_t digest = 1469598103934665603ull; /* FNV-1a over every output */
static void digest_bytes(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        digest = (digest ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
}

/* A device buffer of bf16 words (or floats), poisoned with 0xff bytes. */
struct dbuf {
    void *p = nullptr;
    size_t bytes = 0;
    explicit dbuf(size_t b) : bytes(b)
    {
        CK(cudaMalloc(&p, b));
        CK(cudaMemset(p, 0xff, b));
    }
    ~dbuf() { cudaFree(p); }
    dbuf(const dbuf &) = delete;
    dbuf &operator=(const dbuf &) = delete;
    uint16_t *h() { return static_cast<uint16_t *>(p); }
    float *f() { return static_cast<float *>(p); }
    std::vector<unsigned char> raw() const
    {
        std::vector<unsigned char> r(bytes);
        CK(cudaMemcpy(r.data(), p, bytes, cudaMemcpyDeviceToHost));
        return r;
    }
};

static std::vector<float> unpack(const std::vector<unsigned char> &raw)
{
    std::vector<float> x(raw.size() / 2);
    st_unpack_bf16(x.data(), reinterpret_cast<const uint16_t *>(raw.data()), (int64_t)x.size());
    return x;
}

/* max |a - ref| / max |ref| over rows x [col0, col0 + cols) at stride ld;
 * a non-finite value gives infinity. */
static double rel_err(const std::vector<float> &a, const std::vector<float> &ref, int64_t rows,
                      int64_t ld, int64_t col0, int64_t cols)
{
    double diff = 0.0, mx = 0.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = col0; c < col0 + cols; c++) {
            const double x = a[r * ld + c], y = ref[r * ld + c];
            if (!isfinite(x))
                return INFINITY;
            diff = fmax(diff, fabs(x - y));
            mx = fmax(mx, fabs(y));
        }
    return mx > 0.0 ? diff / mx : diff;
}

/* Every byte of columns outside [col0, col1) of each row is still 0xff. */
static bool pad_untouched(const std::vector<unsigned char> &raw, int64_t rows, int64_t ld,
                          int64_t col0, int64_t col1)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < ld; c++)
            if ((c < col0 || c >= col1) && (raw[(r * ld + c) * 2] != 0xff ||
                                             raw[(r * ld + c) * 2 + 1] != 0xff))
                return false;
    return true;
}

#ifdef ST_CUDA_EMULATION
static long tc_launches(void)
{
    return emu_launch_count("attn_fwd_tc_kernel") + emu_launch_count("attn_bwd_dq_tc_kernel") +
           emu_launch_count("attn_bwd_dkdv_tc_kernel");
}
#endif

/* One case; `pad` extra columns in the fused qkv rows (a multiple of 8
 * keeps the tensor-core path, another value forces the fallback). */
static void run_case(const shape &s, int64_t pad, bool expect_tc)
{
    const int64_t N = s.B * s.T, hd = s.hd, qc = s.H * hd, kvc = s.KV * hd;
    const int64_t W = qc + 2 * kvc + pad, kcol = qc, vcol = qc + kvc;
    const int64_t ldo = qc + 8, nlse = s.B * s.H * s.T;
    char tag[128];
    snprintf(tag, sizeof tag, "B=%lld T=%lld H=%lld KV=%lld hd=%lld%s", (long long)s.B,
             (long long)s.T, (long long)s.H, (long long)s.KV, (long long)hd,
             expect_tc ? "" : " (stride not a multiple of 8)");
#ifdef ST_CUDA_EMULATION
    const long launches_before = tc_launches();
#endif

    std::vector<float> qkv((size_t)(N * W)), dout((size_t)(N * qc));
    for (float &x : qkv)
        x = 2.0f * uniform_pm1();
    for (float &x : dout)
        x = uniform_pm1();
    st_round_bf16(qkv.data(), qkv.data(), (int64_t)qkv.size());
    st_round_bf16(dout.data(), dout.data(), (int64_t)dout.size());
    std::vector<uint16_t> qkv_h(qkv.size()), dout_h(dout.size());
    st_pack_bf16(qkv_h.data(), qkv.data(), (int64_t)qkv.size());
    st_pack_bf16(dout_h.data(), dout.data(), (int64_t)dout.size());

    dbuf d_qkv((size_t)(N * W) * 2), d_out((size_t)(N * ldo) * 2), d_lse((size_t)nlse * 4);
    dbuf d_dout((size_t)(N * qc) * 2), d_grad((size_t)(N * W) * 2);
    dbuf d_ws(st_cuda_attention_backward_workspace_bytes(s.B, s.H, s.T));
    CK(cudaMemcpy(d_qkv.p, qkv_h.data(), qkv_h.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dout.p, dout_h.data(), dout_h.size() * 2, cudaMemcpyHostToDevice));
    const uint16_t *q = d_qkv.h(), *k = d_qkv.h() + kcol, *v = d_qkv.h() + vcol;

    int rc = st_cuda_attention_forward_bf16(d_out.h(), ldo, d_lse.f(), q, W, k, W, v, W, s.B,
                                            s.T, s.H, s.KV, hd, 0);
    CK(cudaDeviceSynchronize());
    const std::vector<unsigned char> out_raw = d_out.raw(), lse_raw = d_lse.raw();
    const std::vector<float> out = unpack(out_raw);
    std::vector<float> lse((size_t)nlse);
    memcpy(lse.data(), lse_raw.data(), lse_raw.size());

    std::vector<float> out_ref((size_t)(N * ldo), 0.0f), lse_ref((size_t)nlse);
    st_attention_forward(out_ref.data(), ldo, lse_ref.data(), qkv.data(), W, qkv.data() + kcol,
                         W, qkv.data() + vcol, W, s.B, s.T, s.H, s.KV, hd);
    tap_ok(rc == 0, "%s: forward queued", tag);
    const double e_out = rel_err(out, out_ref, N, ldo, 0, qc);
    double e_lse = 0.0, lse_max = 0.0;
    for (int64_t i = 0; i < nlse; i++) {
        if (!isfinite(lse[i]))
            e_lse = INFINITY;
        e_lse = fmax(e_lse, fabs((double)lse[i] - lse_ref[i]));
        lse_max = fmax(lse_max, fabs((double)lse_ref[i]));
    }
    e_lse /= fmax(lse_max, 1.0);
    tap_ok(e_out < 2e-2, "%s: out within 2e-2 (%.2e)", tag, e_out);
    tap_ok(e_lse < 1e-4, "%s: lse within 1e-4 (%.2e)", tag, e_lse);
    tap_ok(pad_untouched(out_raw, N, ldo, 0, qc), "%s: out padding untouched", tag);

    /* backward, twice; the CPU gets the GPU's (bf16) output */
    uint16_t *dq = d_grad.h(), *dk = d_grad.h() + kcol, *dv = d_grad.h() + vcol;
    rc = st_cuda_attention_backward_bf16(dq, W, dk, W, dv, W, d_dout.h(), qc, d_out.h(), ldo,
                                         d_lse.f(), q, W, k, W, v, W, s.B, s.T, s.H, s.KV, hd,
                                         d_ws.p, 0);
    CK(cudaDeviceSynchronize());
    const std::vector<unsigned char> g1 = d_grad.raw();
    const int rc2 = st_cuda_attention_backward_bf16(dq, W, dk, W, dv, W, d_dout.h(), qc,
                                                    d_out.h(), ldo, d_lse.f(), q, W, k, W, v, W,
                                                    s.B, s.T, s.H, s.KV, hd, d_ws.p, 0);
    CK(cudaDeviceSynchronize());
    const std::vector<unsigned char> g2 = d_grad.raw();
    tap_ok(rc == 0 && rc2 == 0, "%s: backward queued", tag);
    const std::vector<float> grad = unpack(g1);

    std::vector<float> grad_ref((size_t)(N * W), 0.0f);
    st_attention_backward(grad_ref.data(), W, grad_ref.data() + kcol, W, grad_ref.data() + vcol,
                          W, dout.data(), qc, out.data(), ldo, lse_ref.data(), qkv.data(), W,
                          qkv.data() + kcol, W, qkv.data() + vcol, W, s.B, s.T, s.H, s.KV, hd);
    const double e_dq = rel_err(grad, grad_ref, N, W, 0, qc);
    const double e_dk = rel_err(grad, grad_ref, N, W, kcol, kvc);
    const double e_dv = rel_err(grad, grad_ref, N, W, vcol, kvc);
    tap_ok(e_dq < 2e-2, "%s: dq within 2e-2 (%.2e)", tag, e_dq);
    tap_ok(e_dk < 2e-2, "%s: dk within 2e-2 (%.2e)", tag, e_dk);
    tap_ok(e_dv < 2e-2, "%s: dv within 2e-2 (%.2e)", tag, e_dv);
    tap_ok(pad_untouched(g1, N, W, 0, qc + 2 * kvc), "%s: gradient padding untouched", tag);
    tap_ok(g1 == g2, "%s: backward twice gives the same bits", tag);
    digest_bytes(out_raw.data(), out_raw.size());
    digest_bytes(lse_raw.data(), lse_raw.size());
    digest_bytes(g1.data(), g1.size());
#ifdef ST_CUDA_EMULATION
    const long tc = tc_launches() - launches_before;
    tap_ok(expect_tc ? tc == 5 : tc == 0, "%s: %s (tensor-core launches: %ld)", tag,
           expect_tc ? "ran on the tensor-core kernels" : "fell back to the CUDA-core kernels",
           tc);
#else
    (void)expect_tc;
#endif
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("Bail out! no CUDA device\n");
        return 1;
    }
    const char *q = getenv("ST_ATTN_TC_QUICK");
    const bool quick = q && *q == '1';
    const shape cases[] = {
        {3, 1, 4, 1, 64},   {1, 1, 1, 1, 128},  {1, 7, 1, 1, 64},    {3, 7, 4, 1, 128},
        {3, 64, 4, 1, 64},  {1, 64, 2, 2, 128}, {1, 65, 4, 1, 128},  {3, 65, 2, 2, 64},
        {3, 129, 4, 1, 64}, {1, 129, 1, 1, 128}, {1, 129, 4, 1, 128},
        {1, 1024, 1, 1, 64}, {1, 1024, 4, 1, 128},
    };
    for (const shape &s : cases)
        if (!quick || s.T <= 129)
            run_case(s, 8, true);
    run_case({2, 70, 4, 2, 64}, 3, false);
    if (quick)
        printf("# digest %016llx\n", (unsigned long long)digest);
    return tap_done();
}
