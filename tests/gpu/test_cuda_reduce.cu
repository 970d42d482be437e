/* The deterministic parallel reductions of the CUDA backend against the CPU
 * ops: the bias gradient (two-stage column sum, cuda/elementwise.cu), the
 * LayerNorm / RMSNorm backward with their fused parameter gradients
 * (cuda/norms.cu) and the token-embedding backward (device sort by token,
 * one block row per token, cuda/elementwise.cu).  The shapes are chosen to
 * break the reductions' tiling: several row chunks with a partial last one,
 * several column tiles with a partial last one, widths that are and are not
 * a multiple of the 16-byte vector, norm widths over 4096 and 8192 (the
 * wide register variant and the unfused path), and token batches with long runs of one token,
 * tokens that never occur, a single token throughout, and more rows than
 * the sort block has threads.
 *
 * Checks (TAP): each gradient against the CPU op within 1e-4 (fp32) or 2e-2
 * (bf16 storage), max |gpu - cpu| / max |cpu| as in test_cuda_ops.cu; the
 * token and position embedding gradients bit for bit against the CPU in
 * both modes (same inputs, same fp32 additions in the same order); the
 * bias gradient's 16-byte path bit-identical to its scalar path (the same
 * input at an offset that breaks the alignment).  Accumulators start
 * non-zero and workspaces are NaN-filled before each call, so a lost +=
 * or an unwritten partial fails.  Last, a "# digest" line hashes the bits
 * of every result: tests/gpu/emu/run_reduce.sh runs the program again with
 * ST_EMU_REVERSE=1 (threads resumed last to first) and requires the same
 * digest.
 *
 * Without a usable GPU the program prints "Bail out!" and exits 1; it is
 * meant for the host emulation (run_reduce.sh) and builds with nvcc too. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cpu_ref.h"
#include "kernels/cpu_ops.h"
#include "ops.h"
#include "tap.h"
#include "gpu_alloc.h"
#include "gpu_check.h"

static const double kTolF32 = 1e-4, kTolBf16 = 2e-2;
static uint64_t g_digest = 0xcbf29ce484222325ull; /* FNV-1a over result bits */

static void digest(const std::vector<float> &v)
{
    const unsigned char *p = (const unsigned char *)v.data();
    for (size_t i = 0; i < v.size() * sizeof(float); i++) {
        g_digest ^= p[i];
        g_digest *= 0x100000001b3ull;
    }
}

/* bf16 bits of f, round to nearest even (finite inputs only here). */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float f_of(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* n random values in [-scale, scale), rounded to bf16 when bf, so the CPU
 * sees exactly what the GPU reads. */
static std::vector<float> rnd(int64_t n, bool bf, float scale = 1.0f)
{
    std::vector<float> v(n);
    for (auto &x : v) {
        x = uniform_pm1() * scale;
        if (bf)
            x = f_of(bf16_of(x));
    }
    return v;
}

/* Host floats -> device as float or bf16 words, starting `skew` elements
 * into the allocation (to break 16-byte alignment on purpose). */
static void *up(const std::vector<float> &h, bool bf, int skew = 0)
{
    const size_t es = bf ? 2 : 4;
    char *d = (char *)dalloc((h.size() + skew) * es);
    if (bf) {
        std::vector<uint16_t> w(h.size());
        for (size_t i = 0; i < h.size(); i++)
            w[i] = bf16_of(h[i]);
        CK(cudaMemcpy(d + skew * es, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(d + skew * es, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    return d + skew * es;
}
static std::vector<float> down(const void *d, int64_t n, bool bf)
{
    std::vector<float> h(n);
    if (bf) {
        std::vector<uint16_t> w(n);
        CK(cudaMemcpy(w.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < n; i++)
            h[i] = f_of(w[i]);
    } else {
        CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    }
    return h;
}
/* A workspace full of NaN (0xff bytes), as a reused scratch may hold. */
static void *nan_ws(size_t bytes)
{
    void *d = dalloc(bytes);
    CK(cudaMemset(d, 0xff, bytes ? bytes : 1));
    return d;
}

static void check(const char *what, bool bf, const char *shape, const std::vector<float> &got,
                  const std::vector<float> &ref)
{
    const double e = rel_err(got.data(), ref.data(), got.size()), tol = bf ? kTolBf16 : kTolF32;
    tap_ok(e <= tol, "%s %s %s: rel err %.3g (tol %.0e)", what, bf ? "bf16" : "fp32", shape, e,
           tol);
    digest(got);
}

static void test_bias(bool bf, int64_t N, int64_t C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    std::vector<float> dout = rnd(N * C, bf), init = rnd(C, false);
    std::vector<float> ref = init;
    st_bias_backward(ref.data(), dout.data(), N, C);
    const size_t wsb = st_cuda_bias_backward_workspace_bytes(N, C);
    float *db = (float *)up(init, false);
    const void *d_al = up(dout, bf), *d_skew = up(dout, bf, 1);
    std::vector<float> got[2];
    for (int k = 0; k < 2; k++) {
        const void *d = k ? d_skew : d_al;
        CK(cudaMemcpy(db, init.data(), C * 4, cudaMemcpyHostToDevice));
        void *w = nan_ws(wsb);
        CK(bf ? st_cuda_bias_backward_bf16(db, (const uint16_t *)d, N, C, w, 0)
              : st_cuda_bias_backward_f32(db, (const float *)d, N, C, w, 0));
        CK(cudaDeviceSynchronize());
        got[k] = down(db, C, false);
    }
    check("bias_backward", bf, shape, got[0], ref);
    tap_ok(!memcmp(got[0].data(), got[1].data(), C * 4),
           "bias_backward %s %s: aligned (16-byte loads where C allows) and misaligned "
           "(scalar loads) inputs give identical bits", bf ? "bf16" : "fp32", shape);
    free_all();
}

/* sep: dx starts as NaN and the residual's gradient comes in as dres (the
 * block's use, dx = dres + ...); otherwise dx accumulates (dres NULL). */
static void test_norm(bool bf, bool layer, int64_t N, int64_t C, bool sep)
{
    char shape[80];
    const char *name = layer ? "layernorm" : "rmsnorm";
    snprintf(shape, sizeof shape, "N=%lld C=%lld%s", (long long)N, (long long)C,
             sep ? " dres" : "");
    std::vector<float> x = rnd(N * C, bf, 2.0f), w = rnd(C, bf), b = rnd(C, bf);
    for (int64_t i = 0; i < N * C; i++) /* rows with a mean to subtract */
        x[i] = bf ? f_of(bf16_of(x[i] + 0.5f)) : x[i] + 0.5f;
    std::vector<float> out(N * C), mean(N), rstd(N);
    if (layer)
        st_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                             b.data(), N, C, 1e-5f);
    else
        st_rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    std::vector<float> dout = rnd(N * C, bf), dx0 = rnd(N * C, bf), dw0 = rnd(C, false),
                       db0 = rnd(C, false);
    std::vector<float> rdx = dx0, rdw = dw0, rdb = db0;
    if (layer)
        st_layernorm_backward(rdx.data(), rdw.data(), rdb.data(), dout.data(), x.data(),
                              w.data(), mean.data(), rstd.data(), N, C);
    else
        st_rmsnorm_backward(rdx.data(), rdw.data(), dout.data(), x.data(), w.data(),
                            rstd.data(), N, C);
    void *ddx = sep ? nan_ws((bf ? 2 : 4) * (size_t)(N * C)) : up(dx0, bf);
    const void *dres = sep ? up(dx0, bf) : nullptr;
    const void *ddout = up(dout, bf), *dxx = up(x, bf), *dww = up(w, bf);
    float *ddw = (float *)up(dw0, false), *ddb = (float *)up(db0, false);
    const float *dmean = (const float *)up(mean, false), *drstd = (const float *)up(rstd, false);
    void *ws = nan_ws(st_cuda_norm_backward_workspace_bytes(N, C));
    if (layer)
        CK(bf ? st_cuda_layernorm_backward_bf16((uint16_t *)ddx, (const uint16_t *)dres, ddw,
                                                ddb, (const uint16_t *)ddout,
                                                (const uint16_t *)dxx, (const uint16_t *)dww,
                                                dmean, drstd, N, C, ws, 0)
              : st_cuda_layernorm_backward_f32((float *)ddx, (const float *)dres, ddw, ddb,
                                               (const float *)ddout, (const float *)dxx,
                                               (const float *)dww, dmean, drstd, N, C, ws, 0));
    else
        CK(bf ? st_cuda_rmsnorm_backward_bf16((uint16_t *)ddx, (const uint16_t *)dres, ddw,
                                              (const uint16_t *)ddout, (const uint16_t *)dxx,
                                              (const uint16_t *)dww, drstd, N, C, ws, 0)
              : st_cuda_rmsnorm_backward_f32((float *)ddx, (const float *)dres, ddw,
                                             (const float *)ddout, (const float *)dxx,
                                             (const float *)dww, drstd, N, C, ws, 0));
    CK(cudaDeviceSynchronize());
    char what[64];
    snprintf(what, sizeof what, "%s_backward dx", name);
    check(what, bf, shape, down(ddx, N * C, bf), rdx);
    if (sep) {
        snprintf(what, sizeof what, "%s_backward dres", name);
        check(what, bf, shape, down(dres, N * C, bf), dx0); /* read, not written */
    }
    snprintf(what, sizeof what, "%s_backward dw", name);
    check(what, bf, shape, down(ddw, C, false), rdw);
    if (layer) {
        snprintf(what, sizeof what, "%s_backward db", name);
        check(what, bf, shape, down(ddb, C, false), rdb);
    }
    free_all();
}

/* kind 0: half the rows one token, the rest spread over tokens < V/2 (the
 * upper half never occurs); 1: every row the same token; 2: tokens cycle. */
static void test_embed(bool bf, bool gpt2, int64_t B, int64_t T, int64_t C, int64_t V,
                       int kind)
{
    char shape[96];
    const int64_t N = B * T;
    snprintf(shape, sizeof shape, "%s B=%lld T=%lld C=%lld V=%lld tokens=%s",
             gpt2 ? "gpt2" : "llama", (long long)B, (long long)T, (long long)C, (long long)V,
             kind == 0 ? "skewed" : kind == 1 ? "one" : "cyclic");
    std::vector<int32_t> tok(N);
    for (int64_t r = 0; r < N; r++) {
        const uint32_t u = (uint32_t)((uniform_pm1() + 1.0f) * 1e6f);
        tok[r] = kind == 1 ? (int32_t)(V - 1)
                 : kind == 2 ? (int32_t)(r % 7)
                 : (u % 2) ? 3 : (int32_t)(u % (uint32_t)(V / 2));
    }
    std::vector<float> dout = rnd(N * C, bf), wte0 = rnd(V * C, false), wpe0 = rnd(T * C, false);
    std::vector<float> rwte = wte0, rwpe = wpe0;
    if (ref_embed_backward(rwte.data(), gpt2 ? rwpe.data() : NULL, tok.data(), dout.data(), B,
                           T, C, V))
        bail("ref_embed_backward", cudaErrorMemoryAllocation);
    int32_t *dtok = (int32_t *)dalloc(N * 4);
    CK(cudaMemcpy(dtok, tok.data(), N * 4, cudaMemcpyHostToDevice));
    float *dwte = (float *)up(wte0, false), *dwpe = (float *)up(wpe0, false);
    const void *dd = up(dout, bf);
    void *ws = nan_ws(st_cuda_embed_backward_workspace_bytes(N));
    CK(bf ? st_cuda_embed_backward_bf16(dwte, gpt2 ? dwpe : NULL, dtok, (const uint16_t *)dd,
                                        B, T, C, ws, 0)
          : st_cuda_embed_backward_f32(dwte, gpt2 ? dwpe : NULL, dtok, (const float *)dd, B,
                                       T, C, ws, 0));
    CK(cudaDeviceSynchronize());
    std::vector<float> gw = down(dwte, V * C, false), gp = down(dwpe, T * C, false);
    int64_t first = -1;
    for (int64_t i = 0; i < V * C && first < 0; i++)
        if (memcmp(&gw[i], &rwte[i], 4))
            first = i;
    tap_ok(first < 0, "embed_backward dwte %s %s: bit-identical to the CPU%s",
           bf ? "bf16" : "fp32", shape, first < 0 ? "" : " (FAILED)");
    if (first >= 0)
        tap_diag("first difference at token %lld column %lld: gpu %.9g cpu %.9g",
                 (long long)(first / C), (long long)(first % C), gw[first], rwte[first]);
    tap_ok(!memcmp(gp.data(), rwpe.data(), T * C * 4),
           "embed_backward dwpe %s %s: bit-identical to the CPU (untouched for llama)",
           bf ? "bf16" : "fp32", shape);
    digest(gw);
    digest(gp);
    free_all();
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("Bail out! no usable CUDA GPU\n");
        return 1;
    }
    for (int bf = 0; bf < 2; bf++) {
        /* 200 rows: 4 chunks of 64 (last 8 rows); 300 columns: 3 fp32 tiles of
         * 128 (last 44), 2 bf16 tiles of 256, 300 % 8 != 0 (bf16 scalar). */
        test_bias(bf, 200, 300);
        test_bias(bf, 130, 264); /* 264 % 8 == 0: the bf16 16-byte path */
        test_bias(bf, 1, 37);    /* one row, scalar everywhere */
        for (int layer = 1; layer >= 0; layer--) {
            test_norm(bf, layer, 200, 300, false); /* 13 chunks of 16 (last 8) */
            test_norm(bf, layer, 40, 5000, false); /* > 4096 columns: 32 per thread */
            test_norm(bf, layer, 33, 9000, false); /* > 8192 columns: the unfused path */
            test_norm(bf, layer, 5, 64, false);    /* one partial chunk */
            test_norm(bf, layer, 200, 300, true);  /* dx = dres + ..., fused path */
            test_norm(bf, layer, 33, 9000, true);  /* and unfused */
        }
        test_embed(bf, true, 3, 70, 300, 50, 0);   /* 2 column blocks of 256 */
        test_embed(bf, false, 4, 300, 40, 64, 0);  /* 1200 rows > 1024 sort threads */
        test_embed(bf, true, 2, 33, 64, 16, 1);    /* one run of 66 rows */
        test_embed(bf, false, 1, 1, 8, 4, 2);      /* one row */
    }
    printf("# digest %016llx\n", (unsigned long long)g_digest);
    return tap_done();
}
