/* GPT-2's transformer block on the GPU (cuda/model_cuda.h):
 * src/kernels/cpu_model.c's block forward and backward for GPT-2, op for
 * op, as a template over the storage type S (float, or uint16_t bf16
 * words).  Reached through cuda/model_common.cu's table (gpt2_block_ops);
 * Llama's block is cuda/model_llama.cu.  Where a layer's bias, GELU or
 * residual add follows a product, it rides on that product as a cuBLASLt
 * epilogue or as the product's C (cuda/ops.h, st_cuda_gemm_ex) instead of
 * costing a kernel and a pass over memory: the bias of every linear layer
 * (BIAS), fc and GELU (GELU_AUX_BIAS, keeping the pre-activation for the
 * backward's DGELU), and both residual adds (the residual read as C, the
 * sum written to D).  The parameter gradients of the biases stay with the
 * two-stage column sums of cuda/elementwise.cu rather than BGRADB: BGRADB
 * overwrites its output, and the gradients accumulate over micro-batches.
 * LoRA targets: 0 c_attn, 1 attn.c_proj, 2 c_fc, 3 mlp.c_proj. */
#include "model_common.cuh"

namespace {

template <class S>
cudaError_t block_forward_t(const st_model *m, const S *p, const st_cuda_lora *la, int64_t B,
                            const S *in, S *out, const st_cuda_block_acts *ap, void *scratch,
                            st_cuda_model_ctx *x)
{
    const int uu = 1; /* tensor offsets are the same in every block unit */
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const cudaStream_t s = x->stream;
    S *ln1 = (S *)ap->ln1, *qkv = (S *)ap->qkv, *att = (S *)ap->att;
    S *res_mid = (S *)ap->res_mid, *ln2 = (S *)ap->ln2, *fc = (S *)ap->fc;
    S *act = (S *)ap->act;
    Lora<S> lo = lora_for<S>(m, la, B, scratch, x);

    TRY(layernorm_forward(ln1, ap->ln1_mean, ap->ln1_rstd, in, tp(m, uu, G_LN1W, p),
                          tp(m, uu, G_LN1B, p), N, C, m->eps, s));
    TRY(linear_forward_epi(x, 1, qkv, W, ln1, C, tp(m, uu, G_ATTW, p), N, C, 3 * C,
                           (const S *)nullptr, 0, ST_CUDA_EPI_BIAS, tp(m, uu, G_ATTB, p),
                           (S *)nullptr, 0));
    if (lo.on(0))
        TRY(lo.forward(0, ln1, C, qkv, W));
    TRY(attention_forward(att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B, m->T,
                          m->H, m->KV, m->hd, s));
    /* residual: res_mid = in + att W_o + b, the residual read as the
     * product's C and the sum written to D: no copy, no bias kernel. */
    TRY(linear_forward_epi(x, 1, res_mid, C, att, C, tp(m, uu, G_CPRW, p), N, C, C, in, C,
                           ST_CUDA_EPI_BIAS, tp(m, uu, G_CPRB, p), (S *)nullptr, 0));
    if (lo.on(1))
        TRY(lo.forward(1, att, C, res_mid, C));
    TRY(layernorm_forward(ln2, ap->ln2_mean, ap->ln2_rstd, res_mid, tp(m, uu, G_LN2W, p),
                          tp(m, uu, G_LN2B, p), N, C, m->eps, s));
    /* fc keeps the pre-activation for the backward's DGELU.  An adapter on
     * c_fc acts before the GELU: its share, computed first, is the
     * product's C. */
    if (lo.on(2))
        TRY(lo.forward(2, ln2, C, lo.sc.lo, F, 0.0f));
    TRY(linear_forward_epi(x, 1, act, F, ln2, C, tp(m, uu, G_FCW, p), N, C, F,
                           (const S *)(lo.on(2) ? lo.sc.lo : nullptr), lo.on(2) ? F : 0,
                           ST_CUDA_EPI_GELU_AUX_BIAS, tp(m, uu, G_FCB, p), fc, F));
    TRY(linear_forward_epi(x, 1, out, C, act, F, tp(m, uu, G_PRJW, p), N, F, C,
                           (const S *)res_mid, C, ST_CUDA_EPI_BIAS, tp(m, uu, G_PRJB, p),
                           (S *)nullptr, 0));
    if (lo.on(3))
        TRY(lo.forward(3, act, F, out, C));
    return cudaSuccess;
}

template <class S>
cudaError_t block_backward_t(const st_model *m, const S *p, float *g, const st_cuda_lora *la,
                             int64_t B, const S *in, const st_cuda_block_acts *ap, const S *dout,
                             S *din, void *scratch, st_cuda_model_ctx *x)
{
    const int uu = 1;
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const cudaStream_t s = x->stream;
    const S *ln1 = (const S *)ap->ln1, *qkv = (const S *)ap->qkv;
    const S *att = (const S *)ap->att, *res_mid = (const S *)ap->res_mid;
    const S *ln2 = (const S *)ap->ln2, *fc = (const S *)ap->fc, *act = (const S *)ap->act;
    BlockScratch<S> sc;
    layout_block_scratch(&sc, m, B, scratch);
    Lora<S> lo = lora_for<S>(m, la, B, scratch, x);
    /* g NULL: frozen base weights (LoRA), no weight, bias or norm gradient
     * (tg gives NULL, which linear_backward and the norms skip). */

    /* MLP: out = res_mid + mlp(norm2(res_mid)) */
    TRY(linear_backward(x, 1, (S *)nullptr, 0.0f, tg(m, uu, G_PRJW, g), dout, C, act, F,
                        tp(m, uu, G_PRJW, p), N, F, C));
    if (g)
        TRY(bias_backward(tg(m, uu, G_PRJB, g), dout, N, C, sc.red_ws, s));
    /* mlp.c_proj's adapter: its share of d_act joins the DGELU product as
     * C (the base's share never exists on its own). */
    if (lo.on(3))
        TRY(lo.backward(3, act, F, dout, C, sc.d_act, F, 0.0f));
    TRY(mlp_dgelu(x, sc.d_fc, dout, tp(m, uu, G_PRJW, p), fc, N, C, F,
                  lo.on(3) ? (const S *)sc.d_act : (const S *)nullptr));
    TRY(linear_backward(x, 1, sc.d_ln, 0.0f, tg(m, uu, G_FCW, g), sc.d_fc, F, ln2, C,
                        tp(m, uu, G_FCW, p), N, C, F));
    if (lo.on(2))
        TRY(lo.backward(2, ln2, C, sc.d_fc, F, sc.d_ln, C));
    if (g)
        TRY(bias_backward(tg(m, uu, G_FCB, g), sc.d_fc, N, F, sc.red_ws, s));
    /* d_res_mid = dout (the residual's path) + the norm's gradient. */
    TRY(layernorm_backward(sc.d_res_mid, dout, tg(m, uu, G_LN2W, g), tg(m, uu, G_LN2B, g),
                           sc.d_ln, res_mid, tp(m, uu, G_LN2W, p), ap->ln2_mean,
                           ap->ln2_rstd, N, C, sc.red_ws, s));

    /* Attention: res_mid = in + proj(attention(qkv(norm1(in)))) */
    TRY(linear_backward(x, 1, sc.d_att, 0.0f, tg(m, uu, G_CPRW, g), sc.d_res_mid, C, att, C,
                        tp(m, uu, G_CPRW, p), N, C, C));
    if (lo.on(1))
        TRY(lo.backward(1, att, C, sc.d_res_mid, C, sc.d_att, C));
    if (g)
        TRY(bias_backward(tg(m, uu, G_CPRB, g), sc.d_res_mid, N, C, sc.red_ws, s));
    TRY(attention_backward(sc.d_qkv, W, sc.d_qkv + qd, W, sc.d_qkv + qd + kvd, W, sc.d_att,
                           qd, att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B,
                           m->T, m->H, m->KV, m->hd, sc.attn_ws, s));
    S *d_ln1 = sc.d_ln;
    /* din = d_res_mid (the residual's path) + the first norm's gradient,
     * added by the norm backward below: d_res_mid is not written again. */
    TRY(linear_backward(x, 1, d_ln1, 0.0f, tg(m, uu, G_ATTW, g), sc.d_qkv, W, ln1, C,
                        tp(m, uu, G_ATTW, p), N, C, 3 * C));
    if (lo.on(0))
        TRY(lo.backward(0, ln1, C, sc.d_qkv, W, d_ln1, C));
    if (g)
        TRY(bias_backward(tg(m, uu, G_ATTB, g), sc.d_qkv, N, 3 * C, sc.red_ws, s));
    TRY(layernorm_backward(din, (const S *)sc.d_res_mid, tg(m, uu, G_LN1W, g),
                           tg(m, uu, G_LN1B, g), d_ln1, in, tp(m, uu, G_LN1W, p),
                           ap->ln1_mean, ap->ln1_rstd, N, C, sc.red_ws, s));
    return cudaSuccess;
}

} /* namespace */

const st_cuda_block::BlockOps st_cuda_block::gpt2_block_ops = {
    {block_forward_t<float>, block_backward_t<float>},
    {block_forward_t<uint16_t>, block_backward_t<uint16_t>},
};
