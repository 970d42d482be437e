/* GPU test of the fused attention kernels (cuda/attention.cu) against the
 * CPU reference st_attention_forward / st_attention_backward from
 * libshardtrain.a, on random inputs, in both storage modes.  TAP output:
 * one line per op x mode x shape with the error, plus checks that padding
 * columns were left alone, that the backward is bit-for-bit repeatable,
 * and that unsupported arguments are refused; last, rough timings at
 * GPT-2 and Llama sizes as TAP comments (informational, never a failure).
 *
 * Error measure: max |gpu - cpu| / max |cpu| over the tensor (relative to
 * the largest reference element, so elements near zero do not blow it
 * up); NaN anywhere fails.
 *
 * Tolerances.  fp32 mode: 1e-4.  Both sides do fp32 arithmetic on the same
 * inputs; they differ only in summation order (online softmax with
 * rescaling vs. the CPU's two passes with a double denominator) and in
 * nvcc contracting a*b+c into FMA.  Each output is a sum of at most
 * group*T <= a few thousand terms in these shapes, so the rounding
 * difference is of order sqrt(n) * 6e-8 ~ 1e-6 typical, far below 1e-4.
 * bf16 mode: inputs are rounded to bf16 on the host first, so CPU and GPU
 * see identical values, and the CPU backward is given the bf16-rounded
 * forward output (what the GPU stores); the remaining difference is the
 * final rounding of each stored output to bf16 (relative 2^-9 ~ 2e-3), so
 * 2e-2 leaves a wide margin.  lse is fp32 in both modes: 1e-4 in both.
 *
 * Without a usable CUDA device the program prints one "Bail out!" line and
 * exits 1 (a failure, not a skip: `make check-gpu` is only run where a GPU
 * is expected). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "attention.h"
#include "kernels/cpu_ops.h" /* C, with its own extern "C" guard */
#include "gpu_check.h" /* uniform_pm1 */
#include "tap.h"

#define CUDA_OK(call)                                                                   \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            printf("Bail out! %s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
                   cudaGetErrorString(err_));                                           \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

enum storage { F32, BF16 };
static const char *mode_name(storage m) { return m == F32 ? "fp32" : "bf16"; }

struct shape {
    int64_t B, T, H, KV, hd;
};

static void fill_random(std::vector<float> &x, float amplitude, storage m)
{
    for (float &e : x)
        e = amplitude * uniform_pm1();
    if (m == BF16) /* both sides then start from identical values */
        st_round_bf16(x.data(), x.data(), (int64_t)x.size());
}

/* A device buffer of n elements in the mode's storage type, poisoned with
 * 0xff bytes (NaN in both fp32 and bf16) so unwritten elements fail. */
struct dbuf {
    void *p = nullptr;
    size_t n = 0, esz = 0;
    dbuf(size_t n_, size_t esz_) : n(n_), esz(esz_)
    {
        CUDA_OK(cudaMalloc(&p, n * esz));
        CUDA_OK(cudaMemset(p, 0xff, n * esz));
    }
    ~dbuf() { cudaFree(p); }
    dbuf(const dbuf &) = delete;
    dbuf &operator=(const dbuf &) = delete;
    float *f() { return static_cast<float *>(p); }
    uint16_t *h() { return static_cast<uint16_t *>(p); }
};

static size_t elem_size(storage m) { return m == F32 ? sizeof(float) : sizeof(uint16_t); }

static void upload(dbuf &d, const std::vector<float> &x, storage m)
{
    if (m == F32) {
        CUDA_OK(cudaMemcpy(d.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
        return;
    }
    std::vector<uint16_t> packed(x.size());
    st_pack_bf16(packed.data(), x.data(), (int64_t)x.size());
    CUDA_OK(cudaMemcpy(d.p, packed.data(), x.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
}

/* Raw bytes of a device buffer (for the poison and repeatability checks). */
static std::vector<unsigned char> download_raw(const dbuf &d)
{
    std::vector<unsigned char> raw(d.n * d.esz);
    CUDA_OK(cudaMemcpy(raw.data(), d.p, raw.size(), cudaMemcpyDeviceToHost));
    return raw;
}

static std::vector<float> to_float(const std::vector<unsigned char> &raw, storage m)
{
    std::vector<float> x(raw.size() / elem_size(m));
    if (m == F32)
        memcpy(x.data(), raw.data(), raw.size());
    else
        st_unpack_bf16(x.data(), reinterpret_cast<const uint16_t *>(raw.data()), (int64_t)x.size());
    return x;
}

/* max |a - ref| / max |ref| over rows x [col0, col0 + cols) at stride ld. */
static double rel_err(const std::vector<float> &a, const std::vector<float> &ref,
                      int64_t rows, int64_t ld, int64_t col0, int64_t cols)
{
    double max_diff = 0.0, max_ref = 0.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = col0; c < col0 + cols; c++) {
            const double x = a[r * ld + c], y = ref[r * ld + c];
            if (!isfinite(x))
                return INFINITY;
            max_diff = fmax(max_diff, fabs(x - y));
            max_ref = fmax(max_ref, fabs(y));
        }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

/* max |a| over rows x [col0, col0 + cols) at stride ld; NaN gives inf. */
static double max_abs(const std::vector<float> &a, int64_t rows, int64_t ld, int64_t col0,
                      int64_t cols)
{
    double m = 0.0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = col0; c < col0 + cols; c++) {
            if (!isfinite(a[r * ld + c]))
                return INFINITY;
            m = fmax(m, fabs(a[r * ld + c]));
        }
    return m;
}

/* Columns [col0, col1) of every row still hold the 0xff poison. */
static bool untouched(const std::vector<unsigned char> &raw, storage m, int64_t rows,
                      int64_t ld, int64_t col0, int64_t col1)
{
    const size_t esz = elem_size(m);
    for (int64_t r = 0; r < rows; r++)
        for (size_t byte = (size_t)(r * ld + col0) * esz; byte < (size_t)(r * ld + col1) * esz; byte++)
            if (raw[byte] != 0xff)
                return false;
    return true;
}

/* One shape in one mode.  q, k, v live in one fused row [q | k | v | pad]
 * (as the model's qkv projection writes them) and dq, dk, dv in a second
 * one of the same layout; out has padding columns too, so every row stride
 * differs from the row width. */
static void run_case(const shape &s, storage m)
{
    const int64_t N = s.B * s.T, hd = s.hd, pad = 8;
    const int64_t qcols = s.H * hd, kvcols = s.KV * hd;
    const int64_t W = qcols + 2 * kvcols + pad;
    const int64_t kcol = qcols, vcol = qcols + kvcols;
    const int64_t ldo = qcols + 16, lddo = qcols;
    const int64_t nlse = s.B * s.H * s.T;
    const double tol = m == F32 ? 1e-4 : 2e-2, tol_lse = 1e-4;
    char tag[128];
    snprintf(tag, sizeof tag, "%s B=%lld T=%lld H=%lld KV=%lld hd=%lld", mode_name(m),
             (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.KV, (long long)hd);

    /* ---- forward ---- */
    std::vector<float> qkv((size_t)(N * W));
    fill_random(qkv, 2.0f, m);
    std::vector<float> out_ref((size_t)(N * ldo), 0.0f), lse_ref((size_t)nlse);
    st_attention_forward(out_ref.data(), ldo, lse_ref.data(), qkv.data(), W,
                         qkv.data() + kcol, W, qkv.data() + vcol, W,
                         s.B, s.T, s.H, s.KV, hd);

    const size_t esz = elem_size(m);
    dbuf d_qkv((size_t)(N * W), esz), d_out((size_t)(N * ldo), esz);
    dbuf d_lse((size_t)nlse, sizeof(float));
    upload(d_qkv, qkv, m);
    int rc;
    if (m == F32)
        rc = st_cuda_attention_forward_f32(d_out.f(), ldo, d_lse.f(), d_qkv.f(), W,
                                           d_qkv.f() + kcol, W, d_qkv.f() + vcol, W,
                                           s.B, s.T, s.H, s.KV, hd, 0);
    else
        rc = st_cuda_attention_forward_bf16(d_out.h(), ldo, d_lse.f(), d_qkv.h(), W,
                                            d_qkv.h() + kcol, W, d_qkv.h() + vcol, W,
                                            s.B, s.T, s.H, s.KV, hd, 0);
    CUDA_OK(cudaDeviceSynchronize());
    tap_ok(rc == 0, "forward %s: returned %d", tag, rc);
    const std::vector<unsigned char> out_raw = download_raw(d_out);
    const std::vector<float> out_gpu = to_float(out_raw, m);
    std::vector<float> lse_gpu((size_t)nlse);
    CUDA_OK(cudaMemcpy(lse_gpu.data(), d_lse.p, (size_t)nlse * sizeof(float), cudaMemcpyDeviceToHost));
    double e = rel_err(out_gpu, out_ref, N, ldo, 0, qcols);
    tap_ok(e <= tol, "forward out %s: rel err %.3g (tol %.0e)", tag, e, tol);
    e = rel_err(lse_gpu, lse_ref, 1, nlse, 0, nlse);
    tap_ok(e <= tol_lse, "forward lse %s: rel err %.3g (tol %.0e)", tag, e, tol_lse);
    tap_ok(untouched(out_raw, m, N, ldo, qcols, ldo), "forward %s: out padding untouched", tag);

    /* ---- backward: from the reference out/lse, so it is tested alone ---- */
    std::vector<float> dout((size_t)(N * lddo));
    fill_random(dout, 1.0f, m);
    std::vector<float> out_in = out_ref;
    if (m == BF16) /* what the GPU forward would have stored */
        st_round_bf16(out_in.data(), out_in.data(), (int64_t)out_in.size());
    std::vector<float> dqkv_ref((size_t)(N * W), 0.0f);
    st_attention_backward(dqkv_ref.data(), W, dqkv_ref.data() + kcol, W, dqkv_ref.data() + vcol, W,
                          dout.data(), lddo, out_in.data(), ldo, lse_ref.data(),
                          qkv.data(), W, qkv.data() + kcol, W, qkv.data() + vcol, W,
                          s.B, s.T, s.H, s.KV, hd);

    dbuf d_dout((size_t)(N * lddo), esz);
    dbuf d_ws(st_cuda_attention_backward_workspace_bytes(s.B, s.H, s.T), 1);
    upload(d_dout, dout, m);
    upload(d_out, out_in, m);
    CUDA_OK(cudaMemcpy(d_lse.p, lse_ref.data(), (size_t)nlse * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<unsigned char> runs[2];
    for (int run = 0; run < 2; run++) {
        dbuf d_dqkv((size_t)(N * W), esz); /* fresh poison each run */
        if (m == F32)
            rc = st_cuda_attention_backward_f32(
                d_dqkv.f(), W, d_dqkv.f() + kcol, W, d_dqkv.f() + vcol, W, d_dout.f(), lddo,
                d_out.f(), ldo, d_lse.f(), d_qkv.f(), W, d_qkv.f() + kcol, W, d_qkv.f() + vcol, W,
                s.B, s.T, s.H, s.KV, hd, d_ws.p, 0);
        else
            rc = st_cuda_attention_backward_bf16(
                d_dqkv.h(), W, d_dqkv.h() + kcol, W, d_dqkv.h() + vcol, W, d_dout.h(), lddo,
                d_out.h(), ldo, d_lse.f(), d_qkv.h(), W, d_qkv.h() + kcol, W, d_qkv.h() + vcol, W,
                s.B, s.T, s.H, s.KV, hd, d_ws.p, 0);
        CUDA_OK(cudaDeviceSynchronize());
        if (run == 0)
            tap_ok(rc == 0, "backward %s: returned %d", tag, rc);
        runs[run] = download_raw(d_dqkv);
    }
    const std::vector<float> dqkv_gpu = to_float(runs[0], m);
    if (s.T == 1) {
        /* One key: the softmax is constant 1, so dq and dk are exactly 0 and
         * both sides hold only rounding noise of dp - D (which FMA
         * contraction on the GPU changes): a relative error is meaningless,
         * so bound the magnitude instead (noise is ~1e-6 here). */
        e = max_abs(dqkv_gpu, N, W, 0, qcols);
        tap_ok(e <= tol, "backward dq %s: max |dq| %.3g, exactly 0 (bound %.0e)", tag, e, tol);
        e = max_abs(dqkv_gpu, N, W, kcol, kvcols);
        tap_ok(e <= tol, "backward dk %s: max |dk| %.3g, exactly 0 (bound %.0e)", tag, e, tol);
    } else {
        e = rel_err(dqkv_gpu, dqkv_ref, N, W, 0, qcols);
        tap_ok(e <= tol, "backward dq %s: rel err %.3g (tol %.0e)", tag, e, tol);
        e = rel_err(dqkv_gpu, dqkv_ref, N, W, kcol, kvcols);
        tap_ok(e <= tol, "backward dk %s: rel err %.3g (tol %.0e)", tag, e, tol);
    }
    e = rel_err(dqkv_gpu, dqkv_ref, N, W, vcol, kvcols);
    tap_ok(e <= tol, "backward dv %s: rel err %.3g (tol %.0e)", tag, e, tol);
    tap_ok(untouched(runs[0], m, N, W, W - pad, W), "backward %s: padding untouched", tag);
    tap_ok(runs[0] == runs[1], "backward %s: two runs bit-identical", tag);
}

/* Arguments the implementation must refuse without launching anything. */
static void check_refusals(void)
{
    float *p = nullptr;
    CUDA_OK(cudaMalloc(&p, 1 << 20));
    int rc = st_cuda_attention_forward_f32(p, 96, p, p, 96, p, 96, p, 96, 1, 4, 1, 1, 96, 0);
    tap_ok(rc == ST_CUDA_ATTN_EINVAL, "forward refuses hd=96 (rc %d)", rc);
    rc = st_cuda_attention_forward_f32(p, 192, p, p, 192, p, 192, p, 192, 1, 4, 3, 2, 64, 0);
    tap_ok(rc == ST_CUDA_ATTN_EINVAL, "forward refuses H %% KV != 0 (rc %d)", rc);
    rc = st_cuda_attention_forward_f32(p, 64, p, p, 32, p, 64, p, 64, 1, 4, 1, 1, 64, 0);
    tap_ok(rc == ST_CUDA_ATTN_EINVAL, "forward refuses ldq < H*hd (rc %d)", rc);
    rc = st_cuda_attention_backward_f32(p, 64, p, 64, p, 64, p, 64, p, 64, p, p, 64, p, 64, p, 64,
                                        1, 4, 1, 1, 64, nullptr, 0);
    tap_ok(rc == ST_CUDA_ATTN_EINVAL, "backward refuses a NULL workspace (rc %d)", rc);
    CUDA_OK(cudaFree(p));
}

/* Rough speed, reported as TAP comments (never a failure): mean of 10 runs
 * after 2 warm-up runs, timed with events, on inputs of random values. */
static void time_case(const shape &s, storage m)
{
    const int64_t N = s.B * s.T, hd = s.hd;
    const int64_t W = (s.H + 2 * s.KV) * hd, kcol = s.H * hd, vcol = (s.H + s.KV) * hd;
    const int64_t ldo = s.H * hd;
    const size_t esz = elem_size(m);
    std::vector<float> host((size_t)(N * W));
    fill_random(host, 1.0f, m);
    dbuf d_qkv((size_t)(N * W), esz), d_dqkv((size_t)(N * W), esz);
    dbuf d_out((size_t)(N * ldo), esz), d_dout((size_t)(N * ldo), esz);
    dbuf d_lse((size_t)(s.B * s.H * s.T), sizeof(float));
    dbuf d_ws(st_cuda_attention_backward_workspace_bytes(s.B, s.H, s.T), 1);
    upload(d_qkv, host, m);
    host.resize((size_t)(N * ldo));
    fill_random(host, 1.0f, m);
    upload(d_dout, host, m);
    cudaEvent_t ev[3];
    for (cudaEvent_t &e : ev)
        CUDA_OK(cudaEventCreate(&e));
    float fwd_ms = 0.0f, bwd_ms = 0.0f;
    int rc = 0;
    for (int it = 0; it < 12 && rc == 0; it++) {
        CUDA_OK(cudaEventRecord(ev[0], 0));
        if (m == F32)
            rc = st_cuda_attention_forward_f32(d_out.f(), ldo, d_lse.f(), d_qkv.f(), W,
                                               d_qkv.f() + kcol, W, d_qkv.f() + vcol, W,
                                               s.B, s.T, s.H, s.KV, hd, 0);
        else
            rc = st_cuda_attention_forward_bf16(d_out.h(), ldo, d_lse.f(), d_qkv.h(), W,
                                                d_qkv.h() + kcol, W, d_qkv.h() + vcol, W,
                                                s.B, s.T, s.H, s.KV, hd, 0);
        CUDA_OK(cudaEventRecord(ev[1], 0));
        if (rc == 0 && m == F32)
            rc = st_cuda_attention_backward_f32(
                d_dqkv.f(), W, d_dqkv.f() + kcol, W, d_dqkv.f() + vcol, W, d_dout.f(), ldo,
                d_out.f(), ldo, d_lse.f(), d_qkv.f(), W, d_qkv.f() + kcol, W, d_qkv.f() + vcol, W,
                s.B, s.T, s.H, s.KV, hd, d_ws.p, 0);
        else if (rc == 0)
            rc = st_cuda_attention_backward_bf16(
                d_dqkv.h(), W, d_dqkv.h() + kcol, W, d_dqkv.h() + vcol, W, d_dout.h(), ldo,
                d_out.h(), ldo, d_lse.f(), d_qkv.h(), W, d_qkv.h() + kcol, W, d_qkv.h() + vcol, W,
                s.B, s.T, s.H, s.KV, hd, d_ws.p, 0);
        CUDA_OK(cudaEventRecord(ev[2], 0));
        CUDA_OK(cudaEventSynchronize(ev[2]));
        float f, b;
        CUDA_OK(cudaEventElapsedTime(&f, ev[0], ev[1]));
        CUDA_OK(cudaEventElapsedTime(&b, ev[1], ev[2]));
        if (it >= 2) {
            fwd_ms += f / 10.0f;
            bwd_ms += b / 10.0f;
        }
    }
    for (cudaEvent_t &e : ev)
        CUDA_OK(cudaEventDestroy(e));
    if (rc != 0)
        tap_diag("timing %s: a call returned %d", mode_name(m), rc);
    else
        tap_diag("timing %s B=%lld T=%lld H=%lld KV=%lld hd=%lld: forward %.3f ms, backward %.3f ms",
                 mode_name(m), (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.KV,
                 (long long)hd, fwd_ms, bwd_ms);
}

int main(void)
{
    int n_dev = 0;
    const cudaError_t err = cudaGetDeviceCount(&n_dev);
    if (err != cudaSuccess || n_dev == 0) {
        printf("Bail out! no usable CUDA device (%s): the GPU tests cannot run here\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 1;
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    tap_diag("device 0: %s, compute capability %d.%d", prop.name, prop.major, prop.minor);

    /* Tiles are 16 query rows (8 for dQ at hd=128), 32 keys, 16 or 8 keys
     * for dK/dV: the T values straddle all of these. */
    static const shape shapes[] = {
        {1, 1, 1, 1, 64},    /* a single token */
        {3, 1, 4, 2, 128},   /* single tokens, several batches, GQA */
        {2, 37, 4, 2, 64},   /* GQA, T not a multiple of any tile */
        {1, 128, 12, 12, 64}, /* GPT-2 124M heads, T a multiple of every tile */
        {3, 50, 6, 1, 64},   /* multi-query */
        {2, 200, 3, 3, 64},
        {1, 64, 4, 4, 128},
        {2, 129, 8, 2, 128}, /* Llama-like, one row past a tile */
        {1, 333, 4, 2, 128}, /* several key tiles, ragged tail */
    };
    for (const shape &s : shapes)
        for (storage m : {F32, BF16})
            run_case(s, m);
    check_refusals();
    /* Timing only on a real sm_80+ device (the host emulation in
     * tests/gpu/emu reports compute capability 0 and would take hours). */
    if (prop.major >= 8) {
        static const shape bench[] = {
            {8, 1024, 12, 12, 64}, /* GPT-2 124M */
            {2, 2048, 32, 8, 128}, /* Llama-style GQA */
        };
        for (const shape &s : bench)
            for (storage m : {F32, BF16})
                time_case(s, m);
    }
    return tap_done();
}
