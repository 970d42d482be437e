/* What cuda/model_cuda.cu (the context, the embedding and the head) and
 * the block files (cuda/model_common.cu, model_gpt2.cu, model_llama.cu)
 * share: the architectures' traits, the tensor order of a
 * block unit, the carving of one allocation into buffers, the block's
 * scratch layout (the scratch size query needs it too), and the ops of
 * cuda/ops.h and attention.h overloaded on the storage type S, with the
 * products (plain, and with cuBLASLt epilogues) the units are made of.
 * Internal to those files: everything is in an anonymous namespace,
 * so each translation unit has its own copy of these small functions. */
#ifndef ST_CUDA_MODEL_UNITS_CUH
#define ST_CUDA_MODEL_UNITS_CUH

#include "model_cuda.h"

#include "attention.h"
#include "common.cuh"

namespace {

/* Tensors of a block unit, in layout order (as in src/kernels/cpu_model.c). */
enum { G_LN1W, G_LN1B, G_ATTW, G_ATTB, G_CPRW, G_CPRB, G_LN2W, G_LN2B,
       G_FCW, G_FCB, G_PRJW, G_PRJB };
enum { L_NORM1, L_Q, L_K, L_V, L_O, L_NORM2, L_GATE, L_UP, L_DOWN };

/* What the architecture-neutral code (the embedding, the head, the
 * buffer layouts) needs to know of an architecture, one row per enum
 * st_arch (C++ has no array designators: the order is checked). */
struct ArchTraits {
    bool layernorm;   /* LayerNorm with bias (mean kept) rather than RMSNorm */
    bool gated_mlp;   /* fc holds [gate | up], 2F wide, rather than F */
    bool rope;        /* the context keeps the RoPE tables on the device */
    bool wpe;         /* the embedding unit is [wpe, wte] rather than [wte] */
    int head_out;     /* the untied output weight's index in the head unit */
    int pre_act_lora; /* the LoRA target added before the activation, -1 none */
};
static_assert(ST_ARCH_GPT2 == 0 && ST_ARCH_LLAMA == 1, "kArchTraits follows enum st_arch");
const ArchTraits kArchTraits[] = {
    /* GPT-2 */ {true, false, false, true, 2, 2},
    /* Llama */ {false, true, true, false, 1, -1},
};
inline const ArchTraits &arch_of(const st_model *m) { return kArchTraits[m->arch]; }

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
/* NULL for frozen weights (LoRA): no gradient is computed for them. */
inline float *tg(const st_model *m, int u, int idx, float *g)
{
    return g ? g + m->tensors[m->units[u].first_tensor + idx].offset : nullptr;
}
inline int64_t qkv_width(const st_model *m) { return (m->H + 2 * m->KV) * m->hd; }

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

inline size_t elem_bytes(int dtype) { return dtype == ST_CUDA_BF16 ? 2 : 4; }

/* LoRA adapters' buffers (model_common.cuh), reused by each target in turn:
 * the rank-sized products keep their [rows, rank] results at a row stride
 * of the rank rounded up to a multiple of 8 (rp), so that every row stride
 * is 16 bytes in bf16 and fp32 alike (the fast path of cuda/gemm_check.h)
 * for any rank; the products read only the first `rank` columns.  For the
 * same reason B [out, rank] is copied to Bp [out, rp] and its gradient
 * computed into dBp [out, rp] and added to the adapter gradient.  A [rank,
 * in] is used where it lies: its row stride is `in`, as the base layer's
 * input, and its offset in the adapter buffer a sum of rank x (in + out)
 * terms, so it meets the rules whenever the base layers do. */
template <class S> struct LoraScratch {
    int64_t rp;
    S *xd, *dxd;          /* [N, widest in] dropped input; its gradient (dropout only) */
    float *xa32, *dxa32;  /* [N, rp] the products in fp32 */
    S *xa, *dxa;          /* [N, rp] times scale in S (fp32 mode: xa32, dxa32) */
    S *Bp;                /* [widest out, rp] */
    float *dBp;           /* [widest out, rp] */
    S *lo;                /* [N, F] the pre-activation target's output (GPT-2 c_fc) */
};
inline int64_t lora_rank_padded(const st_model *m) { return (m->lora.rank + 7) / 8 * 8; }
template <class S>
void layout_lora_scratch(LoraScratch<S> *l, const st_model *m, int64_t B, Carve &c)
{
    *l = LoraScratch<S>();
    if (!m->lora.rank)
        return;
    const int64_t N = B * m->T, rp = lora_rank_padded(m);
    int64_t in = 0, out = 0;
    for (int i = 0; i < ST_LORA_MAX_TARGETS; i++)
        if (m->lora.a_off[i] >= 0) {
            in = m->lora.in[i] > in ? m->lora.in[i] : in;
            out = m->lora.out[i] > out ? m->lora.out[i] : out;
        }
    l->rp = rp;
    if (m->lora.dropout > 0.0) {
        l->xd = c.take<S>(N * in);
        l->dxd = c.take<S>(N * in);
    }
    l->xa32 = c.take<float>(N * rp);
    l->dxa32 = c.take<float>(N * rp);
    const bool f32 = dtype_of<S>::v == ST_CUDA_F32;
    l->xa = f32 ? (S *)l->xa32 : c.take<S>(N * rp);
    l->dxa = f32 ? (S *)l->dxa32 : c.take<S>(N * rp);
    l->Bp = c.take<S>(out * rp);
    l->dBp = c.take<float>(out * rp);
    const int pre = arch_of(m).pre_act_lora;
    if (pre >= 0 && m->lora.a_off[pre] >= 0)
        l->lo = c.take<S>(N * m->F);
}

/* Block backward scratch, as the CPU's (d_ln holds d_ln2, later d_ln1),
 * plus the attention backward's workspace and the partial column sums of
 * the bias and norm gradients (reused by each of those calls in turn),
 * then the adapters' (none without LoRA; the forward uses them too). */
template <class S> struct BlockScratch {
    S *d_act, *d_fc, *d_ln, *d_res_mid, *d_att, *d_qkv;
    void *attn_ws, *red_ws;
    LoraScratch<S> lora;
};
template <class S>
size_t layout_block_scratch(BlockScratch<S> *s, const st_model *m, int64_t B, void *mem)
{
    const int64_t N = B * m->T, C = m->C, F = m->F;
    const int64_t fcw = arch_of(m).gated_mlp ? 2 * F : F;
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
    layout_lora_scratch(&s->lora, m, B, c);
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
    bias_backward(float *db, const float *d, int64_t N, int64_t C, void *ws,
                  cudaStream_t s),
    st_cuda_bias_backward_f32(db, d, N, C, ws, s),
    bias_backward(float *db, const uint16_t *d, int64_t N, int64_t C, void *ws,
                  cudaStream_t s),
    st_cuda_bias_backward_bf16(db, d, N, C, ws, s))
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
    layernorm_backward(float *dx, const float *dres, float *dw, float *db, const float *d,
                       const float *x, const float *w, const float *mu, const float *rs,
                       int64_t N, int64_t C, void *ws, cudaStream_t s),
    st_cuda_layernorm_backward_f32(dx, dres, dw, db, d, x, w, mu, rs, N, C, ws, s),
    layernorm_backward(uint16_t *dx, const uint16_t *dres, float *dw, float *db,
                       const uint16_t *d, const uint16_t *x, const uint16_t *w,
                       const float *mu, const float *rs, int64_t N, int64_t C, void *ws,
                       cudaStream_t s),
    st_cuda_layernorm_backward_bf16(dx, dres, dw, db, d, x, w, mu, rs, N, C, ws, s))
OVERLOAD_PAIR(
    rmsnorm_forward(float *o, float *rs, const float *x, const float *w, int64_t N,
                    int64_t C, float eps, cudaStream_t s),
    st_cuda_rmsnorm_forward_f32(o, rs, x, w, N, C, eps, s),
    rmsnorm_forward(uint16_t *o, float *rs, const uint16_t *x, const uint16_t *w,
                    int64_t N, int64_t C, float eps, cudaStream_t s),
    st_cuda_rmsnorm_forward_bf16(o, rs, x, w, N, C, eps, s))
OVERLOAD_PAIR(
    rmsnorm_backward(float *dx, const float *dres, float *dw, const float *d, const float *x,
                     const float *w, const float *rs, int64_t N, int64_t C, void *ws,
                     cudaStream_t s),
    st_cuda_rmsnorm_backward_f32(dx, dres, dw, d, x, w, rs, N, C, ws, s),
    rmsnorm_backward(uint16_t *dx, const uint16_t *dres, float *dw, const uint16_t *d,
                     const uint16_t *x, const uint16_t *w, const float *rs, int64_t N,
                     int64_t C, void *ws, cudaStream_t s),
    st_cuda_rmsnorm_backward_bf16(dx, dres, dw, d, x, w, rs, N, C, ws, s))
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
 * [in, out] and y = x W; Linear (Llama) weights are [out, in], y = x W^T.
 * This plain product is Llama's (a Linear, no epilogue); GPT-2's layers all
 * go through linear_forward_epi, so a Conv1D branch here would never run
 * (make coverage-cuda found it so). */
template <class S>
cudaError_t linear_forward(st_cuda_model_ctx *x, S *y, int64_t ldy, const S *in, int64_t ldx,
                           const S *W, int64_t N, int64_t n_in, int64_t n_out, float beta)
{
    return mm(x, 0, 1, N, n_out, n_in, in, ldx, W, n_in, beta, y, ldy);
}

/* A layer's forward as one product with its epilogue (cuda/ops.h):
 * d = epi(beta * c + in W), beta 1 when the residual c is given (c and d
 * distinct, so the residual is read in place of being copied first), bias
 * and aux (GELU's pre-activation, GELU_AUX_BIAS) as the epilogue needs. */
template <class S>
cudaError_t linear_forward_epi(st_cuda_model_ctx *x, int conv1d, S *d, int64_t ldd,
                               const S *in, int64_t ldx, const S *W, int64_t N, int64_t n_in,
                               int64_t n_out, const S *c, int64_t ldc, int epi,
                               const S *bias, S *aux, int64_t aux_ld)
{
    st_cuda_gemm_desc g = {};
    g.ab_type = g.c_type = g.d_type = g.bias_type = dtype_of<S>::v;
    g.trans_b = !conv1d;
    g.M = N;
    g.N = n_out;
    g.K = n_in;
    g.A = in;
    g.lda = ldx;
    g.B = W;
    g.ldb = conv1d ? n_out : n_in;
    g.beta = c ? 1.0f : 0.0f;
    g.C = c;
    g.ldc = c ? ldc : ldd;
    g.D = d;
    g.ldd = ldd;
    g.epilogue = epi;
    g.bias = (void *)bias;
    g.bias_len = bias ? n_out : 0;
    g.aux = aux;
    g.aux_ld = aux ? aux_ld : 0;
    return st_cuda_gemm_ex(x->gemm, &g, x->stream);
}

/* GPT-2's MLP input gradient through GELU in one product: d_fc =
 * (dout W_proj^T) * gelu'(fc), the DGELU epilogue reading the
 * pre-activation fc that GELU_AUX_BIAS kept in the forward. */
template <class S>
cudaError_t mlp_dgelu(st_cuda_model_ctx *x, S *d_fc, const S *dout, const S *W_proj,
                      const S *fc, int64_t N, int64_t C, int64_t F,
                      const S *d_act_extra = nullptr)
{
    st_cuda_gemm_desc g = {};
    g.ab_type = g.c_type = g.d_type = dtype_of<S>::v;
    g.trans_b = 1;
    g.M = N;
    g.N = F;
    g.K = C;
    g.A = dout;
    g.lda = C;
    g.B = W_proj;
    g.ldb = C;
    /* d_act_extra (LoRA's share of d_act) joins the product before the
     * GELU derivative, as beta * C. */
    g.beta = d_act_extra ? 1.0f : 0.0f;
    g.C = d_act_extra;
    g.ldc = F;
    g.D = d_fc;
    g.ldd = F;
    g.epilogue = ST_CUDA_EPI_DGELU;
    g.aux = (void *)fc;
    g.aux_ld = F;
    return st_cuda_gemm_ex(x->gemm, &g, x->stream);
}

template <class S>
cudaError_t linear_backward(st_cuda_model_ctx *x, int conv1d, S *dx, float dx_beta,
                            float *dW, const S *dy, int64_t lddy, const S *in, int64_t ldx,
                            const S *W, int64_t N, int64_t n_in, int64_t n_out)
{
    if (conv1d) {
        if (dW) /* NULL: a frozen weight (LoRA) */
            TRY(mm(x, 1, 0, n_in, n_out, N, in, ldx, dy, lddy, 1.0f, dW, n_out));
        if (dx)
            TRY(mm(x, 0, 1, N, n_in, n_out, dy, lddy, W, n_out, dx_beta, dx, n_in));
    } else {
        if (dW)
            TRY(mm(x, 1, 0, n_out, n_in, N, dy, lddy, in, ldx, 1.0f, dW, n_in));
        if (dx)
            TRY(mm(x, 0, 0, N, n_in, n_out, dy, lddy, W, n_in, dx_beta, dx, n_in));
    }
    return cudaSuccess;
}

} /* namespace */

#endif
