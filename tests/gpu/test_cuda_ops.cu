/* GPU test of the CUDA backend's non-attention ops (cuda/ops.h; the
 * products are test_cuda_gemm.cu's, the attention test_cuda_attention.cu's,
 * the shared helpers ops_check.h's): every op
 * runs on random inputs on the GPU and through its CPU reference from
 * libshardtrain.a (src/kernels/cpu_ops.c, the embedding of src/kernels/cpu_model.c, the AdamW
 * of src/kernels/cpu_adamw.c) on the same inputs, and one TAP line per op x storage
 * mode x shape reports the largest difference.
 *
 * Error measure: max_i |gpu_i - cpu_i| / max_i |cpu_i| over the whole
 * output, i.e. relative to the output's scale rather than element by
 * element (an element-wise ratio is meaningless where a value cancels to
 * near zero, as in the norm backward).  A NaN or an unwritten element
 * (outputs are poisoned with NaN before each overwriting call) fails.
 *
 * Tolerances: 1e-4 in fp32 mode.  The GPU sums in fp32 with tree
 * reductions where the CPU sums in double or in a different fp32 order, so
 * the two differ by a few ulp of the output scale times log2 or sqrt of the
 * reduction length: at most ~1e-6 for the shapes here, so 1e-4 leaves two
 * orders of margin and still catches any indexing mistake (which gives
 * errors of order 1).  2e-2 in bf16-storage mode: inputs are rounded to
 * bf16 before both sides see them, so the only difference is the rounding
 * of the stored output (2^-9 relative) plus the fp32 noise above.  The
 * casts and the embedding in fp32 mode are expected to be exact; the casts
 * are checked bit for bit.
 *
 * Without a usable GPU the program prints one "Bail out!" line and exits
 * with status 1 (not 77, which automake reads as a skip): `make check-gpu`
 * is only run where a GPU is expected, so its absence is an error. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cpu_ops.h"
#include "model/model.h" /* C, with its own extern "C" guard */
#include "cpu_ref.h"
#include "ops.h"
#include "tap.h"
#include "gpu_check.h"
#include "ops_check.h"

/* ---- elementwise ------------------------------------------------------------ */

static void test_bias(bool bf, int64_t N, int64_t C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    Buf dout(N * C, bf), dbias(C, false);
    dout.fill(1.0f);
    dbias.fill(1.0f);
    std::vector<float> ref = dbias.h;
    st_bias_backward(ref.data(), dout.h.data(), N, C);
    void *bws = ws(st_cuda_bias_backward_workspace_bytes(N, C));
    RUN(bf ? st_cuda_bias_backward_bf16(dbias.f(), dout.u(), N, C, bws, g_stream)
           : st_cuda_bias_backward_f32(dbias.f(), dout.f(), N, C, bws, g_stream));
    report("bias_backward", bf, shape, rel_err(dbias.down(), ref));
}

static void test_swiglu(bool bf, int64_t N, int64_t F)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld F=%lld", (long long)N, (long long)F);
    Buf gu(N * 2 * F, bf), out(N * F, bf), dout(N * F, bf), dgu(N * 2 * F, bf);
    gu.fill(3.0f);
    dout.fill(1.0f);
    out.poison();
    dgu.poison();
    std::vector<float> ref(out.n), dref(dgu.n);
    st_swiglu_forward(ref.data(), gu.h.data(), N, F);
    st_swiglu_backward(dref.data(), gu.h.data(), dout.h.data(), N, F);
    RUN(bf ? st_cuda_swiglu_forward_bf16(out.u(), gu.u(), N, F, g_stream)
           : st_cuda_swiglu_forward_f32(out.f(), gu.f(), N, F, g_stream));
    RUN(bf ? st_cuda_swiglu_backward_bf16(dgu.u(), gu.u(), dout.u(), N, F, g_stream)
           : st_cuda_swiglu_backward_f32(dgu.f(), gu.f(), dout.f(), N, F, g_stream));
    report("swiglu_forward", bf, shape, rel_err(out.down(), ref));
    report("swiglu_backward", bf, shape, rel_err(dgu.down(), dref));
}

static void test_rope_tables(int64_t T, int64_t hd)
{
    char shape[64];
    snprintf(shape, sizeof shape, "T=%lld hd=%lld", (long long)T, (long long)hd);
    Buf c(T * hd / 2, false), s(T * hd / 2, false);
    c.poison();
    s.poison();
    std::vector<float> cref(c.n), sref(s.n);
    st_rope_tables(cref.data(), sref.data(), T, hd, 10000.0);
    RUN(st_cuda_rope_tables(c.f(), s.f(), T, hd, 10000.0, g_stream));
    report("rope_tables cos", false, shape, rel_err(c.down(), cref));
    report("rope_tables sin", false, shape, rel_err(s.down(), sref));
}

/* Rows of width ld > n_heads * hd, as q or k inside a fused qkv row: the
 * whole buffer is compared, so channels outside the heads must be left
 * untouched. */
static void test_rope_apply(bool bf, int64_t B, int64_t T, int64_t nh, int64_t hd,
                            int64_t ld, int inverse)
{
    char shape[96];
    snprintf(shape, sizeof shape, "B=%lld T=%lld heads=%lld hd=%lld ld=%lld%s",
             (long long)B, (long long)T, (long long)nh, (long long)hd, (long long)ld,
             inverse ? " inverse" : "");
    Buf c(T * hd / 2, false), s(T * hd / 2, false), x(B * T * ld, bf);
    st_rope_tables(c.h.data(), s.h.data(), T, hd, 500000.0);
    c.up();
    s.up();
    x.fill(1.0f);
    std::vector<float> ref = x.h;
    st_rope_apply(ref.data(), ld, B, T, nh, hd, c.h.data(), s.h.data(), inverse);
    RUN(bf ? st_cuda_rope_apply_bf16(x.u(), ld, B, T, nh, hd, c.f(), s.f(), inverse, g_stream)
           : st_cuda_rope_apply_f32(x.f(), ld, B, T, nh, hd, c.f(), s.f(), inverse,
                                    g_stream));
    report("rope_apply", bf, shape, rel_err(x.down(), ref));
}

static void test_embed(bool bf, bool gpt2, int64_t B, int64_t T, int64_t V, int64_t C)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%s B=%lld T=%lld V=%lld C=%lld", gpt2 ? "gpt2" : "llama",
             (long long)B, (long long)T, (long long)V, (long long)C);
    const int64_t rows = B * T;
    std::vector<int32_t> tok(rows);
    for (auto &t : tok) /* small V: many repeated tokens */
        t = (int32_t)((urand() + 1.0f) * 0.5f * (float)V) % (int32_t)V;
    int32_t *dtok;
    CK(cudaMalloc(&dtok, sizeof(int32_t) * rows));
    CK(cudaMemcpy(dtok, tok.data(), sizeof(int32_t) * rows, cudaMemcpyHostToDevice));
    Buf wte(V * C, bf), wpe(T * C, bf), out(rows * C, bf);
    Buf dwte(V * C, false), dwpe(T * C, false), dout(rows * C, bf);
    wte.fill(1.0f);
    wpe.fill(1.0f);
    out.poison();
    std::vector<float> ref(out.n);
    if (ref_embed_forward(ref.data(), wte.h.data(), gpt2 ? wpe.h.data() : NULL, tok.data(),
                          B, T, C, V))
        bail("ref_embed_forward", cudaErrorMemoryAllocation);
    RUN(bf ? st_cuda_embed_forward_bf16(out.u(), wte.u(), gpt2 ? wpe.u() : NULL, dtok, B, T,
                                        C, g_stream)
           : st_cuda_embed_forward_f32(out.f(), wte.f(), gpt2 ? wpe.f() : NULL, dtok, B, T,
                                       C, g_stream));
    report("embed_forward", bf, shape, rel_err(out.down(), ref));

    dwte.fill(1.0f);
    dwpe.fill(1.0f);
    dout.fill(1.0f);
    std::vector<float> rwte = dwte.h, rwpe = dwpe.h;
    if (ref_embed_backward(rwte.data(), gpt2 ? rwpe.data() : NULL, tok.data(),
                           dout.h.data(), B, T, C, V))
        bail("ref_embed_backward", cudaErrorMemoryAllocation);
    void *ews = ws(st_cuda_embed_backward_workspace_bytes(B * T));
    RUN(bf ? st_cuda_embed_backward_bf16(dwte.f(), gpt2 ? dwpe.f() : NULL, dtok, dout.u(),
                                         B, T, C, ews, g_stream)
           : st_cuda_embed_backward_f32(dwte.f(), gpt2 ? dwpe.f() : NULL, dtok, dout.f(),
                                        B, T, C, ews, g_stream));
    report("embed_backward dwte", bf, shape, rel_err(dwte.down(), rwte));
    /* Llama: dwpe must be left alone (it still equals its initial values). */
    report("embed_backward dwpe", bf, shape, rel_err(dwpe.down(), rwpe));
    cudaFree(dtok);
}

static void test_add_inplace(bool bf, int64_t n)
{
    char shape[64];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    Buf y(n, bf), x(n, bf);
    y.fill(1.0f);
    x.fill(1.0f);
    std::vector<float> ref = y.h;
    st_add_inplace(ref.data(), x.h.data(), n);
    RUN(bf ? st_cuda_add_inplace_bf16(y.u(), x.u(), n, g_stream)
           : st_cuda_add_inplace_f32(y.f(), x.f(), n, g_stream));
    report("add_inplace", bf, shape, rel_err(y.down(), ref));
}

/* Bit-exact: special values (signed zeros, ties to even, overflow to inf,
 * inf, NaNs, subnormals) followed by random ones. */
static void test_casts(int64_t n)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80c000u,
        0x477fe000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
        0xffc00001u, 0x00000001u, 0x007fffffu, 0x00008000u, 0x80018000u, 0x3effffffu};
    const int64_t nspec = (int64_t)(sizeof special / sizeof special[0]);
    std::vector<float> src(n);
    for (int64_t i = 0; i < n; i++) {
        if (i < nspec)
            memcpy(&src[i], &special[i], 4);
        else
            src[i] = urand() * powf(2.0f, (float)(int)(urand() * 60.0f));
    }
    float *dsrc, *dround, *dunp;
    uint16_t *dpack;
    CK(cudaMalloc(&dsrc, 4 * n));
    CK(cudaMalloc(&dround, 4 * n));
    CK(cudaMalloc(&dunp, 4 * n));
    CK(cudaMalloc(&dpack, 2 * n));
    CK(cudaMemcpy(dsrc, src.data(), 4 * n, cudaMemcpyHostToDevice));
    RUN(st_cuda_round_bf16(dround, dsrc, n, g_stream));
    RUN(st_cuda_pack_bf16(dpack, dsrc, n, g_stream));
    RUN(st_cuda_unpack_bf16(dunp, dpack, n, g_stream));
    std::vector<float> rround(n), ground(n), runp(n), gunp(n);
    std::vector<uint16_t> rpack(n), gpack(n);
    st_round_bf16(rround.data(), src.data(), n);
    st_pack_bf16(rpack.data(), src.data(), n);
    st_unpack_bf16(runp.data(), rpack.data(), n);
    CK(cudaMemcpy(ground.data(), dround, 4 * n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gpack.data(), dpack, 2 * n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gunp.data(), dunp, 4 * n, cudaMemcpyDeviceToHost));
    tap_ok(!memcmp(rround.data(), ground.data(), 4 * n), "round_bf16 n=%lld: bit-exact",
           (long long)n);
    tap_ok(!memcmp(rpack.data(), gpack.data(), 2 * n), "pack_bf16 n=%lld: bit-exact",
           (long long)n);
    tap_ok(!memcmp(runp.data(), gunp.data(), 4 * n), "unpack_bf16 n=%lld: bit-exact",
           (long long)n);
    cudaFree(dsrc);
    cudaFree(dround);
    cudaFree(dunp);
    cudaFree(dpack);
}

/* ---- norms ------------------------------------------------------------------ */

/* LayerNorm (centered) or RMSNorm; x has a non-zero mean so the mean
 * matters.  The backward takes the CPU's mean and rstd as inputs, so its
 * check does not depend on the forward's. */
static void test_norm(bool bf, bool layer, int64_t N, int64_t C)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld C=%lld", (long long)N, (long long)C);
    const char *name = layer ? "layernorm" : "rmsnorm";
    char what[64];
    Buf x(N * C, bf), w(C, bf), b(C, bf), out(N * C, bf), mean(N, false), rstd(N, false);
    x.fill(1.0f, 0.5f);
    w.fill(1.0f);
    b.fill(1.0f);
    out.poison();
    mean.poison();
    rstd.poison();
    const float eps = 1e-5f;
    std::vector<float> rout(out.n), rmean(mean.n), rrstd(rstd.n);
    if (layer) {
        st_layernorm_forward(rout.data(), rmean.data(), rrstd.data(), x.h.data(), w.h.data(),
                             b.h.data(), N, C, eps);
        RUN(bf ? st_cuda_layernorm_forward_bf16(out.u(), mean.f(), rstd.f(), x.u(), w.u(),
                                                b.u(), N, C, eps, g_stream)
               : st_cuda_layernorm_forward_f32(out.f(), mean.f(), rstd.f(), x.f(), w.f(),
                                               b.f(), N, C, eps, g_stream));
    } else {
        st_rmsnorm_forward(rout.data(), rrstd.data(), x.h.data(), w.h.data(), N, C, eps);
        RUN(bf ? st_cuda_rmsnorm_forward_bf16(out.u(), rstd.f(), x.u(), w.u(), N, C, eps,
                                              g_stream)
               : st_cuda_rmsnorm_forward_f32(out.f(), rstd.f(), x.f(), w.f(), N, C, eps,
                                             g_stream));
    }
    snprintf(what, sizeof what, "%s_forward out", name);
    report(what, bf, shape, rel_err(out.down(), rout));
    if (layer) {
        snprintf(what, sizeof what, "%s_forward mean", name);
        report(what, bf, shape, rel_err(mean.down(), rmean));
    }
    snprintf(what, sizeof what, "%s_forward rstd", name);
    report(what, bf, shape, rel_err(rstd.down(), rrstd));

    /* backward: dx, dw, db accumulate (+=) into random initial values */
    Buf dout(N * C, bf), dx(N * C, bf), dw(C, false), db(C, false);
    mean.h = rmean;
    rstd.h = rrstd;
    mean.up();
    rstd.up();
    dout.fill(1.0f);
    dx.fill(1.0f);
    dw.fill(1.0f);
    db.fill(1.0f);
    std::vector<float> rdx = dx.h, rdw = dw.h, rdb = db.h;
    void *nws = ws(st_cuda_norm_backward_workspace_bytes(N, C));
    if (layer) {
        st_layernorm_backward(rdx.data(), rdw.data(), rdb.data(), dout.h.data(), x.h.data(),
                              w.h.data(), rmean.data(), rrstd.data(), N, C);
        RUN(bf ? st_cuda_layernorm_backward_bf16(dx.u(), nullptr, dw.f(), db.f(), dout.u(), x.u(),
                                                 w.u(), mean.f(), rstd.f(), N, C, nws,
                                                 g_stream)
               : st_cuda_layernorm_backward_f32(dx.f(), nullptr, dw.f(), db.f(), dout.f(), x.f(),
                                                w.f(), mean.f(), rstd.f(), N, C, nws,
                                                g_stream));
    } else {
        st_rmsnorm_backward(rdx.data(), rdw.data(), dout.h.data(), x.h.data(), w.h.data(),
                            rrstd.data(), N, C);
        RUN(bf ? st_cuda_rmsnorm_backward_bf16(dx.u(), nullptr, dw.f(), dout.u(), x.u(), w.u(),
                                               rstd.f(), N, C, nws, g_stream)
               : st_cuda_rmsnorm_backward_f32(dx.f(), nullptr, dw.f(), dout.f(), x.f(), w.f(),
                                              rstd.f(), N, C, nws, g_stream));
    }
    snprintf(what, sizeof what, "%s_backward dx", name);
    report(what, bf, shape, rel_err(dx.down(), rdx));
    snprintf(what, sizeof what, "%s_backward dw", name);
    report(what, bf, shape, rel_err(dw.down(), rdw));
    if (layer) {
        snprintf(what, sizeof what, "%s_backward db", name);
        report(what, bf, shape, rel_err(db.down(), rdb));
    }
}

/* ---- cross-entropy ------------------------------------------------------------ */

/* Rows ld >= V apart, as the LM head pads them: the kernel must use the
 * first V columns of each row; the rest it leaves bit for bit alone when
 * it computes the loss only, and sets to zero gradient otherwise (the
 * head's weight-gradient product reads them). */
/* ignore: every third target is -1 (a prompt position of instruction
 * data), whose loss and gradient row must be exactly 0. */
static void test_xent(bool bf, int64_t N, int64_t V, int64_t ld, bool with_grad,
                      bool ignore = false)
{
    char shape[96];
    snprintf(shape, sizeof shape, "N=%lld V=%lld ld=%lld%s%s", (long long)N, (long long)V,
             (long long)ld, with_grad ? "" : " loss-only", ignore ? " ignored rows" : "");
    std::vector<int32_t> tgt(N);
    for (auto &t : tgt)
        t = (int32_t)((urand() + 1.0f) * 0.5f * (float)V) % (int32_t)V;
    if (ignore)
        for (int64_t n = 0; n < N; n += 3)
            tgt[n] = -1;
    int32_t *dtgt;
    double *dsum;
    CK(cudaMalloc(&dtgt, sizeof(int32_t) * N));
    CK(cudaMalloc(&dsum, sizeof(double)));
    CK(cudaMemcpy(dtgt, tgt.data(), sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    Buf logits(N * ld, bf), row_loss(N, false);
    logits.fill(4.0f);
    row_loss.poison();
    const float scale = with_grad ? 1.0f / (float)N : 0.0f;
    std::vector<float> ref((size_t)(N * V));
    for (int64_t n = 0; n < N; n++)
        memcpy(&ref[n * V], &logits.h[n * ld], sizeof(float) * V);
    const double rsum = st_softmax_xent(ref.data(), tgt.data(), N, V, scale);
    RUN(bf ? st_cuda_softmax_xent_bf16(logits.u(), dtgt, N, V, ld, scale, row_loss.f(),
                                       dsum, g_stream)
           : st_cuda_softmax_xent_f32(logits.f(), dtgt, N, V, ld, scale, row_loss.f(), dsum,
                                      g_stream));
    double gsum = NAN;
    CK(cudaMemcpy(&gsum, dsum, sizeof gsum, cudaMemcpyDeviceToHost));
    /* The loss itself is never stored in bf16, so it must meet the fp32
     * tolerance in both modes. */
    const double lerr = fabs(gsum - rsum) / fabs(rsum);
    tap_ok(lerr <= kTolF32, "softmax_xent loss %s %s: rel err %.3g (tol %.0e)",
           bf ? "bf16" : "f32", shape, lerr, kTolF32);
    std::vector<float> rl = row_loss.down();
    bool rows_ok = true;
    for (int64_t n = 0; n < N; n++)
        rows_ok = rows_ok && isfinite(rl[n]);
    tap_ok(rows_ok, "softmax_xent row_loss %s %s: every row written", bf ? "bf16" : "f32",
           shape);
    std::vector<float> all = logits.down(), got((size_t)(N * V));
    bool pad_ok = true;
    for (int64_t n = 0; n < N; n++) {
        memcpy(&got[n * V], &all[n * ld], sizeof(float) * V);
        for (int64_t i = V; i < ld; i++)
            pad_ok = pad_ok && (with_grad ? all[n * ld + i] == 0.0f
                                          : !memcmp(&all[n * ld + i], &logits.h[n * ld + i],
                                                    sizeof(float)));
    }
    if (ld > V)
        tap_ok(pad_ok, "softmax_xent %s %s: the columns past V %s", bf ? "bf16" : "f32",
               shape, with_grad ? "zero gradient" : "untouched");
    if (ignore) {
        bool zero = true;
        for (int64_t n = 0; n < N; n += 3) {
            zero = zero && rl[n] == 0.0f;
            for (int64_t i = 0; i < V && with_grad; i++)
                zero = zero && got[n * V + i] == 0.0f;
        }
        tap_ok(zero, "softmax_xent %s %s: ignored rows have loss 0%s", bf ? "bf16" : "f32",
               shape, with_grad ? " and a zero gradient" : "");
    }
    report(with_grad ? "softmax_xent grad" : "softmax_xent logits untouched", bf, shape,
           rel_err(got, ref));
    cudaFree(dtgt);
    cudaFree(dsum);
}

/* ---- determinism ---------------------------------------------------------------- */

/* The same inputs twice must give the same bits: a difference means a race
 * or an order-dependent reduction (nothing here should use atomics). */
static void test_determinism(bool bf)
{
    const int64_t N = 33, V = 50257, B = 4, T = 64, C = 768, EV = 100;
    std::vector<int32_t> tgt(N), tok(B * T);
    for (auto &t : tgt)
        t = (int32_t)((urand() + 1.0f) * 0.5f * (float)V) % (int32_t)V;
    for (auto &t : tok)
        t = (int32_t)((urand() + 1.0f) * 0.5f * (float)EV) % (int32_t)EV;
    int32_t *dtgt, *dtok;
    double *dsum, sums[2];
    CK(cudaMalloc(&dtgt, sizeof(int32_t) * N));
    CK(cudaMalloc(&dtok, sizeof(int32_t) * B * T));
    CK(cudaMalloc(&dsum, sizeof(double)));
    CK(cudaMemcpy(dtgt, tgt.data(), sizeof(int32_t) * N, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dtok, tok.data(), sizeof(int32_t) * B * T, cudaMemcpyHostToDevice));
    Buf logits(N * V, bf), row_loss(N, false), dout(B * T * C, bf), dwte(EV * C, false),
        dwpe(T * C, false), dbias(C, false);
    logits.fill(4.0f);
    dout.fill(1.0f);
    std::vector<float> wte[2], wpe[2], bias[2];
    for (int run = 0; run < 2; run++) {
        RUN(bf ? st_cuda_softmax_xent_bf16(logits.u(), dtgt, N, V, V, 0.0f, row_loss.f(),
                                           dsum, g_stream)
               : st_cuda_softmax_xent_f32(logits.f(), dtgt, N, V, V, 0.0f, row_loss.f(),
                                          dsum, g_stream));
        CK(cudaMemcpy(&sums[run], dsum, sizeof(double), cudaMemcpyDeviceToHost));
        CK(cudaMemset(dwte.d, 0, dwte.bytes()));
        CK(cudaMemset(dwpe.d, 0, dwpe.bytes()));
        CK(cudaMemset(dbias.d, 0, dbias.bytes()));
        void *ews = ws(st_cuda_embed_backward_workspace_bytes(B * T));
        RUN(bf ? st_cuda_embed_backward_bf16(dwte.f(), dwpe.f(), dtok, dout.u(), B, T, C,
                                             ews, g_stream)
               : st_cuda_embed_backward_f32(dwte.f(), dwpe.f(), dtok, dout.f(), B, T, C,
                                            ews, g_stream));
        void *bws = ws(st_cuda_bias_backward_workspace_bytes(B * T, C));
        RUN(bf ? st_cuda_bias_backward_bf16(dbias.f(), dout.u(), B * T, C, bws, g_stream)
               : st_cuda_bias_backward_f32(dbias.f(), dout.f(), B * T, C, bws, g_stream));
        wte[run] = dwte.down();
        wpe[run] = dwpe.down();
        bias[run] = dbias.down();
    }
    tap_ok(!memcmp(&sums[0], &sums[1], sizeof(double)) && wte[0] == wte[1] &&
               wpe[0] == wpe[1] && bias[0] == bias[1],
           "determinism %s: xent loss sum, embed_backward, bias_backward bit-identical "
           "over two runs",
           bf ? "bf16" : "f32");
    cudaFree(dtgt);
    cudaFree(dtok);
    cudaFree(dsum);
}

int main(void)
{
    if (!open_device("test_cuda_ops"))
        return 1;

    test_casts(1);
    test_casts(100003);
    test_rope_tables(17, 64);
    test_rope_tables(1024, 128);
    for (int bf = 0; bf < 2; bf++) {
        test_bias(bf, 1, 1);
        test_bias(bf, 7, 33);
        test_bias(bf, 64, 768);
        test_bias(bf, 129, 1001);
        test_bias(bf, 2048, 768);
        test_swiglu(bf, 7, 33);
        test_swiglu(bf, 64, 1536);
        test_swiglu(bf, 3, 1001);
        test_rope_apply(bf, 2, 17, 3, 64, 3 * 64 + 2 * 64 + 5, 0);
        test_rope_apply(bf, 2, 17, 3, 64, 3 * 64 + 2 * 64 + 5, 1);
        test_rope_apply(bf, 1, 130, 8, 128, 8 * 128, 0);
        test_embed(bf, true, 2, 17, 50, 33);
        test_embed(bf, false, 2, 17, 50, 33);
        test_embed(bf, true, 4, 64, 1000, 768);
        test_add_inplace(bf, 1);
        test_add_inplace(bf, 100003);
        for (int layer = 0; layer < 2; layer++) {
            test_norm(bf, layer, 1, 1);
            test_norm(bf, layer, 7, 33);
            test_norm(bf, layer, 64, 768);
            test_norm(bf, layer, 5, 4099);
            test_norm(bf, layer, 2048, 768);
        }
        test_xent(bf, 3, 33, 33, true);
        test_xent(bf, 17, 1000, 1000, true);
        test_xent(bf, 5, 50257, 50257, true);
        test_xent(bf, 4, 50257, 50257, false);
        test_xent(bf, 2, 128256, 128256, true);
        /* the LM head's padded rows (cuda/model_cuda.h: ld = V rounded up
         * to a multiple of 128) */
        test_xent(bf, 5, 50257, 50304, true);
        test_xent(bf, 3, 301, 384, false);
        test_xent(bf, 7, 301, 384, true, true);
        test_xent(bf, 5, 1000, 1000, false, true);
        test_determinism(bf);
    }

    close_device();
    return tap_done();
}
