/* The transformer block on the GPU (cuda/model_cuda.h): src/kernels/cpu_model.c's
 * block forward and backward, op for op, as a template over the storage
 * type S (float, or uint16_t bf16 words).  Where a layer's bias, GELU or
 * residual add follows a product, it rides on that product as a cuBLASLt
 * epilogue or as the product's C (cuda/ops.h, st_cuda_gemm_ex) instead of
 * costing a kernel and a pass over memory: the bias of every GPT-2 linear
 * layer (BIAS), GPT-2's fc and GELU (GELU_AUX_BIAS, keeping the
 * pre-activation for the backward's DGELU), and both residual adds (the
 * residual read as C, the sum written to D).  The parameter gradients of
 * the biases stay with the two-stage column sums of cuda/elementwise.cu rather
 * than BGRADB: BGRADB overwrites its output, and the gradients accumulate
 * over micro-batches. */
#include "model_units.cuh"

namespace {

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
        TRY(linear_forward_epi(x, 1, qkv, W, ln1, C, tp(m, uu, G_ATTW, p), N, C, 3 * C,
                               (const S *)nullptr, 0, ST_CUDA_EPI_BIAS, tp(m, uu, G_ATTB, p),
                               (S *)nullptr, 0));
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
    /* residual: res_mid = in + att W_o (+ b), the residual read as the
     * product's C and the sum written to D: no copy, no bias kernel. */
    if (gpt2) {
        TRY(linear_forward_epi(x, 1, res_mid, C, att, C, tp(m, uu, G_CPRW, p), N, C, C, in,
                               C, ST_CUDA_EPI_BIAS, tp(m, uu, G_CPRB, p), (S *)nullptr, 0));
        TRY(layernorm_forward(ln2, ap->ln2_mean, ap->ln2_rstd, res_mid,
                              tp(m, uu, G_LN2W, p), tp(m, uu, G_LN2B, p), N, C, m->eps, s));
        /* fc keeps the pre-activation for the backward's DGELU. */
        TRY(linear_forward_epi(x, 1, act, F, ln2, C, tp(m, uu, G_FCW, p), N, C, F,
                               (const S *)nullptr, 0, ST_CUDA_EPI_GELU_AUX_BIAS,
                               tp(m, uu, G_FCB, p), fc, F));
        TRY(linear_forward_epi(x, 1, out, C, act, F, tp(m, uu, G_PRJW, p), N, F, C,
                               (const S *)res_mid, C, ST_CUDA_EPI_BIAS, tp(m, uu, G_PRJB, p),
                               (S *)nullptr, 0));
    } else {
        TRY(linear_forward_epi(x, 0, res_mid, C, att, qd, tp(m, uu, L_O, p), N, qd, C, in, C,
                               ST_CUDA_EPI_NONE, (const S *)nullptr, (S *)nullptr, 0));
        TRY(rmsnorm_forward(ln2, ap->ln2_rstd, res_mid, tp(m, uu, L_NORM2, p), N, C, m->eps,
                            s));
        TRY(linear_forward(x, 0, fc, 2 * F, ln2, C, tp(m, uu, L_GATE, p), N, C, F, 0.0f));
        TRY(linear_forward(x, 0, fc + F, 2 * F, ln2, C, tp(m, uu, L_UP, p), N, C, F, 0.0f));
        TRY(swiglu_forward(act, fc, N, F, s));
        TRY(linear_forward_epi(x, 0, out, C, act, F, tp(m, uu, L_DOWN, p), N, F, C,
                               (const S *)res_mid, C, ST_CUDA_EPI_NONE, (const S *)nullptr,
                               (S *)nullptr, 0));
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
        TRY(linear_backward(x, 1, (S *)nullptr, 0.0f, tg(m, uu, G_PRJW, g), dout, C, act, F,
                            tp(m, uu, G_PRJW, p), N, F, C));
        TRY(bias_backward(tg(m, uu, G_PRJB, g), dout, N, C, sc.red_ws, s));
        TRY(mlp_dgelu(x, sc.d_fc, dout, tp(m, uu, G_PRJW, p), fc, N, C, F));
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

} /* namespace */

extern "C" {

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

} /* extern "C" */
