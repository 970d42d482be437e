/* The deterministic parallel reductions of the CUDA backend against the CPU
 * ops.  The bias gradient (two-stage column sum, cuda/elementwise.cu), the
 * LayerNorm / RMSNorm backward with their fused parameter gradients
 * (cuda/norms.cu) and the token-embedding backward (device sort by token,
 * one block row per token, cuda/elementwise.cu).  The shapes are chosen to
 * break the reductions' tiling: several row chunks with a partial last
 * one, several column tiles with a partial last one, widths that are and
 * are not a multiple of the 16-byte vector, norm widths over 4096 and 8192
 * (the wide register variant and the unfused path), and token batches with
 * long runs of one token, tokens that never occur, a single token
 * throughout, and more rows than the sort block has threads.  With them,
 * the forwards of the same kernel files (the norms, the embedding) on the
 * widths of their 16-byte paths; the other elementwise kernels' paths are
 * test_cuda_vec_paths.cu's.
 *
 * Checks (TAP): each result against the CPU op within 1e-4 (fp32) or 2e-2
 * (bf16 storage), max |gpu - cpu| / max |cpu| as in test_cuda_ops.cu; the
 * token and position embedding gradients bit for bit against the CPU (same
 * inputs, same fp32 operations in the same order); every vectorised op run
 * on aligned operands and again skewed by one element (kernel_check.h's
 * both_paths).  Accumulators start non-zero and workspaces are NaN-filled
 * before each call, so a lost += or an unwritten partial fails.  Last, a
 * "# digest" line hashes the bits of every result: tests/gpu/emu/
 * run_reduce.sh runs the program again with ST_EMU_REVERSE=1 (threads
 * resumed last to first) and requires the same digest.
 *
 * The sum of squares of the gradient norm (cuda/reduce.cu) against the
 * host's double sum, its 16-byte and scalar paths bit for bit.
 *
 * Last, the cross-entropy (cuda/xent.cu), a row reduction whose row cache in
 * shared memory must hold exactly what its second pass reads.
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
#include "kernel_check.h"

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

/* A norm test's inputs, x with rows that have a mean to subtract, and the
 * CPU forward's out, mean (LayerNorm) and rstd. */
struct NormCase {
    std::vector<float> x, w, b, out, mean, rstd;
    NormCase(bool bf, bool layer, int64_t N, int64_t C)
        : x(rnd(N * C, bf, 2.0f)), w(rnd(C, bf)), b(rnd(C, bf)), out(N * C), mean(N), rstd(N)
    {
        for (int64_t i = 0; i < N * C; i++)
            x[i] = bf ? f_of(bf16_of(x[i] + 0.5f)) : x[i] + 0.5f;
        if (layer)
            st_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                 b.data(), N, C, 1e-5f);
        else
            st_rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    }
};

/* The forward (out, mean, rstd) against the CPU, both paths. */
static void test_norm_forward(bool bf, bool layer, int64_t N, int64_t C)
{
    char shape[64];
    const char *name = layer ? "layernorm_forward" : "rmsnorm_forward";
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    NormCase nc(bf, layer, N, C);
    const std::vector<float> &x = nc.x, &w = nc.w, &b = nc.b, &out = nc.out, &mean = nc.mean,
                             &rstd = nc.rstd;
    std::vector<float> got = both_paths(name, bf, shape, vec_width_ok(bf, C), [&](int k) {
        void *o = nan_buf(N * C, bf, k);
        float *m = (float *)nan_buf(N, false, 0), *r = (float *)nan_buf(N, false, 0);
        const void *dx = up(x, bf, k), *dw = up(w, bf, k), *db = up(b, bf, k);
        if (layer)
            CK(bf ? st_cuda_layernorm_forward_bf16((uint16_t *)o, m, r, (const uint16_t *)dx,
                                                   (const uint16_t *)dw, (const uint16_t *)db,
                                                   N, C, 1e-5f, 0)
                  : st_cuda_layernorm_forward_f32((float *)o, m, r, (const float *)dx,
                                                  (const float *)dw, (const float *)db, N, C,
                                                  1e-5f, 0));
        else
            CK(bf ? st_cuda_rmsnorm_forward_bf16((uint16_t *)o, r, (const uint16_t *)dx,
                                                 (const uint16_t *)dw, N, C, 1e-5f, 0)
                  : st_cuda_rmsnorm_forward_f32((float *)o, r, (const float *)dx,
                                                (const float *)dw, N, C, 1e-5f, 0));
        CK(cudaDeviceSynchronize());
        return cat(cat(down(o, N * C, bf), layer ? down(m, N, false) : mean),
                   down(r, N, false));
    });
    check(name, bf, shape, part(got, 0, N * C), out);
    check(name, false, shape, part(got, N * C + N, N), rstd); /* rstd: fp32 either way */
    free_all();
}

/* sep: dx starts as NaN and the residual's gradient comes in as dres (the
 * block's use, dx = dres + ...); otherwise dx accumulates (dres NULL).  Run
 * aligned and skewed (both_paths); the workspace stays aligned. */
static void test_norm(bool bf, bool layer, int64_t N, int64_t C, bool sep)
{
    char shape[80];
    const char *name = layer ? "layernorm" : "rmsnorm";
    snprintf(shape, sizeof shape, "N=%lld C=%lld%s", (long long)N, (long long)C,
             sep ? " dres" : "");
    NormCase nc(bf, layer, N, C);
    const std::vector<float> &x = nc.x, &w = nc.w, &mean = nc.mean, &rstd = nc.rstd;
    std::vector<float> dout = rnd(N * C, bf), dx0 = rnd(N * C, bf), dw0 = rnd(C, false),
                       db0 = rnd(C, false);
    std::vector<float> rdx = dx0, rdw = dw0, rdb = db0;
    if (layer)
        st_layernorm_backward(rdx.data(), rdw.data(), rdb.data(), dout.data(), x.data(),
                              w.data(), mean.data(), rstd.data(), N, C);
    else
        st_rmsnorm_backward(rdx.data(), rdw.data(), dout.data(), x.data(), w.data(),
                            rstd.data(), N, C);
    char what[64];
    snprintf(what, sizeof what, "%s_backward", name);
    /* Results: dx, dw, db, then dres (read, must come back unchanged). */
    std::vector<float> got = both_paths(what, bf, shape, vec_width_ok(bf, C), [&](int k) {
        void *ddx = sep ? nan_buf(N * C, bf, k) : up(dx0, bf, k);
        const void *dres = sep ? up(dx0, bf, k) : nullptr;
        const void *ddout = up(dout, bf, k), *dxx = up(x, bf, k), *dww = up(w, bf, k);
        float *ddw = (float *)up(dw0, false), *ddb = (float *)up(db0, false);
        const float *dmean = (const float *)up(mean, false);
        const float *drstd = (const float *)up(rstd, false);
        void *ws = nan_ws(st_cuda_norm_backward_workspace_bytes(N, C));
        if (layer)
            CK(bf ? st_cuda_layernorm_backward_bf16(
                        (uint16_t *)ddx, (const uint16_t *)dres, ddw, ddb,
                        (const uint16_t *)ddout, (const uint16_t *)dxx, (const uint16_t *)dww,
                        dmean, drstd, N, C, ws, 0)
                  : st_cuda_layernorm_backward_f32((float *)ddx, (const float *)dres, ddw, ddb,
                                                   (const float *)ddout, (const float *)dxx,
                                                   (const float *)dww, dmean, drstd, N, C, ws,
                                                   0));
        else
            CK(bf ? st_cuda_rmsnorm_backward_bf16(
                        (uint16_t *)ddx, (const uint16_t *)dres, ddw, (const uint16_t *)ddout,
                        (const uint16_t *)dxx, (const uint16_t *)dww, drstd, N, C, ws, 0)
                  : st_cuda_rmsnorm_backward_f32((float *)ddx, (const float *)dres, ddw,
                                                 (const float *)ddout, (const float *)dxx,
                                                 (const float *)dww, drstd, N, C, ws, 0));
        CK(cudaDeviceSynchronize());
        std::vector<float> r = cat(cat(down(ddx, N * C, bf), down(ddw, C, false)),
                                   down(ddb, C, false));
        return sep ? cat(r, down(dres, N * C, bf)) : r;
    });
    snprintf(what, sizeof what, "%s_backward dx", name);
    check(what, bf, shape, part(got, 0, N * C), rdx);
    if (sep) {
        snprintf(what, sizeof what, "%s_backward dres", name);
        check(what, bf, shape, part(got, N * C + 2 * C, N * C), dx0);
    }
    snprintf(what, sizeof what, "%s_backward dw", name);
    check(what, bf, shape, part(got, N * C, C), rdw);
    if (layer) {
        snprintf(what, sizeof what, "%s_backward db", name);
        check(what, bf, shape, part(got, N * C + C, C), rdb);
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
    std::vector<float> dout = rnd(N * C, bf), wte0 = rnd(V * C, false),
                       wpe0 = rnd(T * C, false);
    std::vector<float> rwte = wte0, rwpe = wpe0;
    if (ref_embed_backward(rwte.data(), gpt2 ? rwpe.data() : NULL, tok.data(), dout.data(), B,
                           T, C, V))
        bail("ref_embed_backward", cudaErrorMemoryAllocation);
    int32_t *dtok = (int32_t *)dalloc(N * 4);
    CK(cudaMemcpy(dtok, tok.data(), N * 4, cudaMemcpyHostToDevice));
    /* Results: dwte, then dwpe. */
    std::vector<float> got = both_paths("embed_backward", bf, shape, vec_width_ok(bf, C),
                                        [&](int k) {
        float *dwte = (float *)up(wte0, false, k), *dwpe = (float *)up(wpe0, false, k);
        const void *dd = up(dout, bf, k);
        void *ws = nan_ws(st_cuda_embed_backward_workspace_bytes(N));
        CK(bf ? st_cuda_embed_backward_bf16(dwte, gpt2 ? dwpe : NULL, dtok,
                                            (const uint16_t *)dd, B, T, C, ws, 0)
              : st_cuda_embed_backward_f32(dwte, gpt2 ? dwpe : NULL, dtok, (const float *)dd,
                                           B, T, C, ws, 0));
        CK(cudaDeviceSynchronize());
        return cat(down(dwte, V * C, false), down(dwpe, T * C, false));
    });
    const float *gw = got.data(), *gp = got.data() + V * C;
    int64_t first = -1;
    for (int64_t i = 0; i < V * C && first < 0; i++)
        if (memcmp(&gw[i], &rwte[i], 4))
            first = i;
    tap_ok(first < 0, "embed_backward dwte %s %s: bit-identical to the CPU%s",
           bf ? "bf16" : "fp32", shape, first < 0 ? "" : " (FAILED)");
    if (first >= 0)
        tap_diag("first difference at token %lld column %lld: gpu %.9g cpu %.9g",
                 (long long)(first / C), (long long)(first % C), gw[first], rwte[first]);
    tap_ok(!memcmp(gp, rwpe.data(), T * C * 4),
           "embed_backward dwpe %s %s: bit-identical to the CPU (untouched for llama)",
           bf ? "bf16" : "fp32", shape);
    free_all();
}

static void test_embed_forward(bool bf, bool gpt2, int64_t B, int64_t T, int64_t C, int64_t V)
{
    char shape[96];
    const int64_t N = B * T;
    snprintf(shape, sizeof shape, "%s B=%lld T=%lld C=%lld", gpt2 ? "gpt2" : "llama",
             (long long)B, (long long)T, (long long)C);
    std::vector<int32_t> tok(N);
    for (int64_t r = 0; r < N; r++)
        tok[r] = (int32_t)((r * 7 + 3) % V);
    std::vector<float> wte = rnd(V * C, bf), wpe = rnd(T * C, bf), ref(N * C);
    if (ref_embed_forward(ref.data(), wte.data(), gpt2 ? wpe.data() : NULL, tok.data(), B, T,
                          C, V))
        bail("ref_embed_forward", cudaErrorMemoryAllocation);
    int32_t *dtok = (int32_t *)dalloc(N * 4);
    CK(cudaMemcpy(dtok, tok.data(), N * 4, cudaMemcpyHostToDevice));
    std::vector<float> got = both_paths("embed_forward", bf, shape, vec_width_ok(bf, C),
                                        [&](int k) {
        void *out = nan_buf(N * C, bf, k);
        const void *dte = up(wte, bf, k), *dpe = gpt2 ? up(wpe, bf, k) : NULL;
        CK(bf ? st_cuda_embed_forward_bf16((uint16_t *)out, (const uint16_t *)dte,
                                           (const uint16_t *)dpe, dtok, B, T, C, 0)
              : st_cuda_embed_forward_f32((float *)out, (const float *)dte,
                                          (const float *)dpe, dtok, B, T, C, 0));
        CK(cudaDeviceSynchronize());
        return down(out, N * C, bf);
    });
    check("embed_forward", bf, shape, got, ref);
    free_all();
}

/* The sum of squares behind the gradient norm (cuda/reduce.cu): onto an
 * accumulator that starts non-zero, with a NaN-filled partials workspace,
 * and the same bits from its 16-byte and scalar paths (the result's 8
 * bytes compared as two floats' bits).  The reference is the host's
 * compensated (Neumaier) double sum, exact to about one rounding.  Every
 * term is non-negative, so the device's sum, whose every term passes
 * through at most `depth` double additions (the squares are exact in
 * double), is within depth * 2^-53 of the exact sum, relatively; depth
 * counts a thread's serial adds, the two trees of 256 and the finish
 * kernel's loop over the 264 partials, and the accumulator. */
static void test_sumsq(int64_t n)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    const std::vector<float> x = rnd(n, false);
    const double start = 0.5;
    double ref = start, comp = 0.0;
    for (float v : x) {
        const double t = (double)v * v, u = ref + t;
        comp += fabs(ref) >= t ? (ref - u) + t : (t - u) + ref;
        ref = u;
    }
    ref += comp;
    const int64_t threads = (int64_t)ST_CUDA_SUMSQ_PARTIALS * 256;
    const int64_t depth = 4 * (((n + 3) / 4 + threads - 1) / threads) + 8 +
                          (ST_CUDA_SUMSQ_PARTIALS + 255) / 256 + 8 + 1;
    const double tol = (double)depth * 0x1p-53 + 0x1p-52;
    double got = 0.0;
    both_paths("sumsq", false, shape, n >= 4, [&](int k) {
        const float *dx = (const float *)up(x, false, k);
        double *acc = (double *)dalloc(sizeof(double));
        CK(cudaMemcpy(acc, &start, sizeof start, cudaMemcpyHostToDevice));
        double *partials = (double *)nan_ws(sizeof(double) * ST_CUDA_SUMSQ_PARTIALS);
        CK(st_cuda_sumsq(dx, n, acc, partials, 0));
        CK(cudaMemcpy(&got, acc, sizeof got, cudaMemcpyDeviceToHost));
        std::vector<float> bits(2);
        memcpy(bits.data(), &got, sizeof got);
        return bits;
    });
    const double e = fabs(got - ref) / ref;
    tap_ok(e <= tol, "sumsq fp32 %s: %.17g against the host's %.17g (rel %.2g, tol %.2g)",
           shape, got, ref, e, tol);
    free_all();
}

/* ---- the cross-entropy's row cache -----------------------------------------
 * st_cuda_softmax_xent (cuda/xent.cu) keeps up to 110 KiB of each logits
 * row in shared memory between its two passes.  The cases: a bf16 row that
 * fits whole with a one-element tail past the last vector (gpt2's 50,257),
 * rows that do not fit (fp32 50,257; bf16 128,256), whose rest is read
 * again from global memory, the scalar path (operands skewed by one
 * element), padded rows (ld > V), ignored targets (-1: loss and gradient
 * exactly 0) and a loss-only call, which must leave the logits alone.  The
 * loss against the CPU within 1e-4 relative, the gradient within the type's
 * tolerance.  Under the emulation the dynamic shared memory starts as NaN
 * bytes, so an element that pass 2 reads from the cache without pass 1
 * having stored it poisons the gradient, and the 16-byte access count must
 * show the vector path exactly when the layout allows it.  The launch needs
 * its kernel's shared-memory limit raised (over 48 KiB), which the
 * emulation refuses without. */
static void test_xent(bool bf, int64_t N, int64_t V, int64_t ld, int skew, bool with_grad,
                      bool ignore)
{
    char shape[96];
    snprintf(shape, sizeof shape, "N=%lld V=%lld ld=%lld%s%s%s", (long long)N, (long long)V,
             (long long)ld, skew ? " skewed" : "", with_grad ? "" : " loss-only",
             ignore ? " ignored rows" : "");
    const char *ty = bf ? "bf16" : "fp32";
    std::vector<float> h = rnd(N * ld, bf, 4.0f), ref(N * V);
    std::vector<int32_t> tgt(N);
    for (int64_t n = 0; n < N; n++) {
        tgt[n] = (int32_t)((uniform_pm1() + 1.0f) * 0.5f * (float)V) % (int32_t)V;
        if (ignore && n % 3 == 0)
            tgt[n] = -1;
        memcpy(&ref[n * V], &h[n * ld], sizeof(float) * V);
    }
    const float scale = with_grad ? 1.0f / (float)N : 0.0f;
    const double rsum = st_softmax_xent(ref.data(), tgt.data(), N, V, scale);
    void *logits = up(h, bf, skew);
    int32_t *dtgt = (int32_t *)dalloc(sizeof(int32_t) * N);
    CK(cudaMemcpy(dtgt, tgt.data(), sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    float *row_loss = (float *)nan_ws(sizeof(float) * N);
    double *dsum = (double *)nan_ws(sizeof(double));
    const long c0 = vec_accesses();
    CK(bf ? st_cuda_softmax_xent_bf16((uint16_t *)logits, dtgt, N, V, ld, scale, row_loss, dsum,
                                      0)
          : st_cuda_softmax_xent_f32((float *)logits, dtgt, N, V, ld, scale, row_loss, dsum, 0));
    CK(cudaDeviceSynchronize());
    const long c1 = vec_accesses();
#ifdef ST_CUDA_EMULATION
    const bool expect_vec = skew == 0 && vec_width_ok(bf, ld);
    tap_ok((c1 > c0) == expect_vec, "softmax_xent %s %s: %s path (%ld 16-byte accesses)", ty,
           shape, expect_vec ? "16-byte" : "scalar", c1 - c0);
#else
    (void)c0, (void)c1;
#endif
    double gsum = NAN;
    CK(cudaMemcpy(&gsum, dsum, sizeof gsum, cudaMemcpyDeviceToHost));
    const double lerr = fabs(gsum - rsum) / fabs(rsum);
    tap_ok(lerr <= kTolF32, "softmax_xent %s %s: loss rel err %.3g (tol %.0e)", ty, shape, lerr,
           kTolF32);
    std::vector<float> all = down(logits, N * ld, bf), got(N * V), rl(N);
    CK(cudaMemcpy(rl.data(), row_loss, sizeof(float) * N, cudaMemcpyDeviceToHost));
    bool pad_ok = true, ignored_ok = true;
    for (int64_t n = 0; n < N; n++) {
        memcpy(&got[n * V], &all[n * ld], sizeof(float) * V);
        for (int64_t i = V; i < ld; i++)
            pad_ok = pad_ok && (with_grad ? all[n * ld + i] == 0.0f
                                          : !memcmp(&all[n * ld + i], &h[n * ld + i], 4));
        if (tgt[n] < 0) {
            ignored_ok = ignored_ok && rl[n] == 0.0f;
            for (int64_t i = 0; i < V && with_grad; i++)
                ignored_ok = ignored_ok && got[n * V + i] == 0.0f;
        }
    }
    if (with_grad)
        check("softmax_xent gradient", bf, shape, got, ref);
    else
        tap_ok(!memcmp(got.data(), ref.data(), got.size() * 4),
               "softmax_xent %s %s: the logits untouched", ty, shape);
    if (ld > V)
        tap_ok(pad_ok, "softmax_xent %s %s: the columns past V %s", ty, shape,
               with_grad ? "zero gradient" : "untouched");
    if (ignore)
        tap_ok(ignored_ok, "softmax_xent %s %s: ignored rows have loss 0 and no gradient", ty,
               shape);
    digest(rl);
    free_all();
}

int main(void)
{
    if (!have_gpu())
        return 1;
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
            test_norm(bf, layer, 20, 264, false);  /* a multiple of 8: vector in bf16 */
            test_norm(bf, layer, 20, 261, false);  /* odd: scalar */
            test_norm(bf, layer, 33, 9001, false); /* unfused, scalar */
        }
        test_embed(bf, true, 3, 70, 36, 50, 0);    /* 36: a multiple of 4, not 8 */
        test_embed(bf, false, 2, 5, 37, 9, 2);     /* odd width */
        /* The 16-byte paths of the embedding and the norm forward (the
         * backward's are above): widths a multiple of 8 (vector in both
         * types), of 4 but not 8 (vector in fp32 only), odd (scalar). */
        for (int64_t w : {264, 260, 261}) {
            test_embed_forward(bf, w != 260, 2, 5, w, 11);
            for (int layer = 1; layer >= 0; layer--)
                test_norm_forward(bf, layer, 5, w);
        }
        test_norm_forward(bf, true, 3, 9000);       /* wide rows */
        test_embed(bf, true, 3, 70, 300, 50, 0);   /* 2 column blocks of 256 */
        test_embed(bf, false, 4, 300, 40, 64, 0);  /* 1200 rows > 1024: 2 blocks of the run list */
        test_embed(bf, true, 2, 33, 64, 16, 1);    /* one run of 66 rows */
        test_embed(bf, false, 1, 1, 8, 4, 2);      /* one row */
        /* The sort's tiles are 2048 keys: exactly one; two (one span pass,
         * the second tile mostly padding keys); 5000 rows = 4 tiles of
         * 8192 padded keys (three span passes, two merges) and 5 blocks of
         * the run list; one token throughout 4500 rows (a run across the
         * run list's blocks). */
        test_embed(bf, false, 1, 2048, 8, 100, 0);
        test_embed(bf, true, 1, 2049, 16, 40, 2);
        test_embed(bf, false, 5, 1000, 8, 300, 0);
        test_embed(bf, true, 3, 1500, 8, 20, 1);
        /* The cross-entropy's row cache (110 KiB: 56,320 bf16 or 28,160
         * fp32 elements): whole in bf16 with a tail element, partial in
         * fp32; partial in bf16 at llama's vocabulary; the scalar path
         * (whole in both types); small padded rows with ignored targets. */
        test_xent(bf, 3, 50257, 50304, 0, true, false);
        test_xent(bf, 2, 128256, 128256, 0, true, false);
        test_xent(bf, 3, 50257, 50304, 1, true, true);
        test_xent(bf, 7, 301, 384, 0, true, true);
        test_xent(bf, 4, 1000, 1000, 1, false, true);
    }
    /* 33,500 rows: 33 blocks of the run list, so the one-warp scan of
     * their counts takes a second chunk (its carry); 64 Ki padded keys. */
    test_embed(false, false, 1, 33500, 4, 3000, 0);
    /* Fewer than one group of 4 (no 16-byte access at all); one group; a
     * short last group; several sweeps of the 264 x 256-thread grid (its
     * 270,336 elements) with a short last group. */
    for (int64_t n : {3, 4, 1001, 600003})
        test_sumsq(n);
    print_digest();
    return tap_done();
}
