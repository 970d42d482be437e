/* The model's units on the GPU (cuda/model_cuda.h): src/kernels/cpu_model.c's
 * embedding and head here, the block in cuda/model_gpt2.cu and
 * cuda/model_llama.cu (dispatched by cuda/model_common.cu), transcribed
 * op for op onto the kernels of cuda/ops.h and cuda/attention.h.  Each function body is written once as
 * a template over the storage type S (float, or uint16_t bf16 words) and
 * keeps the CPU's order of operations and buffer reuse, so that the two
 * backends can be compared step by step; the only structural differences
 * are that the loss stays on the device, that in bf16 mode the head's
 * logits are bf16 (the CPU's are fp32; the cross-entropy reads them into
 * fp32 and writes their gradient back in place as bf16, the two backward
 * products' input), and that the head pads and chunks its logits its own
 * way (model_cuda.h says why).
 *
 * Memory layout of the saved activations and of the scratch is computed by
 * one function per buffer (layout_acts, layout_*_scratch) that serves both
 * the size query and the binding, so the two cannot drift apart. */
#include "model_units.cuh"

#include <stdlib.h>

namespace {

size_t g_head_chunk_bytes = 0; /* 0: ST_CUDA_HEAD_CHUNK_BYTES */

size_t layout_acts(st_cuda_block_acts *a, const st_model *m, int64_t B, int dtype,
                   void *mem)
{
    const int64_t N = B * m->T, C = m->C, F = m->F;
    const int64_t fc = arch_of(m).gated_mlp ? 2 * F : F;
    const size_t es = elem_bytes(dtype);
    Carve c(mem);
    a->ln1 = c.take_bytes(N * C * es);
    a->ln1_mean = c.take<float>(N);
    a->ln1_rstd = c.take<float>(N);
    a->qkv = c.take_bytes(N * qkv_width(m) * es);
    a->att = c.take_bytes(N * C * es);
    a->lse = c.take<float>(B * m->H * m->T);
    a->res_mid = c.take_bytes(N * C * es);
    a->ln2 = c.take_bytes(N * C * es);
    a->ln2_mean = c.take<float>(N);
    a->ln2_rstd = c.take<float>(N);
    a->fc = c.take_bytes(N * fc * es);
    a->act = c.take_bytes(N * F * es);
    return c.off;
}

/* Head scratch: the normed input and its statistics and gradient for all
 * rows, then one chunk of logits in the storage type (overwritten in place
 * by their gradient, which the two backward products then read: bf16 in
 * bf16 mode, so nothing is converted between the cross-entropy and the
 * products), the chunk's row losses and its loss sum, and the norm
 * backward's partial column sums.  Logit rows are st_cuda_head_ld apart
 * (16-byte aligned). */
template <class S> struct HeadScratch {
    S *xn, *dxn, *logits;
    float *mean, *rstd, *row_loss;
    double *chunk_loss;
    void *red_ws;
};
template <class S>
size_t layout_head_scratch(HeadScratch<S> *s, const st_model *m, int64_t B, void *mem)
{
    const int64_t N = B * m->T, C = m->C, Vp = st_cuda_head_ld(m);
    const int64_t chunk = st_cuda_head_chunk_rows(m, B, dtype_of<S>::v);
    Carve c(mem);
    s->xn = c.take<S>(N * C);
    s->mean = c.take<float>(N);
    s->rstd = c.take<float>(N);
    s->dxn = c.take<S>(N * C);
    s->logits = c.take<S>(chunk * Vp);
    s->row_loss = c.take<float>(chunk);
    s->chunk_loss = c.take<double>(1);
    s->red_ws = c.take_bytes(st_cuda_norm_backward_workspace_bytes(N, C));
    return c.off;
}

/* *acc += *x in double, on the stream: the CPU's `loss += chunk` without a
 * round trip to the host. */
__global__ void add_double_kernel(double *acc, const double *x) { *acc += *x; }

/* ---- the units ------------------------------------------------------------- */

template <class S>
cudaError_t embed_forward_t(const st_model *m, const S *p, const int32_t *tokens,
                            int64_t B, S *out, st_cuda_model_ctx *x)
{
    /* gpt2's unit is [wpe, wte], llama's [embed_tokens] (model.c). */
    const S *wpe = arch_of(m).wpe ? p : nullptr;
    return embed_forward(out, p + st_model_wte_offset(m), wpe, tokens, B, m->T, m->C,
                         x->stream);
}

template <class S>
cudaError_t embed_backward_t(const st_model *m, float *g, const int32_t *tokens,
                             int64_t B, const S *dout, st_cuda_model_ctx *x)
{
    float *dwpe = arch_of(m).wpe ? g : nullptr;
    /* The sort's workspace lives in the context, grown on first use (or for
     * a larger batch): the engine's scratch is not passed to this unit.
     * cudaFree waits for the device, so a block still in use is safe. */
    const size_t need = st_cuda_embed_backward_workspace_bytes(B * m->T);
    if (need > x->embed_ws_bytes) {
        cudaFree(x->embed_ws);
        x->embed_ws = nullptr;
        x->embed_ws_bytes = 0;
        TRY(cudaMalloc(&x->embed_ws, need));
        x->embed_ws_bytes = need;
    }
    return embed_backward(g + st_model_wte_offset(m), dwpe, tokens, dout, B, m->T, m->C,
                          x->embed_ws, x->stream);
}

/* The cross-entropy in place on logits of the storage type, and the
 * logits copied out as fp32 rows of width V (ld apart on the device). */
inline cudaError_t xent_inplace(float *l, const int32_t *t, int64_t rows, int64_t V,
                                int64_t ld, float gs, float *rl, double *ls, cudaStream_t s)
{
    return st_cuda_softmax_xent_f32(l, t, rows, V, ld, gs, rl, ls, s);
}
inline cudaError_t xent_inplace(uint16_t *l, const int32_t *t, int64_t rows, int64_t V,
                                int64_t ld, float gs, float *rl, double *ls, cudaStream_t s)
{
    return st_cuda_softmax_xent_bf16(l, t, rows, V, ld, gs, rl, ls, s);
}
inline cudaError_t logits_copy_out(float *dst, const float *l, int64_t rows, int64_t V,
                                   int64_t ld, cudaStream_t s)
{
    return cudaMemcpy2DAsync(dst, sizeof(float) * V, l, sizeof(float) * ld,
                             sizeof(float) * V, rows, cudaMemcpyDeviceToDevice, s);
}
inline cudaError_t logits_copy_out(float *dst, const uint16_t *l, int64_t rows, int64_t V,
                                   int64_t ld, cudaStream_t s)
{
    return st_cuda_unpack_bf16_rows(dst, V, l, ld, rows, V, s);
}

template <class S>
cudaError_t head_t(const st_model *m, const S *head_p, const S *embed_p, float *head_g,
                   float *embed_g, int64_t B, const S *in, const int32_t *targets,
                   float grad_scale, S *din, float *logits_out, void *scratch,
                   double *loss_sum, st_cuda_model_ctx *x)
{
    const ArchTraits &t = arch_of(m);
    const int hu = st_model_head_unit(m);
    const int64_t N = B * m->T, C = m->C, V = m->V;
    const int backward = grad_scale != 0.0f;
    const cudaStream_t s = x->stream;
    HeadScratch<S> sc;
    layout_head_scratch(&sc, m, B, scratch);
    const S *normw = tp(m, hu, 0, head_p);
    /* Output weight [V, C]: the head's own, or the tied token embedding. */
    const int64_t wte = st_model_wte_offset(m);
    const S *Wout = m->tied ? embed_p + wte : tp(m, hu, t.head_out, head_p);
    float *dWout = !backward ? nullptr
                   : m->tied ? (embed_g ? embed_g + wte : nullptr) /* NULL: frozen */
                             : tg(m, hu, t.head_out, head_g);

    if (t.layernorm)
        TRY(layernorm_forward(sc.xn, sc.mean, sc.rstd, in, normw, tp(m, hu, 1, head_p), N,
                              C, m->eps, s));
    else
        TRY(rmsnorm_forward(sc.xn, sc.rstd, in, normw, N, C, m->eps, s));

    /* bf16 mode: bf16 logits, whose gradient the cross-entropy writes in
     * place as the products' bf16 input.  The products run over the Vp
     * stored rows of the output weight (zero past V: model.h), the loss
     * over V columns, and the cross-entropy zeroes the gradient's columns
     * past V, so the padding rows' weight gradient is zero. */
    const int64_t Vp = m->Vp, ld = st_cuda_head_ld(m);
    const int64_t chunk = st_cuda_head_chunk_rows(m, B, dtype_of<S>::v);
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        const int64_t rows = N - r0 < chunk ? N - r0 : chunk;
        TRY(mm(x, 0, 1, rows, Vp, C, (const S *)sc.xn + r0 * C, C, Wout, C, 0.0f, sc.logits,
               ld));
        if (logits_out)
            TRY(logits_copy_out(logits_out + r0 * V, sc.logits, rows, V, ld, s));
        TRY(xent_inplace(sc.logits, targets + r0, rows, V, ld, grad_scale, sc.row_loss,
                         sc.chunk_loss, s));
        add_double_kernel<<<1, 1, 0, s>>>(loss_sum, sc.chunk_loss);
        TRY(cudaGetLastError());
        if (backward) {
            const S *dl = sc.logits;
            TRY(mm(x, 0, 0, rows, C, Vp, dl, ld, Wout, C, 0.0f, sc.dxn + r0 * C, C));
            if (dWout) /* NULL: a frozen output weight (LoRA) */
                TRY(mm(x, 1, 0, Vp, C, rows, dl, ld, (const S *)sc.xn + r0 * C, C, 1.0f, dWout,
                       C));
        }
    }
    if (backward) {
        TRY(cudaMemsetAsync(din, 0, sizeof(S) * (size_t)(N * C), s));
        if (t.layernorm)
            TRY(layernorm_backward(din, (const S *)nullptr, tg(m, hu, 0, head_g),
                                   tg(m, hu, 1, head_g), sc.dxn, in, normw, sc.mean, sc.rstd,
                                   N, C, sc.red_ws, s));
        else
            TRY(rmsnorm_backward(din, (const S *)nullptr, tg(m, hu, 0, head_g), sc.dxn, in,
                                 normw, sc.rstd, N, C, sc.red_ws, s));
    }
    return cudaSuccess;
}

} /* namespace */

extern "C" {

cudaError_t st_cuda_model_ctx_create(st_cuda_model_ctx **ctx, const st_model *m,
                                     cudaStream_t stream, size_t gemm_workspace_bytes)
{
    *ctx = nullptr;
    st_cuda_model_ctx *x = (st_cuda_model_ctx *)calloc(1, sizeof *x);
    if (!x)
        return cudaErrorMemoryAllocation;
    x->stream = stream;
    cudaError_t e = st_cuda_gemm_create(&x->gemm, gemm_workspace_bytes);
    if (e == cudaSuccess && arch_of(m).rope && m->rope_cos) {
        const size_t bytes = sizeof(float) * (size_t)(m->T * (m->hd / 2));
        e = cudaMalloc(&x->rope_cos, bytes);
        if (e == cudaSuccess)
            e = cudaMalloc(&x->rope_sin, bytes);
        if (e == cudaSuccess)
            e = cudaMemcpy(x->rope_cos, m->rope_cos, bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess)
            e = cudaMemcpy(x->rope_sin, m->rope_sin, bytes, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        st_cuda_model_ctx_destroy(x);
        return e;
    }
    *ctx = x;
    return cudaSuccess;
}

void st_cuda_model_ctx_destroy(st_cuda_model_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->gemm)
        st_cuda_gemm_destroy(ctx->gemm);
    cudaFree(ctx->rope_cos);
    cudaFree(ctx->rope_sin);
    cudaFree(ctx->embed_ws);
    free(ctx);
}

size_t st_cuda_block_acts_bytes(const st_model *m, int64_t B, int dtype)
{
    st_cuda_block_acts a;
    return layout_acts(&a, m, B, dtype, nullptr);
}

void st_cuda_block_acts_bind(st_cuda_block_acts *a, const st_model *m, int64_t B,
                             int dtype, void *mem)
{
    layout_acts(a, m, B, dtype, mem);
}

int64_t st_cuda_head_chunk_rows(const st_model *m, int64_t B, int dtype)
{
    const size_t budget = g_head_chunk_bytes ? g_head_chunk_bytes : ST_CUDA_HEAD_CHUNK_BYTES;
    const int64_t N = B * m->T;
    const int64_t most = (int64_t)(budget / (elem_bytes(dtype) * (size_t)st_cuda_head_ld(m)));
    if (most >= N)
        return N > 1 ? N : 1;
    if (most <= 1)
        return 1;
    /* Equal chunks (the last at most one row short): as many products as
     * the budget forces, none of them a thin remainder. */
    const int64_t n_chunks = (N + most - 1) / most;
    return (N + n_chunks - 1) / n_chunks;
}

size_t st_cuda_set_head_chunk_bytes(size_t bytes)
{
    const size_t old = g_head_chunk_bytes ? g_head_chunk_bytes : ST_CUDA_HEAD_CHUNK_BYTES;
    g_head_chunk_bytes = bytes;
    return old;
}

size_t st_cuda_model_scratch_bytes(const st_model *m, int64_t B, int dtype)
{
    size_t block, head;
    if (dtype == ST_CUDA_BF16) {
        BlockScratch<uint16_t> b;
        HeadScratch<uint16_t> h;
        block = layout_block_scratch(&b, m, B, nullptr);
        head = layout_head_scratch(&h, m, B, nullptr);
    } else {
        BlockScratch<float> b;
        HeadScratch<float> h;
        block = layout_block_scratch(&b, m, B, nullptr);
        head = layout_head_scratch(&h, m, B, nullptr);
    }
    return block > head ? block : head;
}

cudaError_t st_cuda_model_embed_forward_f32(const st_model *m, const float *p,
                                            const int32_t *tokens, int64_t B, float *out,
                                            st_cuda_model_ctx *ctx)
{
    return embed_forward_t(m, p, tokens, B, out, ctx);
}
cudaError_t st_cuda_model_embed_backward_f32(const st_model *m, float *g,
                                             const int32_t *tokens, int64_t B,
                                             const float *dout, st_cuda_model_ctx *ctx)
{
    return embed_backward_t(m, g, tokens, B, dout, ctx);
}
cudaError_t st_cuda_model_head_forward_backward_f32(
    const st_model *m, const float *head_p, const float *embed_p, float *head_g,
    float *embed_g, int64_t B, const float *in, const int32_t *targets, float grad_scale,
    float *din, float *logits_out, void *scratch, double *loss_sum,
    st_cuda_model_ctx *ctx)
{
    return head_t(m, head_p, embed_p, head_g, embed_g, B, in, targets, grad_scale, din,
                  logits_out, scratch, loss_sum, ctx);
}

cudaError_t st_cuda_model_embed_forward_bf16(const st_model *m, const uint16_t *p,
                                             const int32_t *tokens, int64_t B,
                                             uint16_t *out, st_cuda_model_ctx *ctx)
{
    return embed_forward_t(m, p, tokens, B, out, ctx);
}
cudaError_t st_cuda_model_embed_backward_bf16(const st_model *m, float *g,
                                              const int32_t *tokens, int64_t B,
                                              const uint16_t *dout, st_cuda_model_ctx *ctx)
{
    return embed_backward_t(m, g, tokens, B, dout, ctx);
}
cudaError_t st_cuda_model_head_forward_backward_bf16(
    const st_model *m, const uint16_t *head_p, const uint16_t *embed_p, float *head_g,
    float *embed_g, int64_t B, const uint16_t *in, const int32_t *targets,
    float grad_scale, uint16_t *din, float *logits_out, void *scratch, double *loss_sum,
    st_cuda_model_ctx *ctx)
{
    return head_t(m, head_p, embed_p, head_g, embed_g, B, in, targets, grad_scale, din,
                  logits_out, scratch, loss_sum, ctx);
}

} /* extern "C" */
