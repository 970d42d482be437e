/* The model's units on the GPU (cuda/model_cuda.h): src/kernels/cpu_model.c's
 * embedding, block and head, transcribed op for op onto the kernels of
 * cuda/ops.h and cuda/attention.h.  Each function body is written once as
 * a template over the storage type S (float, or uint16_t bf16 words) and
 * keeps the CPU's order of operations and buffer reuse, so that the two
 * backends can be compared step by step; the only structural differences
 * are that the loss stays on the device, that in bf16 mode the head
 * rounds each chunk's logit gradient to bf16 before its two products
 * (cuBLASLt wants both inputs of a product in one type), and that the
 * head pads and chunks its logits its own way (model_cuda.h says why).
 *
 * Memory layout of the saved activations and of the scratch is computed by
 * one function per buffer (layout_acts, layout_*_scratch) that serves both
 * the size query and the binding, so the two cannot drift apart. */
#include "model_cuda.h"

#include "attention.h"
#include "common.cuh"

#include <stdlib.h>

namespace {

/* Tensors of a block unit, in layout order (as in src/kernels/cpu_model.c). */
enum { G_LN1W, G_LN1B, G_ATTW, G_ATTB, G_CPRW, G_CPRB, G_LN2W, G_LN2B,
       G_FCW, G_FCB, G_PRJW, G_PRJB };
enum { L_NORM1, L_Q, L_K, L_V, L_O, L_NORM2, L_GATE, L_UP, L_DOWN };

size_t g_head_chunk_bytes = 0; /* 0: ST_CUDA_HEAD_CHUNK_BYTES */
/* cudaMalloc alignment; also the largest alignment cuBLASLt asks about. */
const size_t kAlign = 256;

template <class S> struct dtype_of;
template <> struct dtype_of<float> { static const int v = ST_CUDA_F32; };
template <> struct dtype_of<uint16_t> { static const int v = ST_CUDA_BF16; };

template <class S>
const S *tp(const st_model *m, int u, int idx, const S *p)
{
    return p + m->tensors[m->units[u].first_tensor + idx].offset;
}
float *tg(const st_model *m, int u, int idx, float *g)
{
    return g + m->tensors[m->units[u].first_tensor + idx].offset;
}
int64_t qkv_width(const st_model *m) { return (m->H + 2 * m->KV) * m->hd; }

/* Sequential carving of one allocation.  With base == NULL it only counts,
 * which is how the size functions reuse the binding code. */
struct Carve {
    char *base;
    size_t off = 0;
    explicit Carve(void *b) : base((char *)b) {}
    template <class X> X *take(int64_t n)
    {
        X *r = base ? (X *)(base + off) : nullptr;
        off += ((size_t)n * sizeof(X) + kAlign - 1) / kAlign * kAlign;
        return r;
    }
    void *take_bytes(size_t n)
    {
        void *r = base ? base + off : nullptr;
        off += (n + kAlign - 1) / kAlign * kAlign;
        return r;
    }
};

size_t elem_bytes(int dtype) { return dtype == ST_CUDA_BF16 ? 2 : 4; }

size_t layout_acts(st_cuda_block_acts *a, const st_model *m, int64_t B, int dtype,
                   void *mem)
{
    const int64_t N = B * m->T, C = m->C, F = m->F;
    const int64_t fc = m->arch == ST_ARCH_LLAMA ? 2 * F : F;
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

/* Block backward scratch, as the CPU's (d_ln holds d_ln2, later d_ln1),
 * plus the attention backward's workspace and the partial column sums of
 * the bias and norm gradients (reused by each of those calls in turn). */
template <class S> struct BlockScratch {
    S *d_act, *d_fc, *d_ln, *d_res_mid, *d_att, *d_qkv;
    void *attn_ws, *red_ws;
};
template <class S>
size_t layout_block_scratch(BlockScratch<S> *s, const st_model *m, int64_t B, void *mem)
{
    const int64_t N = B * m->T, C = m->C, F = m->F;
    const int64_t fcw = m->arch == ST_ARCH_LLAMA ? 2 * F : F;
    Carve c(mem);
    s->d_act = c.take<S>(N * F);
    s->d_fc = c.take<S>(N * fcw);
    s->d_ln = c.take<S>(N * C);
    s->d_res_mid = c.take<S>(N * C);
    s->d_att = c.take<S>(N * m->H * m->hd);
    s->d_qkv = c.take<S>(N * qkv_width(m));
    s->attn_ws = c.take_bytes(st_cuda_attention_backward_workspace_bytes(B, m->H, m->T));
    const int64_t widest_bias = fcw > qkv_width(m) ? fcw : qkv_width(m);
    const size_t bias_ws = st_cuda_bias_backward_workspace_bytes(N, widest_bias);
    const size_t norm_ws = st_cuda_norm_backward_workspace_bytes(N, C);
    s->red_ws = c.take_bytes(bias_ws > norm_ws ? bias_ws : norm_ws);
    return c.off;
}

/* Head scratch: the normed input and its statistics and gradient for all
 * rows, then one chunk of fp32 logits (overwritten by their gradient), in
 * bf16 mode that gradient rounded to bf16, the chunk's row losses and its
 * loss sum, and the norm backward's partial column sums.  Logit rows are
 * st_cuda_head_ld apart (16-byte aligned). */
template <class S> struct HeadScratch {
    S *xn, *dxn;
    float *mean, *rstd, *logits, *row_loss;
    uint16_t *dlogits_bf16;
    double *chunk_loss;
    void *red_ws;
};
template <class S>
size_t layout_head_scratch(HeadScratch<S> *s, const st_model *m, int64_t B, void *mem)
{
    const int64_t N = B * m->T, C = m->C, Vp = st_cuda_head_ld(m);
    const int64_t chunk = st_cuda_head_chunk_rows(m, B);
    Carve c(mem);
    s->xn = c.take<S>(N * C);
    s->mean = c.take<float>(N);
    s->rstd = c.take<float>(N);
    s->dxn = c.take<S>(N * C);
    s->logits = c.take<float>(chunk * Vp);
    s->dlogits_bf16 = dtype_of<S>::v == ST_CUDA_BF16 ? c.take<uint16_t>(chunk * Vp) : nullptr;
    s->row_loss = c.take<float>(chunk);
    s->chunk_loss = c.take<double>(1);
    s->red_ws = c.take_bytes(st_cuda_norm_backward_workspace_bytes(N, C));
    return c.off;
}

/* ---- the ops of cuda/ops.h and attention.h, overloaded on S --------------- */

inline cudaError_t attn_status(int r)
{
    return r == 0 ? cudaSuccess
                  : r == ST_CUDA_ATTN_EINVAL ? cudaErrorInvalidValue : (cudaError_t)r;
}

#define OVERLOAD_PAIR(decl_f, call_f, decl_b, call_b)                                     \
    inline cudaError_t decl_f { return call_f; }                                           \
    inline cudaError_t decl_b { return call_b; }

OVERLOAD_PAIR(
    add_bias(float *o, const float *b, int64_t N, int64_t C, cudaStream_t s),
    st_cuda_add_bias_f32(o, b, N, C, s),
    add_bias(uint16_t *o, const uint16_t *b, int64_t N, int64_t C, cudaStream_t s),
    st_cuda_add_bias_bf16(o, b, N, C, s))
OVERLOAD_PAIR(
    bias_backward(float *db, const float *d, int64_t N, int64_t C, void *ws,
                  cudaStream_t s),
    st_cuda_bias_backward_f32(db, d, N, C, ws, s),
    bias_backward(float *db, const uint16_t *d, int64_t N, int64_t C, void *ws,
                  cudaStream_t s),
    st_cuda_bias_backward_bf16(db, d, N, C, ws, s))
OVERLOAD_PAIR(
    gelu_forward(float *o, const float *x, int64_t n, cudaStream_t s),
    st_cuda_gelu_forward_f32(o, x, n, s),
    gelu_forward(uint16_t *o, const uint16_t *x, int64_t n, cudaStream_t s),
    st_cuda_gelu_forward_bf16(o, x, n, s))
OVERLOAD_PAIR(
    gelu_backward(float *dx, const float *x, const float *d, int64_t n, cudaStream_t s),
    st_cuda_gelu_backward_f32(dx, x, d, n, s),
    gelu_backward(uint16_t *dx, const uint16_t *x, const uint16_t *d, int64_t n,
                  cudaStream_t s),
    st_cuda_gelu_backward_bf16(dx, x, d, n, s))
OVERLOAD_PAIR(
    swiglu_forward(float *o, const float *gu, int64_t N, int64_t F, cudaStream_t s),
    st_cuda_swiglu_forward_f32(o, gu, N, F, s),
    swiglu_forward(uint16_t *o, const uint16_t *gu, int64_t N, int64_t F, cudaStream_t s),
    st_cuda_swiglu_forward_bf16(o, gu, N, F, s))
OVERLOAD_PAIR(
    swiglu_backward(float *dgu, const float *gu, const float *d, int64_t N, int64_t F,
                    cudaStream_t s),
    st_cuda_swiglu_backward_f32(dgu, gu, d, N, F, s),
    swiglu_backward(uint16_t *dgu, const uint16_t *gu, const uint16_t *d, int64_t N,
                    int64_t F, cudaStream_t s),
    st_cuda_swiglu_backward_bf16(dgu, gu, d, N, F, s))
OVERLOAD_PAIR(
    rope_apply(float *x, int64_t ld, int64_t B, int64_t T, int64_t nh, int64_t hd,
               const float *c, const float *sn, int inv, cudaStream_t s),
    st_cuda_rope_apply_f32(x, ld, B, T, nh, hd, c, sn, inv, s),
    rope_apply(uint16_t *x, int64_t ld, int64_t B, int64_t T, int64_t nh, int64_t hd,
               const float *c, const float *sn, int inv, cudaStream_t s),
    st_cuda_rope_apply_bf16(x, ld, B, T, nh, hd, c, sn, inv, s))
OVERLOAD_PAIR(
    embed_forward(float *o, const float *wte, const float *wpe, const int32_t *tok,
                  int64_t B, int64_t T, int64_t C, cudaStream_t s),
    st_cuda_embed_forward_f32(o, wte, wpe, tok, B, T, C, s),
    embed_forward(uint16_t *o, const uint16_t *wte, const uint16_t *wpe,
                  const int32_t *tok, int64_t B, int64_t T, int64_t C, cudaStream_t s),
    st_cuda_embed_forward_bf16(o, wte, wpe, tok, B, T, C, s))
OVERLOAD_PAIR(
    embed_backward(float *dwte, float *dwpe, const int32_t *tok, const float *d,
                   int64_t B, int64_t T, int64_t C, void *ws, cudaStream_t s),
    st_cuda_embed_backward_f32(dwte, dwpe, tok, d, B, T, C, ws, s),
    embed_backward(float *dwte, float *dwpe, const int32_t *tok, const uint16_t *d,
                   int64_t B, int64_t T, int64_t C, void *ws, cudaStream_t s),
    st_cuda_embed_backward_bf16(dwte, dwpe, tok, d, B, T, C, ws, s))
OVERLOAD_PAIR(
    layernorm_forward(float *o, float *mu, float *rs, const float *x, const float *w,
                      const float *b, int64_t N, int64_t C, float eps, cudaStream_t s),
    st_cuda_layernorm_forward_f32(o, mu, rs, x, w, b, N, C, eps, s),
    layernorm_forward(uint16_t *o, float *mu, float *rs, const uint16_t *x,
                      const uint16_t *w, const uint16_t *b, int64_t N, int64_t C,
                      float eps, cudaStream_t s),
    st_cuda_layernorm_forward_bf16(o, mu, rs, x, w, b, N, C, eps, s))
OVERLOAD_PAIR(
    layernorm_backward(float *dx, float *dw, float *db, const float *d, const float *x,
                       const float *w, const float *mu, const float *rs, int64_t N,
                       int64_t C, void *ws, cudaStream_t s),
    st_cuda_layernorm_backward_f32(dx, dw, db, d, x, w, mu, rs, N, C, ws, s),
    layernorm_backward(uint16_t *dx, float *dw, float *db, const uint16_t *d,
                       const uint16_t *x, const uint16_t *w, const float *mu,
                       const float *rs, int64_t N, int64_t C, void *ws,
                       cudaStream_t s),
    st_cuda_layernorm_backward_bf16(dx, dw, db, d, x, w, mu, rs, N, C, ws, s))
OVERLOAD_PAIR(
    rmsnorm_forward(float *o, float *rs, const float *x, const float *w, int64_t N,
                    int64_t C, float eps, cudaStream_t s),
    st_cuda_rmsnorm_forward_f32(o, rs, x, w, N, C, eps, s),
    rmsnorm_forward(uint16_t *o, float *rs, const uint16_t *x, const uint16_t *w,
                    int64_t N, int64_t C, float eps, cudaStream_t s),
    st_cuda_rmsnorm_forward_bf16(o, rs, x, w, N, C, eps, s))
OVERLOAD_PAIR(
    rmsnorm_backward(float *dx, float *dw, const float *d, const float *x, const float *w,
                     const float *rs, int64_t N, int64_t C, void *ws, cudaStream_t s),
    st_cuda_rmsnorm_backward_f32(dx, dw, d, x, w, rs, N, C, ws, s),
    rmsnorm_backward(uint16_t *dx, float *dw, const uint16_t *d, const uint16_t *x,
                     const uint16_t *w, const float *rs, int64_t N, int64_t C,
                     void *ws, cudaStream_t s),
    st_cuda_rmsnorm_backward_bf16(dx, dw, d, x, w, rs, N, C, ws, s))
OVERLOAD_PAIR(
    attention_forward(float *o, int64_t ldo, float *lse, const float *q, int64_t ldq,
                      const float *k, int64_t ldk, const float *v, int64_t ldv, int64_t B,
                      int64_t T, int64_t H, int64_t KV, int64_t hd, cudaStream_t s),
    attn_status(st_cuda_attention_forward_f32(o, ldo, lse, q, ldq, k, ldk, v, ldv, B, T,
                                              H, KV, hd, s)),
    attention_forward(uint16_t *o, int64_t ldo, float *lse, const uint16_t *q,
                      int64_t ldq, const uint16_t *k, int64_t ldk, const uint16_t *v,
                      int64_t ldv, int64_t B, int64_t T, int64_t H, int64_t KV,
                      int64_t hd, cudaStream_t s),
    attn_status(st_cuda_attention_forward_bf16(o, ldo, lse, q, ldq, k, ldk, v, ldv, B, T,
                                               H, KV, hd, s)))
OVERLOAD_PAIR(
    attention_backward(float *dq, int64_t lq, float *dk, int64_t lk, float *dv, int64_t lv,
                       const float *d, int64_t ld, const float *o, int64_t lo,
                       const float *lse, const float *q, int64_t ldq, const float *k,
                       int64_t ldk, const float *v, int64_t ldv, int64_t B, int64_t T,
                       int64_t H, int64_t KV, int64_t hd, void *ws, cudaStream_t s),
    attn_status(st_cuda_attention_backward_f32(dq, lq, dk, lk, dv, lv, d, ld, o, lo, lse,
                                               q, ldq, k, ldk, v, ldv, B, T, H, KV, hd,
                                               ws, s)),
    attention_backward(uint16_t *dq, int64_t lq, uint16_t *dk, int64_t lk, uint16_t *dv,
                       int64_t lv, const uint16_t *d, int64_t ld, const uint16_t *o,
                       int64_t lo, const float *lse, const uint16_t *q, int64_t ldq,
                       const uint16_t *k, int64_t ldk, const uint16_t *v, int64_t ldv,
                       int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, void *ws,
                       cudaStream_t s),
    attn_status(st_cuda_attention_backward_bf16(dq, lq, dk, lk, dv, lv, d, ld, o, lo, lse,
                                                q, ldq, k, ldk, v, ldv, B, T, H, KV, hd,
                                                ws, s)))
#undef OVERLOAD_PAIR

#define TRY(call)                                                                          \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return e_;                                                                     \
    } while (0)

/* C = beta*C + op(A) op(B) with A, B in storage type S; C in type S or
 * float (parameter gradients). */
template <class S, class CT>
cudaError_t mm(st_cuda_model_ctx *x, int ta, int tb, int64_t M, int64_t N, int64_t K,
               const S *A, int64_t lda, const S *B, int64_t ldb, float beta, CT *C,
               int64_t ldc)
{
    return st_cuda_gemm(x->gemm, dtype_of<S>::v, dtype_of<CT>::v, ta, tb, M, N, K, A, lda,
                        B, ldb, beta, C, ldc, x->stream);
}

/* src/kernels/cpu_model.c's linear_forward/linear_backward: Conv1D (GPT-2) weights are
 * [in, out] and y = x W; Linear (Llama) weights are [out, in], y = x W^T. */
template <class S>
cudaError_t linear_forward(st_cuda_model_ctx *x, int conv1d, S *y, int64_t ldy,
                           const S *in, int64_t ldx, const S *W, int64_t N, int64_t n_in,
                           int64_t n_out, float beta)
{
    if (conv1d)
        return mm(x, 0, 0, N, n_out, n_in, in, ldx, W, n_out, beta, y, ldy);
    return mm(x, 0, 1, N, n_out, n_in, in, ldx, W, n_in, beta, y, ldy);
}

template <class S>
cudaError_t linear_backward(st_cuda_model_ctx *x, int conv1d, S *dx, float dx_beta,
                            float *dW, const S *dy, int64_t lddy, const S *in, int64_t ldx,
                            const S *W, int64_t N, int64_t n_in, int64_t n_out)
{
    if (conv1d) {
        TRY(mm(x, 1, 0, n_in, n_out, N, in, ldx, dy, lddy, 1.0f, dW, n_out));
        if (dx)
            TRY(mm(x, 0, 1, N, n_in, n_out, dy, lddy, W, n_out, dx_beta, dx, n_in));
    } else {
        TRY(mm(x, 1, 0, n_out, n_in, N, dy, lddy, in, ldx, 1.0f, dW, n_in));
        if (dx)
            TRY(mm(x, 0, 0, N, n_in, n_out, dy, lddy, W, n_in, dx_beta, dx, n_in));
    }
    return cudaSuccess;
}

template <class S>
cudaError_t copy(S *dst, const S *src, int64_t n, cudaStream_t s)
{
    return cudaMemcpyAsync(dst, src, sizeof(S) * (size_t)n, cudaMemcpyDeviceToDevice, s);
}

/* *acc += *x in double, on the stream: the CPU's `loss += chunk` without a
 * round trip to the host. */
__global__ void add_double_kernel(double *acc, const double *x) { *acc += *x; }

/* ---- the units ------------------------------------------------------------- */

template <class S>
cudaError_t embed_forward_t(const st_model *m, const S *p, const int32_t *tokens,
                            int64_t B, S *out, st_cuda_model_ctx *x)
{
    const S *wpe = m->arch == ST_ARCH_GPT2 ? p + m->V * m->C : nullptr;
    return embed_forward(out, p, wpe, tokens, B, m->T, m->C, x->stream);
}

template <class S>
cudaError_t embed_backward_t(const st_model *m, float *g, const int32_t *tokens,
                             int64_t B, const S *dout, st_cuda_model_ctx *x)
{
    float *dwpe = m->arch == ST_ARCH_GPT2 ? g + m->V * m->C : nullptr;
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
    return embed_backward(g, dwpe, tokens, dout, B, m->T, m->C, x->embed_ws, x->stream);
}

template <class S>
cudaError_t block_forward_t(const st_model *m, const S *p, int64_t B, const S *in, S *out,
                            const st_cuda_block_acts *ap, st_cuda_model_ctx *x)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int uu = 1; /* tensor offsets are the same in every block unit */
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const cudaStream_t s = x->stream;
    S *ln1 = (S *)ap->ln1, *qkv = (S *)ap->qkv, *att = (S *)ap->att;
    S *res_mid = (S *)ap->res_mid, *ln2 = (S *)ap->ln2, *fc = (S *)ap->fc;
    S *act = (S *)ap->act;

    if (gpt2) {
        TRY(layernorm_forward(ln1, ap->ln1_mean, ap->ln1_rstd, in, tp(m, uu, G_LN1W, p),
                              tp(m, uu, G_LN1B, p), N, C, m->eps, s));
        TRY(linear_forward(x, 1, qkv, W, ln1, C, tp(m, uu, G_ATTW, p), N, C, 3 * C, 0.0f));
        TRY(add_bias(qkv, tp(m, uu, G_ATTB, p), N, 3 * C, s));
    } else {
        TRY(rmsnorm_forward(ln1, ap->ln1_rstd, in, tp(m, uu, L_NORM1, p), N, C, m->eps, s));
        TRY(linear_forward(x, 0, qkv, W, ln1, C, tp(m, uu, L_Q, p), N, C, qd, 0.0f));
        TRY(linear_forward(x, 0, qkv + qd, W, ln1, C, tp(m, uu, L_K, p), N, C, kvd, 0.0f));
        TRY(linear_forward(x, 0, qkv + qd + kvd, W, ln1, C, tp(m, uu, L_V, p), N, C, kvd,
                           0.0f));
        TRY(rope_apply(qkv, W, B, m->T, m->H, m->hd, x->rope_cos, x->rope_sin, 0, s));
        TRY(rope_apply(qkv + qd, W, B, m->T, m->KV, m->hd, x->rope_cos, x->rope_sin, 0, s));
    }
    TRY(attention_forward(att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B, m->T,
                          m->H, m->KV, m->hd, s));
    /* residual: res_mid = in + att W_o (+ b) */
    TRY(copy(res_mid, in, N * C, s));
    if (gpt2) {
        TRY(linear_forward(x, 1, res_mid, C, att, C, tp(m, uu, G_CPRW, p), N, C, C, 1.0f));
        TRY(add_bias(res_mid, tp(m, uu, G_CPRB, p), N, C, s));
        TRY(layernorm_forward(ln2, ap->ln2_mean, ap->ln2_rstd, res_mid,
                              tp(m, uu, G_LN2W, p), tp(m, uu, G_LN2B, p), N, C, m->eps, s));
        TRY(linear_forward(x, 1, fc, F, ln2, C, tp(m, uu, G_FCW, p), N, C, F, 0.0f));
        TRY(add_bias(fc, tp(m, uu, G_FCB, p), N, F, s));
        TRY(gelu_forward(act, fc, N * F, s));
        TRY(copy(out, (const S *)res_mid, N * C, s));
        TRY(linear_forward(x, 1, out, C, act, F, tp(m, uu, G_PRJW, p), N, F, C, 1.0f));
        TRY(add_bias(out, tp(m, uu, G_PRJB, p), N, C, s));
    } else {
        TRY(linear_forward(x, 0, res_mid, C, att, qd, tp(m, uu, L_O, p), N, qd, C, 1.0f));
        TRY(rmsnorm_forward(ln2, ap->ln2_rstd, res_mid, tp(m, uu, L_NORM2, p), N, C, m->eps,
                            s));
        TRY(linear_forward(x, 0, fc, 2 * F, ln2, C, tp(m, uu, L_GATE, p), N, C, F, 0.0f));
        TRY(linear_forward(x, 0, fc + F, 2 * F, ln2, C, tp(m, uu, L_UP, p), N, C, F, 0.0f));
        TRY(swiglu_forward(act, fc, N, F, s));
        TRY(copy(out, (const S *)res_mid, N * C, s));
        TRY(linear_forward(x, 0, out, C, act, F, tp(m, uu, L_DOWN, p), N, F, C, 1.0f));
    }
    return cudaSuccess;
}

template <class S>
cudaError_t block_backward_t(const st_model *m, const S *p, float *g, int64_t B,
                             const S *in, const st_cuda_block_acts *ap, const S *dout,
                             S *din, void *scratch, st_cuda_model_ctx *x)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int uu = 1;
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const cudaStream_t s = x->stream;
    const S *ln1 = (const S *)ap->ln1, *qkv = (const S *)ap->qkv;
    const S *att = (const S *)ap->att, *res_mid = (const S *)ap->res_mid;
    const S *ln2 = (const S *)ap->ln2, *fc = (const S *)ap->fc, *act = (const S *)ap->act;
    BlockScratch<S> sc;
    layout_block_scratch(&sc, m, B, scratch);

    /* MLP: out = res_mid + mlp(norm2(res_mid)) */
    if (gpt2) {
        TRY(linear_backward(x, 1, sc.d_act, 0.0f, tg(m, uu, G_PRJW, g), dout, C, act, F,
                            tp(m, uu, G_PRJW, p), N, F, C));
        TRY(bias_backward(tg(m, uu, G_PRJB, g), dout, N, C, sc.red_ws, s));
        TRY(gelu_backward(sc.d_fc, fc, sc.d_act, N * F, s));
        TRY(linear_backward(x, 1, sc.d_ln, 0.0f, tg(m, uu, G_FCW, g), sc.d_fc, F, ln2, C,
                            tp(m, uu, G_FCW, p), N, C, F));
        TRY(bias_backward(tg(m, uu, G_FCB, g), sc.d_fc, N, F, sc.red_ws, s));
        TRY(copy(sc.d_res_mid, dout, N * C, s));
        TRY(layernorm_backward(sc.d_res_mid, tg(m, uu, G_LN2W, g), tg(m, uu, G_LN2B, g),
                               sc.d_ln, res_mid, tp(m, uu, G_LN2W, p), ap->ln2_mean,
                               ap->ln2_rstd, N, C, sc.red_ws, s));
    } else {
        TRY(linear_backward(x, 0, sc.d_act, 0.0f, tg(m, uu, L_DOWN, g), dout, C, act, F,
                            tp(m, uu, L_DOWN, p), N, F, C));
        TRY(swiglu_backward(sc.d_fc, fc, sc.d_act, N, F, s));
        TRY(linear_backward(x, 0, sc.d_ln, 0.0f, tg(m, uu, L_GATE, g), sc.d_fc, 2 * F, ln2,
                            C, tp(m, uu, L_GATE, p), N, C, F));
        TRY(linear_backward(x, 0, sc.d_ln, 1.0f, tg(m, uu, L_UP, g), sc.d_fc + F, 2 * F, ln2,
                            C, tp(m, uu, L_UP, p), N, C, F));
        TRY(copy(sc.d_res_mid, dout, N * C, s));
        TRY(rmsnorm_backward(sc.d_res_mid, tg(m, uu, L_NORM2, g), sc.d_ln, res_mid,
                             tp(m, uu, L_NORM2, p), ap->ln2_rstd, N, C, sc.red_ws, s));
    }

    /* Attention: res_mid = in + proj(attention(qkv(norm1(in)))) */
    if (gpt2) {
        TRY(linear_backward(x, 1, sc.d_att, 0.0f, tg(m, uu, G_CPRW, g), sc.d_res_mid, C,
                            att, C, tp(m, uu, G_CPRW, p), N, C, C));
        TRY(bias_backward(tg(m, uu, G_CPRB, g), sc.d_res_mid, N, C, sc.red_ws, s));
    } else {
        TRY(linear_backward(x, 0, sc.d_att, 0.0f, tg(m, uu, L_O, g), sc.d_res_mid, C, att,
                            qd, tp(m, uu, L_O, p), N, qd, C));
    }
    TRY(attention_backward(sc.d_qkv, W, sc.d_qkv + qd, W, sc.d_qkv + qd + kvd, W, sc.d_att,
                           qd, att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B,
                           m->T, m->H, m->KV, m->hd, sc.attn_ws, s));
    S *d_ln1 = sc.d_ln;
    TRY(copy(din, (const S *)sc.d_res_mid, N * C, s));
    if (gpt2) {
        TRY(linear_backward(x, 1, d_ln1, 0.0f, tg(m, uu, G_ATTW, g), sc.d_qkv, W, ln1, C,
                            tp(m, uu, G_ATTW, p), N, C, 3 * C));
        TRY(bias_backward(tg(m, uu, G_ATTB, g), sc.d_qkv, N, 3 * C, sc.red_ws, s));
        TRY(layernorm_backward(din, tg(m, uu, G_LN1W, g), tg(m, uu, G_LN1B, g), d_ln1, in,
                               tp(m, uu, G_LN1W, p), ap->ln1_mean, ap->ln1_rstd, N, C,
                               sc.red_ws, s));
    } else {
        /* RoPE is a rotation: its backward rotates by the opposite angle. */
        TRY(rope_apply(sc.d_qkv, W, B, m->T, m->H, m->hd, x->rope_cos, x->rope_sin, 1, s));
        TRY(rope_apply(sc.d_qkv + qd, W, B, m->T, m->KV, m->hd, x->rope_cos, x->rope_sin, 1,
                       s));
        TRY(linear_backward(x, 0, d_ln1, 0.0f, tg(m, uu, L_Q, g), sc.d_qkv, W, ln1, C,
                            tp(m, uu, L_Q, p), N, C, qd));
        TRY(linear_backward(x, 0, d_ln1, 1.0f, tg(m, uu, L_K, g), sc.d_qkv + qd, W, ln1, C,
                            tp(m, uu, L_K, p), N, C, kvd));
        TRY(linear_backward(x, 0, d_ln1, 1.0f, tg(m, uu, L_V, g), sc.d_qkv + qd + kvd, W,
                            ln1, C, tp(m, uu, L_V, p), N, C, kvd));
        TRY(rmsnorm_backward(din, tg(m, uu, L_NORM1, g), d_ln1, in, tp(m, uu, L_NORM1, p),
                             ap->ln1_rstd, N, C, sc.red_ws, s));
    }
    return cudaSuccess;
}

/* The gradient of a logits chunk in the product type: in fp32 mode the
 * logits buffer itself (overwritten in place by the cross-entropy, as on
 * the CPU); in bf16 mode a rounded copy, since cuBLASLt takes both inputs
 * of a product in one type and the weight is bf16 (whole padded rows). */
inline cudaError_t dlogits_as(const float **out, float *logits, uint16_t *, int64_t,
                              cudaStream_t)
{
    *out = logits;
    return cudaSuccess;
}
inline cudaError_t dlogits_as(const uint16_t **out, float *logits, uint16_t *buf,
                              int64_t n, cudaStream_t s)
{
    *out = buf;
    return st_cuda_pack_bf16(buf, logits, n, s);
}

template <class S>
cudaError_t head_t(const st_model *m, const S *head_p, const S *embed_p, float *head_g,
                   float *embed_g, int64_t B, const S *in, const int32_t *targets,
                   float grad_scale, S *din, float *logits_out, void *scratch,
                   double *loss_sum, st_cuda_model_ctx *x)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int hu = st_model_head_unit(m);
    const int64_t N = B * m->T, C = m->C, V = m->V;
    const int backward = grad_scale != 0.0f;
    const cudaStream_t s = x->stream;
    HeadScratch<S> sc;
    layout_head_scratch(&sc, m, B, scratch);
    const S *normw = tp(m, hu, 0, head_p);
    /* Output weight [V, C]: the head's own, or the tied token embedding. */
    const S *Wout = m->tied ? embed_p : tp(m, hu, gpt2 ? 2 : 1, head_p);
    float *dWout = !backward ? nullptr : m->tied ? embed_g : tg(m, hu, gpt2 ? 2 : 1, head_g);

    if (gpt2)
        TRY(layernorm_forward(sc.xn, sc.mean, sc.rstd, in, normw, tp(m, hu, 1, head_p), N,
                              C, m->eps, s));
    else
        TRY(rmsnorm_forward(sc.xn, sc.rstd, in, normw, N, C, m->eps, s));

    /* The padding the bf16 rounding copies along is zeroed, never read. */
    const int64_t Vp = st_cuda_head_ld(m), chunk = st_cuda_head_chunk_rows(m, B);
    if (backward && dtype_of<S>::v == ST_CUDA_BF16 && Vp > V)
        TRY(cudaMemset2DAsync(sc.logits + V, sizeof(float) * Vp, 0,
                              sizeof(float) * (Vp - V), chunk, s));
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        const int64_t rows = N - r0 < chunk ? N - r0 : chunk;
        TRY(mm(x, 0, 1, rows, V, C, (const S *)sc.xn + r0 * C, C, Wout, C, 0.0f, sc.logits,
               Vp));
        if (logits_out)
            TRY(cudaMemcpy2DAsync(logits_out + r0 * V, sizeof(float) * V, sc.logits,
                                  sizeof(float) * Vp, sizeof(float) * V, rows,
                                  cudaMemcpyDeviceToDevice, s));
        TRY(st_cuda_softmax_xent_f32(sc.logits, targets + r0, rows, V, Vp, grad_scale,
                                     sc.row_loss, sc.chunk_loss, s));
        add_double_kernel<<<1, 1, 0, s>>>(loss_sum, sc.chunk_loss);
        TRY(cudaGetLastError());
        if (backward) {
            const S *dl;
            TRY(dlogits_as(&dl, sc.logits, sc.dlogits_bf16, rows * Vp, s));
            TRY(mm(x, 0, 0, rows, C, V, dl, Vp, Wout, C, 0.0f, sc.dxn + r0 * C, C));
            TRY(mm(x, 1, 0, V, C, rows, dl, Vp, (const S *)sc.xn + r0 * C, C, 1.0f, dWout,
                   C));
        }
    }
    if (backward) {
        TRY(cudaMemsetAsync(din, 0, sizeof(S) * (size_t)(N * C), s));
        if (gpt2)
            TRY(layernorm_backward(din, tg(m, hu, 0, head_g), tg(m, hu, 1, head_g), sc.dxn,
                                   in, normw, sc.mean, sc.rstd, N, C, sc.red_ws, s));
        else
            TRY(rmsnorm_backward(din, tg(m, hu, 0, head_g), sc.dxn, in, normw, sc.rstd, N, C,
                                 sc.red_ws, s));
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
    if (e == cudaSuccess && m->arch == ST_ARCH_LLAMA && m->rope_cos) {
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

int64_t st_cuda_head_chunk_rows(const st_model *m, int64_t B)
{
    const size_t budget = g_head_chunk_bytes ? g_head_chunk_bytes : ST_CUDA_HEAD_CHUNK_BYTES;
    const int64_t N = B * m->T;
    int64_t rows = (int64_t)(budget / (sizeof(float) * (size_t)st_cuda_head_ld(m)));
    rows = rows < N ? rows : N;
    return rows > 1 ? rows : 1;
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
cudaError_t st_cuda_model_block_forward_f32(const st_model *m, const float *p, int64_t B,
                                            const float *in, float *out,
                                            const st_cuda_block_acts *a,
                                            st_cuda_model_ctx *ctx)
{
    return block_forward_t(m, p, B, in, out, a, ctx);
}
cudaError_t st_cuda_model_block_backward_f32(const st_model *m, const float *p, float *g,
                                             int64_t B, const float *in,
                                             const st_cuda_block_acts *a,
                                             const float *dout, float *din, void *scratch,
                                             st_cuda_model_ctx *ctx)
{
    return block_backward_t(m, p, g, B, in, a, dout, din, scratch, ctx);
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
cudaError_t st_cuda_model_block_forward_bf16(const st_model *m, const uint16_t *p,
                                             int64_t B, const uint16_t *in, uint16_t *out,
                                             const st_cuda_block_acts *a,
                                             st_cuda_model_ctx *ctx)
{
    return block_forward_t(m, p, B, in, out, a, ctx);
}
cudaError_t st_cuda_model_block_backward_bf16(const st_model *m, const uint16_t *p,
                                              float *g, int64_t B, const uint16_t *in,
                                              const st_cuda_block_acts *a,
                                              const uint16_t *dout, uint16_t *din,
                                              void *scratch, st_cuda_model_ctx *ctx)
{
    return block_backward_t(m, p, g, B, in, a, dout, din, scratch, ctx);
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
