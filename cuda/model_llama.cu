/* Llama's transformer block on the GPU (cuda/model_cuda.h):
 * src/kernels/cpu_model.c's block forward and backward for Llama, op for
 * op, as a template over the storage type S (float, or uint16_t bf16
 * words).  Reached through cuda/model_common.cu's table (llama_block_ops);
 * GPT-2's block is cuda/model_gpt2.cu.  The layers are bias-free Linears
 * ([out, in] weights): q, k and v are three products into one strided qkv
 * buffer (GQA: k and v are KV heads wide), RoPE rotates q and k in place,
 * the MLP is SwiGLU over a [gate | up] buffer, and the two residual adds
 * ride on the o and down products as their C.  The input gradients of the
 * products that share an input (q/k/v, gate/up) accumulate into one
 * buffer through beta 1.  LoRA targets: 0 q, 1 k, 2 v, 3 o, 4 gate, 5 up,
 * 6 down. */
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

    TRY(rmsnorm_forward(ln1, ap->ln1_rstd, in, tp(m, uu, L_NORM1, p), N, C, m->eps, s));
    TRY(linear_forward(x, qkv, W, ln1, C, tp(m, uu, L_Q, p), N, C, qd, 0.0f));
    TRY(linear_forward(x, qkv + qd, W, ln1, C, tp(m, uu, L_K, p), N, C, kvd, 0.0f));
    TRY(linear_forward(x, qkv + qd + kvd, W, ln1, C, tp(m, uu, L_V, p), N, C, kvd, 0.0f));
    if (lo.on(0))
        TRY(lo.forward(0, ln1, C, qkv, W));
    if (lo.on(1))
        TRY(lo.forward(1, ln1, C, qkv + qd, W));
    if (lo.on(2))
        TRY(lo.forward(2, ln1, C, qkv + qd + kvd, W));
    /* After the adapters: RoPE rotates the whole projection, as the CPU's. */
    TRY(rope_apply(qkv, W, B, m->T, m->H, m->hd, x->rope_cos, x->rope_sin, 0, s));
    TRY(rope_apply(qkv + qd, W, B, m->T, m->KV, m->hd, x->rope_cos, x->rope_sin, 0, s));
    TRY(attention_forward(att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B, m->T,
                          m->H, m->KV, m->hd, s));
    /* residual: res_mid = in + att W_o, the residual read as the product's
     * C and the sum written to D: no copy. */
    TRY(linear_forward_epi(x, 0, res_mid, C, att, qd, tp(m, uu, L_O, p), N, qd, C, in, C,
                           ST_CUDA_EPI_NONE, (const S *)nullptr, (S *)nullptr, 0));
    if (lo.on(3))
        TRY(lo.forward(3, att, qd, res_mid, C));
    TRY(rmsnorm_forward(ln2, ap->ln2_rstd, res_mid, tp(m, uu, L_NORM2, p), N, C, m->eps, s));
    TRY(linear_forward(x, fc, 2 * F, ln2, C, tp(m, uu, L_GATE, p), N, C, F, 0.0f));
    TRY(linear_forward(x, fc + F, 2 * F, ln2, C, tp(m, uu, L_UP, p), N, C, F, 0.0f));
    if (lo.on(4))
        TRY(lo.forward(4, ln2, C, fc, 2 * F));
    if (lo.on(5))
        TRY(lo.forward(5, ln2, C, fc + F, 2 * F));
    TRY(swiglu_forward(act, fc, N, F, s));
    TRY(linear_forward_epi(x, 0, out, C, act, F, tp(m, uu, L_DOWN, p), N, F, C,
                           (const S *)res_mid, C, ST_CUDA_EPI_NONE, (const S *)nullptr,
                           (S *)nullptr, 0));
    if (lo.on(6))
        TRY(lo.forward(6, act, F, out, C));
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
    /* g NULL: frozen base weights (LoRA), no weight or norm gradient (tg
     * gives NULL, which linear_backward and the norms skip). */

    /* MLP: out = res_mid + mlp(norm2(res_mid)) */
    TRY(linear_backward(x, 0, sc.d_act, 0.0f, tg(m, uu, L_DOWN, g), dout, C, act, F,
                        tp(m, uu, L_DOWN, p), N, F, C));
    if (lo.on(6))
        TRY(lo.backward(6, act, F, dout, C, sc.d_act, F));
    TRY(swiglu_backward(sc.d_fc, fc, sc.d_act, N, F, s));
    TRY(linear_backward(x, 0, sc.d_ln, 0.0f, tg(m, uu, L_GATE, g), sc.d_fc, 2 * F, ln2, C,
                        tp(m, uu, L_GATE, p), N, C, F));
    TRY(linear_backward(x, 0, sc.d_ln, 1.0f, tg(m, uu, L_UP, g), sc.d_fc + F, 2 * F, ln2, C,
                        tp(m, uu, L_UP, p), N, C, F));
    if (lo.on(4))
        TRY(lo.backward(4, ln2, C, sc.d_fc, 2 * F, sc.d_ln, C));
    if (lo.on(5))
        TRY(lo.backward(5, ln2, C, sc.d_fc + F, 2 * F, sc.d_ln, C));
    /* d_res_mid = dout (the residual's path) + the norm's gradient. */
    TRY(rmsnorm_backward(sc.d_res_mid, dout, tg(m, uu, L_NORM2, g), sc.d_ln, res_mid,
                         tp(m, uu, L_NORM2, p), ap->ln2_rstd, N, C, sc.red_ws, s));

    /* Attention: res_mid = in + proj(attention(rope(qkv(norm1(in))))) */
    TRY(linear_backward(x, 0, sc.d_att, 0.0f, tg(m, uu, L_O, g), sc.d_res_mid, C, att, qd,
                        tp(m, uu, L_O, p), N, qd, C));
    if (lo.on(3))
        TRY(lo.backward(3, att, qd, sc.d_res_mid, C, sc.d_att, qd));
    TRY(attention_backward(sc.d_qkv, W, sc.d_qkv + qd, W, sc.d_qkv + qd + kvd, W, sc.d_att,
                           qd, att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B,
                           m->T, m->H, m->KV, m->hd, sc.attn_ws, s));
    S *d_ln1 = sc.d_ln;
    /* RoPE is a rotation: its backward rotates by the opposite angle. */
    TRY(rope_apply(sc.d_qkv, W, B, m->T, m->H, m->hd, x->rope_cos, x->rope_sin, 1, s));
    TRY(rope_apply(sc.d_qkv + qd, W, B, m->T, m->KV, m->hd, x->rope_cos, x->rope_sin, 1, s));
    TRY(linear_backward(x, 0, d_ln1, 0.0f, tg(m, uu, L_Q, g), sc.d_qkv, W, ln1, C,
                        tp(m, uu, L_Q, p), N, C, qd));
    TRY(linear_backward(x, 0, d_ln1, 1.0f, tg(m, uu, L_K, g), sc.d_qkv + qd, W, ln1, C,
                        tp(m, uu, L_K, p), N, C, kvd));
    TRY(linear_backward(x, 0, d_ln1, 1.0f, tg(m, uu, L_V, g), sc.d_qkv + qd + kvd, W, ln1, C,
                        tp(m, uu, L_V, p), N, C, kvd));
    if (lo.on(0))
        TRY(lo.backward(0, ln1, C, sc.d_qkv, W, d_ln1, C));
    if (lo.on(1))
        TRY(lo.backward(1, ln1, C, sc.d_qkv + qd, W, d_ln1, C));
    if (lo.on(2))
        TRY(lo.backward(2, ln1, C, sc.d_qkv + qd + kvd, W, d_ln1, C));
    /* din = d_res_mid (the residual's path) + the first norm's gradient,
     * added by the norm backward: d_res_mid is not written again. */
    TRY(rmsnorm_backward(din, (const S *)sc.d_res_mid, tg(m, uu, L_NORM1, g), d_ln1, in,
                         tp(m, uu, L_NORM1, p), ap->ln1_rstd, N, C, sc.red_ws, s));
    return cudaSuccess;
}

} /* namespace */

const st_cuda_block::BlockOps st_cuda_block::llama_block_ops = {
    {block_forward_t<float>, block_backward_t<float>},
    {block_forward_t<uint16_t>, block_backward_t<uint16_t>},
};
