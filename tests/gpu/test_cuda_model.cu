/* GPU test of the model's units (cuda/model_cuda.h) against the CPU
 * reference of src/kernels/cpu_model.c: a tiny GPT-2 (tied embeddings) and a tiny
 * Llama (grouped-query heads, untied head) with random weights run the
 * embedding, one block and the head forward and backward on both
 * backends, and one TAP line per output x architecture x storage mode
 * reports the largest difference.
 *
 * Each GPU function is fed exactly the inputs its CPU twin gets (the CPU's
 * activations from the previous unit, the CPU's gradient state before the
 * call), so an error is attributed to one unit and does not compound.  The
 * block backward uses the saved activations of the GPU's own forward, as a
 * training step would.  In bf16 mode the weights and the unit inputs are
 * rounded to bf16 before either side sees them; the CPU then computes in
 * fp32 throughout, so the difference measures the bf16 storage of the
 * GPU's activations and activation gradients.
 *
 * Shapes are those of the "tiny" preset where the kernels allow (the
 * attention kernels need head dim 64 or 128, so d_model 128 with 2 heads),
 * with B*T = 288 rows and T = 96 not a multiple of the attention tiles.
 * Each architecture and mode runs twice: with vocabulary 256 and the
 * head's logits budget set to 256 rows, so the head runs a full and a
 * partial chunk as the CPU does; and with vocabulary 301 (rows neither 8
 * bf16 nor 4 fp32 elements long, as GPT-2's 50257) in chunks of 100 rows,
 * so every logits product runs on the padded stride with the emulation's
 * fast-path checker active and the loss is summed in chunks other than
 * the CPU's.
 *
 * Error measure and tolerances as in test_cuda_ops.cu: max |gpu - cpu| /
 * max |cpu| over the whole output, 1e-4 in fp32 mode, 2e-2 in bf16 mode;
 * the loss relative to its value.  Outputs are poisoned with NaN before the
 * call, so an unwritten element fails.
 *
 * Without a usable GPU the program prints one "Bail out!" line and exits
 * with status 1 (not automake's skip status 77). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cpu_model.h" /* C, with their own extern "C" guards */
#include "kernels/cpu_ops.h"
#include "model_cuda.h"
#include "tap.h"
#include "gpu_alloc.h"
#include "gpu_check.h"


/* xorshift64: reproducible inputs without depending on libc's rand. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnext(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float urand(void) /* uniform in [-1, 1) */
{
    return (float)((double)(rnext() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* Host floats -> device, as float or packed bf16 words. */
static void *up(const std::vector<float> &h, bool bf)
{
    void *d = dalloc(h.size() * (bf ? 2 : 4));
    if (bf) {
        std::vector<uint16_t> w(h.size());
        st_pack_bf16(w.data(), h.data(), (int64_t)h.size());
        CK(cudaMemcpy(d, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    return d;
}
static void set(void *d, const std::vector<float> &h, bool bf)
{
    if (bf) {
        std::vector<uint16_t> w(h.size());
        st_pack_bf16(w.data(), h.data(), (int64_t)h.size());
        CK(cudaMemcpy(d, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
}
static std::vector<float> down(const void *d, size_t n, bool bf)
{
    std::vector<float> out(n);
    if (bf) {
        std::vector<uint16_t> w(n);
        CK(cudaMemcpy(w.data(), d, n * 2, cudaMemcpyDeviceToHost));
        st_unpack_bf16(out.data(), w.data(), (int64_t)n);
    } else {
        CK(cudaMemcpy(out.data(), d, n * 4, cudaMemcpyDeviceToHost));
    }
    return out;
}
static void *poisoned(size_t n, bool bf)
{
    void *d = dalloc(n * (bf ? 2 : 4));
    CK(cudaMemset(d, 0xff, n * (bf ? 2 : 4))); /* NaN in fp32 and bf16 */
    return d;
}
static void round_if(std::vector<float> &v, bool bf)
{
    if (bf)
        st_round_bf16(v.data(), v.data(), (int64_t)v.size());
}

static const char *g_case; /* "gpt2 f32", ... */
static bool g_bf;
static void check(const char *what, const std::vector<float> &got,
                  const std::vector<float> &ref)
{
    const double tol = g_bf ? kTolBf16 : kTolF32;
    const double e = got.size() == ref.size() ? rel_err(got.data(), ref.data(), ref.size())
                                              : INFINITY;
    tap_ok(e <= tol, "%s %s: max rel err %.3g (tol %.0e)", g_case, what, e, tol);
}
static void check_dev(const char *what, const void *d, bool bf, const float *ref, size_t n)
{
    check(what, down(d, n, bf), std::vector<float>(ref, ref + n));
}

/* A unit's tensors share one flat buffer: its parameters and the gradient
 * of a sub-range, compared tensor by tensor so a failure names the
 * tensor. */
static void check_grads(const st_model *m, int u, const char *unit_name,
                        const float *dg, const std::vector<float> &ref)
{
    std::vector<float> got = down(dg, ref.size(), false);
    const st_unit *un = &m->units[u];
    for (int i = un->first_tensor; i < un->first_tensor + un->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        char what[160];
        snprintf(what, sizeof what, "%s grad %s", unit_name, t->name);
        check(what, std::vector<float>(got.begin() + t->offset,
                                       got.begin() + t->offset + t->numel),
              std::vector<float>(ref.begin() + t->offset, ref.begin() + t->offset + t->numel));
    }
}

/* Unit u's parameters: the model's initialisation plus noise on every
 * element, so that norm weights differ from 1 and biases from 0. */
static std::vector<float> unit_params(const st_model *m, int u, bool bf)
{
    std::vector<float> p((size_t)m->units[u].numel);
    st_model_init_range(m, u, 0, m->units[u].numel, p.data(), 1234);
    for (auto &x : p)
        x += 0.05f * urand();
    round_if(p, bf);
    return p;
}

static void run_case(int arch, bool bf, int vocab, int64_t head_rows)
{
    st_model_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.arch = arch;
    cfg.preset = (char *)"";
    cfg.init = (char *)"random";
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.n_kv_head = arch == ST_ARCH_LLAMA ? 1 : 2;
    cfg.d_model = 128;
    cfg.d_ff = arch == ST_ARCH_LLAMA ? 176 : 512;
    cfg.vocab_size = vocab;
    cfg.seq_len = 96;
    cfg.rope_theta = 10000.0;
    cfg.norm_eps = 1e-5;
    cfg.tie_embeddings = arch == ST_ARCH_GPT2;
    cfg.init_std = 0.1;
    st_model m;
    if (st_model_init(&m, &cfg) != 0) {
        tap_ok(0, "st_model_init");
        return;
    }
    char name[48];
    snprintf(name, sizeof name, "%s %s V=%d", arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
             bf ? "bf16" : "f32", vocab);
    g_case = name;
    g_bf = bf;
    const int64_t B = 3, N = B * m.T, C = m.C, V = m.V;
    const int hu = st_model_head_unit(&m);
    const float grad_scale = 1.0f / (float)N;

    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    st_cuda_model_ctx *ctx;
    CK(st_cuda_model_ctx_create(&ctx, &m, stream, 0));
    const int dtype = bf ? ST_CUDA_BF16 : ST_CUDA_F32;

    std::vector<float> pe = unit_params(&m, 0, bf), pb = unit_params(&m, 1, bf),
                       ph = unit_params(&m, hu, bf);
    std::vector<int32_t> tokens(N), targets(N);
    for (int64_t i = 0; i < N; i++) {
        tokens[i] = (int32_t)(rnext() % (uint64_t)V);
        targets[i] = (int32_t)(rnext() % (uint64_t)V);
    }
    void *d_pe = up(pe, bf), *d_pb = up(pb, bf), *d_ph = up(ph, bf);
    int32_t *d_tokens = (int32_t *)dalloc(4 * N), *d_targets = (int32_t *)dalloc(4 * N);
    CK(cudaMemcpy(d_tokens, tokens.data(), 4 * N, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_targets, targets.data(), 4 * N, cudaMemcpyHostToDevice));
    st_cuda_set_head_chunk_bytes((size_t)head_rows * (bf ? 2 : 4) * st_cuda_head_ld(&m));
    {
        /* Within the budget, no more chunks than it forces, and equal ones:
         * the last is short of the others by less than the chunk count. */
        const int64_t rows = st_cuda_head_chunk_rows(&m, B, dtype);
        const int64_t forced = (N + head_rows - 1) / head_rows;
        const int64_t n_chunks = (N + rows - 1) / rows, last = N - (n_chunks - 1) * rows;
        tap_ok(rows <= head_rows && n_chunks == forced && last > rows - n_chunks &&
                   st_cuda_head_ld(&m) % ST_CUDA_HEAD_LD_ALIGN == 0 && st_cuda_head_ld(&m) >= V,
               "%s head: %lld chunks of %lld rows (budget %lld rows), logits rows %lld apart",
               g_case, (long long)n_chunks, (long long)rows, (long long)head_rows,
               (long long)st_cuda_head_ld(&m));
    }
    void *scratch = dalloc(st_cuda_model_scratch_bytes(&m, B, dtype));
    std::vector<float> cpu_scratch(st_model_scratch_floats(&m, B));

    /* ---- embedding forward ---- */
    std::vector<float> x0((size_t)(N * C));
    st_embed_forward(&m, pe.data(), tokens.data(), B, x0.data());
    void *d_x0 = poisoned(N * C, bf);
    CK(bf ? st_cuda_model_embed_forward_bf16(&m, (const uint16_t *)d_pe, d_tokens, B,
                                             (uint16_t *)d_x0, ctx)
          : st_cuda_model_embed_forward_f32(&m, (const float *)d_pe, d_tokens, B,
                                            (float *)d_x0, ctx));
    CK(cudaStreamSynchronize(stream));
    {
        /* Exact in fp32; in bf16 the GPU rounds the sum wte + wpe once. */
        std::vector<float> ref = x0;
        round_if(ref, bf);
        check_dev("embed out", d_x0, bf, ref.data(), ref.size());
    }
    round_if(x0, bf); /* what the block reads in bf16 mode */

    /* ---- block forward ---- */
    std::vector<float> acts_mem(st_block_acts_floats(&m, B)), x1((size_t)(N * C));
    st_block_acts acts;
    st_block_acts_bind(&acts, &m, B, acts_mem.data());
    st_block_forward(&m, pb.data(), NULL, NULL, B, x0.data(), x1.data(), &acts, NULL);
    void *d_in = up(x0, bf), *d_x1 = poisoned(N * C, bf);
    size_t acts_bytes = st_cuda_block_acts_bytes(&m, B, dtype);
    void *d_acts_mem = dalloc(acts_bytes);
    CK(cudaMemset(d_acts_mem, 0xff, acts_bytes));
    st_cuda_block_acts da;
    st_cuda_block_acts_bind(&da, &m, B, dtype, d_acts_mem);
    CK(bf ? st_cuda_model_block_forward_bf16(&m, (const uint16_t *)d_pb, NULL, B,
                                             (const uint16_t *)d_in, (uint16_t *)d_x1, &da,
                                             NULL, ctx)
          : st_cuda_model_block_forward_f32(&m, (const float *)d_pb, NULL, B,
                                            (const float *)d_in, (float *)d_x1, &da, NULL,
                                            ctx));
    CK(cudaStreamSynchronize(stream));
    {
        const int64_t W = (m.H + 2 * m.KV) * m.hd, F = m.F;
        const int64_t fcw = arch == ST_ARCH_LLAMA ? 2 * F : F;
        check_dev("block out", d_x1, bf, x1.data(), x1.size());
        check_dev("block act ln1", da.ln1, bf, acts.ln1, N * C);
        if (arch == ST_ARCH_GPT2)
            check_dev("block act ln1_mean", da.ln1_mean, false, acts.ln1_mean, N);
        check_dev("block act ln1_rstd", da.ln1_rstd, false, acts.ln1_rstd, N);
        check_dev("block act qkv", da.qkv, bf, acts.qkv, N * W);
        check_dev("block act att", da.att, bf, acts.att, N * C);
        check_dev("block act lse", da.lse, false, acts.lse, B * m.H * m.T);
        check_dev("block act res_mid", da.res_mid, bf, acts.res_mid, N * C);
        check_dev("block act ln2", da.ln2, bf, acts.ln2, N * C);
        if (arch == ST_ARCH_GPT2)
            check_dev("block act ln2_mean", da.ln2_mean, false, acts.ln2_mean, N);
        check_dev("block act ln2_rstd", da.ln2_rstd, false, acts.ln2_rstd, N);
        check_dev("block act fc", da.fc, bf, acts.fc, N * fcw);
        check_dev("block act act", da.act, bf, acts.act, N * F);
    }
    round_if(x1, bf);

    /* ---- head forward + backward (the embedding gradient is where the
     * tied head accumulates, so it starts as random "earlier" gradient) ---- */
    std::vector<float> ge((size_t)m.units[0].numel), gh((size_t)m.units[hu].numel, 0.0f);
    for (auto &x : ge)
        x = 0.01f * urand();
    std::vector<float> ge0 = ge, dx1((size_t)(N * C)), logits((size_t)(N * V));
    double loss = st_head_forward_backward(&m, ph.data(), pe.data(), gh.data(), ge.data(), B,
                                           x1.data(), targets.data(), grad_scale,
                                           dx1.data(), logits.data(), cpu_scratch.data());
    float *d_ge = (float *)up(ge0, false);
    float *d_gh = (float *)up(std::vector<float>(gh.size(), 0.0f), false);
    void *d_hin = up(x1, bf), *d_dx1 = poisoned(N * C, bf);
    float *d_logits = (float *)poisoned(N * V, false);
    double *d_loss = (double *)dalloc(sizeof(double));
    CK(cudaMemset(d_loss, 0, sizeof(double)));
    CK(bf ? st_cuda_model_head_forward_backward_bf16(
                &m, (const uint16_t *)d_ph, (const uint16_t *)d_pe, d_gh, d_ge, B,
                (const uint16_t *)d_hin, d_targets, grad_scale, (uint16_t *)d_dx1, d_logits,
                scratch, d_loss, ctx)
          : st_cuda_model_head_forward_backward_f32(
                &m, (const float *)d_ph, (const float *)d_pe, d_gh, d_ge, B,
                (const float *)d_hin, d_targets, grad_scale, (float *)d_dx1, d_logits,
                scratch, d_loss, ctx));
    CK(cudaStreamSynchronize(stream));
    double gpu_loss;
    CK(cudaMemcpy(&gpu_loss, d_loss, sizeof gpu_loss, cudaMemcpyDeviceToHost));
    {
        const double tol = bf ? kTolBf16 : kTolF32;
        const double e = fabs(gpu_loss - loss) / fabs(loss);
        tap_ok(e <= tol, "%s head loss: gpu %.9g cpu %.9g rel err %.3g (tol %.0e)", g_case,
               gpu_loss, loss, e, tol);
        check_dev("head logits", d_logits, false, logits.data(), logits.size());
        check_dev("head din", d_dx1, bf, dx1.data(), dx1.size());
        check_grads(&m, hu, "head", d_gh, gh);
        if (m.tied)
            check_grads(&m, 0, "head (tied)", d_ge, ge);
    }
    /* Forward only (grad_scale 0) adds the same loss again and touches
     * neither the gradients nor din. */
    std::vector<float> gh_after = down(d_gh, gh.size(), false),
                       ge_after = down(d_ge, ge.size(), false),
                       dx1_after = down(d_dx1, dx1.size(), bf);
    CK(bf ? st_cuda_model_head_forward_backward_bf16(
                &m, (const uint16_t *)d_ph, (const uint16_t *)d_pe, d_gh, d_ge, B,
                (const uint16_t *)d_hin, d_targets, 0.0f, (uint16_t *)d_dx1, nullptr,
                scratch, d_loss, ctx)
          : st_cuda_model_head_forward_backward_f32(
                &m, (const float *)d_ph, (const float *)d_pe, d_gh, d_ge, B,
                (const float *)d_hin, d_targets, 0.0f, (float *)d_dx1, nullptr, scratch,
                d_loss, ctx));
    CK(cudaStreamSynchronize(stream));
    {
        double twice;
        CK(cudaMemcpy(&twice, d_loss, sizeof twice, cudaMemcpyDeviceToHost));
        tap_ok(fabs(twice - 2.0 * gpu_loss) <= 1e-12 * fabs(gpu_loss),
               "%s head forward-only call adds its loss to the sum (%.9g vs 2 x %.9g)",
               g_case, twice, gpu_loss);
        const bool same = down(d_gh, gh.size(), false) == gh_after &&
                          down(d_ge, ge.size(), false) == ge_after &&
                          down(d_dx1, dx1.size(), bf) == dx1_after;
        tap_ok(same, "%s head forward-only call leaves gradients and din alone", g_case);
    }
    round_if(dx1, bf); /* the block backward's dout in bf16 mode */

    /* ---- block backward (GPU: its own saved activations) ---- */
    std::vector<float> gb((size_t)m.units[1].numel), dx0((size_t)(N * C));
    for (auto &x : gb)
        x = 0.01f * urand(); /* checks that gradients accumulate */
    std::vector<float> gb0 = gb;
    st_block_backward(&m, pb.data(), gb.data(), NULL, NULL, B, x0.data(), &acts, dx1.data(), dx0.data(),
                      cpu_scratch.data());
    float *d_gb = (float *)up(gb0, false);
    void *d_dout = up(dx1, bf), *d_dx0 = poisoned(N * C, bf);
    CK(bf ? st_cuda_model_block_backward_bf16(&m, (const uint16_t *)d_pb, d_gb, NULL, B,
                                              (const uint16_t *)d_in, &da,
                                              (const uint16_t *)d_dout, (uint16_t *)d_dx0,
                                              scratch, ctx)
          : st_cuda_model_block_backward_f32(&m, (const float *)d_pb, d_gb, NULL, B,
                                             (const float *)d_in, &da, (const float *)d_dout,
                                             (float *)d_dx0, scratch, ctx));
    CK(cudaStreamSynchronize(stream));
    check_dev("block din", d_dx0, bf, dx0.data(), dx0.size());
    check_grads(&m, 1, "block", d_gb, gb);
    round_if(dx0, bf);

    /* ---- embedding backward (on top of the head's tied gradient) ---- */
    std::vector<float> ge_pre = ge;
    st_embed_backward(&m, ge.data(), tokens.data(), B, dx0.data());
    set(d_ge, ge_pre, false);
    void *d_edout = up(dx0, bf);
    CK(bf ? st_cuda_model_embed_backward_bf16(&m, d_ge, d_tokens, B,
                                              (const uint16_t *)d_edout, ctx)
          : st_cuda_model_embed_backward_f32(&m, d_ge, d_tokens, B, (const float *)d_edout,
                                             ctx));
    CK(cudaStreamSynchronize(stream));
    check_grads(&m, 0, "embed", d_ge, ge);

    st_cuda_set_head_chunk_bytes(0);
    st_cuda_model_ctx_destroy(ctx);
    CK(cudaStreamDestroy(stream));
    free_all();
    st_model_free(&m);
}

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("Bail out! no usable CUDA GPU (%s): test_cuda_model needs one\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    tap_diag("device 0: %s, compute capability %d.%d", prop.name, prop.major, prop.minor);
    for (int bf = 0; bf < 2; bf++) {
        run_case(ST_ARCH_GPT2, bf, 256, 256);
        run_case(ST_ARCH_LLAMA, bf, 256, 256);
        run_case(ST_ARCH_GPT2, bf, 301, 100);
        run_case(ST_ARCH_LLAMA, bf, 301, 100);
    }
    return tap_done();
}
