/* Forward and backward of each unit on the CPU backend: the embedding
 * unit, a transformer block (GPT-2 or Llama), and the head with a fused
 * softmax cross-entropy.  The engine calls these one unit at a time, which
 * is what lets it gather, compute and free units in turn. */
#include "kernels/cpu_model.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_lora.h"
#include "kernels/cpu_ops.h"

#include <string.h>

/* Tensors of a block unit, in layout order (see model_layout.c). */
enum { G_LN1W, G_LN1B, G_ATTW, G_ATTB, G_CPRW, G_CPRB, G_LN2W, G_LN2B,
       G_FCW, G_FCB, G_PRJW, G_PRJB };
enum { L_NORM1, L_Q, L_K, L_V, L_O, L_NORM2, L_GATE, L_UP, L_DOWN };

static inline const float *tp(const st_model *m, int u, int idx, const float *p)
{
    return p + m->tensors[m->units[u].first_tensor + idx].offset;
}
/* NULL for frozen weights (LoRA): no gradient is computed for them. */
static inline float *tg(const st_model *m, int u, int idx, float *g)
{
    return g ? g + m->tensors[m->units[u].first_tensor + idx].offset : NULL;
}

/* Dense layers in both storage conventions.  Conv1D (GPT-2): W is
 * [in, out], y = x W.  Linear (Llama): W is [out, in], y = x W^T.  The
 * output may sit inside a wider row (ldy), which is how q, k and v of Llama
 * land side by side in one buffer. */
static void linear_forward(int conv1d, float *y, int64_t ldy, const float *x,
                           int64_t ldx, const float *W, int64_t N, int64_t in,
                           int64_t out, float beta)
{
    if (conv1d)
        st_gemm(0, 0, N, out, in, x, ldx, W, out, beta, y, ldy);
    else
        st_gemm(0, 1, N, out, in, x, ldx, W, in, beta, y, ldy);
}

/* dW += x^T dy (in the layer's storage layout; not when dW is NULL, a
 * frozen weight); dx = beta*dx + dy W^T. */
static void linear_backward(int conv1d, float *dx, float dx_beta, float *dW,
                            const float *dy, int64_t lddy, const float *x,
                            int64_t ldx, const float *W, int64_t N, int64_t in,
                            int64_t out)
{
    if (conv1d) {
        if (dW)
            st_gemm(1, 0, in, out, N, x, ldx, dy, lddy, 1.0f, dW, out);
        if (dx)
            st_gemm(0, 1, N, in, out, dy, lddy, W, out, dx_beta, dx, in);
    } else {
        if (dW)
            st_gemm(1, 0, out, in, N, dy, lddy, x, ldx, 1.0f, dW, in);
        if (dx)
            st_gemm(0, 0, N, in, out, dy, lddy, W, in, dx_beta, dx, in);
    }
}

static int64_t qkv_width(const st_model *m) { return (m->H + 2 * m->KV) * m->hd; }

size_t st_block_acts_floats(const st_model *m, int64_t B)
{
    int64_t N = B * m->T, C = m->C, F = m->F;
    int64_t fc = m->arch == ST_ARCH_LLAMA ? 2 * F : F;
    return (size_t)(N * C * 4 + N * 4 + N * qkv_width(m) + B * m->H * m->T +
                    N * fc + N * F);
}

void st_block_acts_bind(st_block_acts *a, const st_model *m, int64_t B, float *mem)
{
    int64_t N = B * m->T, C = m->C, F = m->F;
    int64_t fc = m->arch == ST_ARCH_LLAMA ? 2 * F : F;
    float *p = mem;
#define TAKE(field, n) do { a->field = p; p += (n); } while (0)
    TAKE(ln1, N * C);
    TAKE(ln1_mean, N);
    TAKE(ln1_rstd, N);
    TAKE(qkv, N * qkv_width(m));
    TAKE(att, N * C);
    TAKE(lse, B * m->H * m->T);
    TAKE(res_mid, N * C);
    TAKE(ln2, N * C);
    TAKE(ln2_mean, N);
    TAKE(ln2_rstd, N);
    TAKE(fc, N * fc);
    TAKE(act, N * F);
#undef TAKE
}

/* Rows processed at once by the head, bounding its logits buffer. */
enum { HEAD_CHUNK = 256 };

/* block backward: d_act, d_fc, d_ln2/d_ln1, d_res_mid, d_att, d_qkv; the
 * adapters' scratch follows. */
static int64_t block_scratch_floats(const st_model *m, int64_t B)
{
    int64_t N = B * m->T, C = m->C, F = m->F;
    int64_t fc = m->arch == ST_ARCH_LLAMA ? 2 * F : F;
    return N * F + N * fc + 3 * N * C + N * qkv_width(m);
}

size_t st_model_scratch_floats(const st_model *m, int64_t B)
{
    int64_t N = B * m->T, C = m->C;
    int64_t block = block_scratch_floats(m, B) + (int64_t)st_lora_scratch_floats(m, B);
    /* head: normed input, mean, rstd, d_normed, one chunk of logits */
    int64_t chunk = N < HEAD_CHUNK ? N : HEAD_CHUNK;
    int64_t head = 2 * N * C + 2 * N + chunk * m->V;
    return (size_t)(block > head ? block : head);
}

void st_embed_forward(const st_model *m, const float *p, const int32_t *tokens,
                      int64_t B, float *out)
{
    /* gpt2's unit is [wpe, wte], llama's [embed_tokens] (model.c). */
    const float *wte = p + st_model_wte_offset(m), *wpe = m->arch == ST_ARCH_GPT2 ? p : NULL;
    int64_t C = m->C, T = m->T;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < B * T; r++) {
        const float *e = wte + (int64_t)tokens[r] * C;
        float *o = out + r * C;
        if (wpe) {
            const float *pe = wpe + (r % T) * C;
            for (int64_t c = 0; c < C; c++)
                o[c] = e[c] + pe[c];
        } else {
            memcpy(o, e, sizeof(float) * (size_t)C);
        }
    }
}

void st_embed_backward(const st_model *m, float *g, const int32_t *tokens,
                       int64_t B, const float *dout)
{
    int64_t C = m->C, T = m->T;
    float *dwte = g + st_model_wte_offset(m), *dwpe = m->arch == ST_ARCH_GPT2 ? g : NULL;
    /* Threads split the channels; each walks the rows in order, so a
     * token seen twice accumulates in the same order every run. */
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
        int64_t c1 = c0 + 16 < C ? c0 + 16 : C;
        for (int64_t r = 0; r < B * T; r++) {
            const float *d = dout + r * C;
            float *e = dwte + (int64_t)tokens[r] * C;
            for (int64_t c = c0; c < c1; c++)
                e[c] += d[c];
            if (dwpe) {
                float *pe = dwpe + (r % T) * C;
                for (int64_t c = c0; c < c1; c++)
                    pe[c] += d[c];
            }
        }
    }
}

/* Target i's adapter update of y (when it has one). */
#define LORA_FWD(i, x, ldx, y, ldy)                                                   \
    do {                                                                                \
        if (st_lora_on(m, la, i))                                                       \
            st_lora_forward(m, la, lp, i, B, x, ldx, y, ldy, lscratch);                 \
    } while (0)
#define LORA_BWD(i, x, ldx, dy, lddy, dx, lddx)                                        \
    do {                                                                                \
        if (st_lora_on(m, la, i))                                                       \
            st_lora_backward(m, la, lp, la->g, i, B, x, ldx, dy, lddy, dx, lddx, lscratch); \
    } while (0)

void st_block_forward(const st_model *m, const float *p, const st_lora_args *la,
                      const float *lp, int64_t B, const float *in, float *out,
                      st_block_acts *a, float *scratch)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int uu = 1; /* tensor offsets are the same in every block unit */
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    float *lscratch = scratch ? scratch + block_scratch_floats(m, B) : NULL;

    if (gpt2) {
        st_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, in,
                             tp(m, uu, G_LN1W, p), tp(m, uu, G_LN1B, p), N, C, m->eps);
        linear_forward(1, a->qkv, W, a->ln1, C, tp(m, uu, G_ATTW, p), N, C, 3 * C, 0.0f);
        st_add_bias(a->qkv, tp(m, uu, G_ATTB, p), N, 3 * C);
        LORA_FWD(0, a->ln1, C, a->qkv, W);
    } else {
        st_rmsnorm_forward(a->ln1, a->ln1_rstd, in, tp(m, uu, L_NORM1, p), N, C, m->eps);
        linear_forward(0, a->qkv, W, a->ln1, C, tp(m, uu, L_Q, p), N, C, qd, 0.0f);
        linear_forward(0, a->qkv + qd, W, a->ln1, C, tp(m, uu, L_K, p), N, C, kvd, 0.0f);
        linear_forward(0, a->qkv + qd + kvd, W, a->ln1, C, tp(m, uu, L_V, p), N, C, kvd, 0.0f);
        LORA_FWD(0, a->ln1, C, a->qkv, W);
        LORA_FWD(1, a->ln1, C, a->qkv + qd, W);
        LORA_FWD(2, a->ln1, C, a->qkv + qd + kvd, W);
        st_rope_apply(a->qkv, W, B, m->T, m->H, m->hd, m->rope_cos, m->rope_sin, 0);
        st_rope_apply(a->qkv + qd, W, B, m->T, m->KV, m->hd, m->rope_cos, m->rope_sin, 0);
    }
    st_attention_forward(a->att, qd, a->lse, a->qkv, W, a->qkv + qd, W,
                         a->qkv + qd + kvd, W, B, m->T, m->H, m->KV, m->hd);
    /* residual: res_mid = in + att W_o (+ b) */
    memcpy(a->res_mid, in, sizeof(float) * (size_t)(N * C));
    if (gpt2) {
        linear_forward(1, a->res_mid, C, a->att, C, tp(m, uu, G_CPRW, p), N, C, C, 1.0f);
        st_add_bias(a->res_mid, tp(m, uu, G_CPRB, p), N, C);
        LORA_FWD(1, a->att, C, a->res_mid, C);
        st_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res_mid,
                             tp(m, uu, G_LN2W, p), tp(m, uu, G_LN2B, p), N, C, m->eps);
        linear_forward(1, a->fc, F, a->ln2, C, tp(m, uu, G_FCW, p), N, C, F, 0.0f);
        st_add_bias(a->fc, tp(m, uu, G_FCB, p), N, F);
        LORA_FWD(2, a->ln2, C, a->fc, F);
        st_gelu_forward(a->act, a->fc, N * F);
        memcpy(out, a->res_mid, sizeof(float) * (size_t)(N * C));
        linear_forward(1, out, C, a->act, F, tp(m, uu, G_PRJW, p), N, F, C, 1.0f);
        st_add_bias(out, tp(m, uu, G_PRJB, p), N, C);
        LORA_FWD(3, a->act, F, out, C);
    } else {
        linear_forward(0, a->res_mid, C, a->att, qd, tp(m, uu, L_O, p), N, qd, C, 1.0f);
        LORA_FWD(3, a->att, qd, a->res_mid, C);
        st_rmsnorm_forward(a->ln2, a->ln2_rstd, a->res_mid, tp(m, uu, L_NORM2, p), N, C, m->eps);
        linear_forward(0, a->fc, 2 * F, a->ln2, C, tp(m, uu, L_GATE, p), N, C, F, 0.0f);
        linear_forward(0, a->fc + F, 2 * F, a->ln2, C, tp(m, uu, L_UP, p), N, C, F, 0.0f);
        LORA_FWD(4, a->ln2, C, a->fc, 2 * F);
        LORA_FWD(5, a->ln2, C, a->fc + F, 2 * F);
        st_swiglu_forward(a->act, a->fc, N, F);
        memcpy(out, a->res_mid, sizeof(float) * (size_t)(N * C));
        linear_forward(0, out, C, a->act, F, tp(m, uu, L_DOWN, p), N, F, C, 1.0f);
        LORA_FWD(6, a->act, F, out, C);
    }
}

void st_block_backward(const st_model *m, const float *p, float *g, const st_lora_args *la,
                       const float *lp, int64_t B, const float *in, const st_block_acts *a,
                       const float *dout, float *din, float *scratch)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int uu = 1;
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const int64_t fcw = gpt2 ? F : 2 * F;
    float *d_act = scratch;
    float *d_fc = d_act + N * F;
    float *d_ln = d_fc + N * fcw;        /* d_ln2, later reused as d_ln1 */
    float *d_res_mid = d_ln + N * C;
    float *d_att = d_res_mid + N * C;
    float *d_qkv = d_att + N * C;
    float *lscratch = scratch + block_scratch_floats(m, B);

    /* MLP: out = res_mid + mlp(norm2(res_mid)) */
    if (gpt2) {
        linear_backward(1, d_act, 0.0f, tg(m, uu, G_PRJW, g), dout, C, a->act, F,
                        tp(m, uu, G_PRJW, p), N, F, C);
        LORA_BWD(3, a->act, F, dout, C, d_act, F);
        st_bias_backward(tg(m, uu, G_PRJB, g), dout, N, C);
        st_gelu_backward(d_fc, a->fc, d_act, N * F);
        linear_backward(1, d_ln, 0.0f, tg(m, uu, G_FCW, g), d_fc, F, a->ln2, C,
                        tp(m, uu, G_FCW, p), N, C, F);
        LORA_BWD(2, a->ln2, C, d_fc, F, d_ln, C);
        st_bias_backward(tg(m, uu, G_FCB, g), d_fc, N, F);
        memcpy(d_res_mid, dout, sizeof(float) * (size_t)(N * C));
        st_layernorm_backward(d_res_mid, tg(m, uu, G_LN2W, g), tg(m, uu, G_LN2B, g),
                              d_ln, a->res_mid, tp(m, uu, G_LN2W, p),
                              a->ln2_mean, a->ln2_rstd, N, C);
    } else {
        linear_backward(0, d_act, 0.0f, tg(m, uu, L_DOWN, g), dout, C, a->act, F,
                        tp(m, uu, L_DOWN, p), N, F, C);
        LORA_BWD(6, a->act, F, dout, C, d_act, F);
        st_swiglu_backward(d_fc, a->fc, d_act, N, F);
        linear_backward(0, d_ln, 0.0f, tg(m, uu, L_GATE, g), d_fc, 2 * F, a->ln2, C,
                        tp(m, uu, L_GATE, p), N, C, F);
        linear_backward(0, d_ln, 1.0f, tg(m, uu, L_UP, g), d_fc + F, 2 * F, a->ln2, C,
                        tp(m, uu, L_UP, p), N, C, F);
        LORA_BWD(4, a->ln2, C, d_fc, 2 * F, d_ln, C);
        LORA_BWD(5, a->ln2, C, d_fc + F, 2 * F, d_ln, C);
        memcpy(d_res_mid, dout, sizeof(float) * (size_t)(N * C));
        st_rmsnorm_backward(d_res_mid, tg(m, uu, L_NORM2, g), d_ln, a->res_mid,
                            tp(m, uu, L_NORM2, p), a->ln2_rstd, N, C);
    }

    /* Attention: res_mid = in + proj(attention(qkv(norm1(in)))) */
    if (gpt2) {
        linear_backward(1, d_att, 0.0f, tg(m, uu, G_CPRW, g), d_res_mid, C, a->att, C,
                        tp(m, uu, G_CPRW, p), N, C, C);
        LORA_BWD(1, a->att, C, d_res_mid, C, d_att, C);
        st_bias_backward(tg(m, uu, G_CPRB, g), d_res_mid, N, C);
    } else {
        linear_backward(0, d_att, 0.0f, tg(m, uu, L_O, g), d_res_mid, C, a->att, qd,
                        tp(m, uu, L_O, p), N, qd, C);
        LORA_BWD(3, a->att, qd, d_res_mid, C, d_att, qd);
    }
    st_attention_backward(d_qkv, W, d_qkv + qd, W, d_qkv + qd + kvd, W,
                          d_att, qd, a->att, qd, a->lse,
                          a->qkv, W, a->qkv + qd, W, a->qkv + qd + kvd, W,
                          B, m->T, m->H, m->KV, m->hd);
    float *d_ln1 = d_ln;
    memcpy(din, d_res_mid, sizeof(float) * (size_t)(N * C));
    if (gpt2) {
        linear_backward(1, d_ln1, 0.0f, tg(m, uu, G_ATTW, g), d_qkv, W, a->ln1, C,
                        tp(m, uu, G_ATTW, p), N, C, 3 * C);
        LORA_BWD(0, a->ln1, C, d_qkv, W, d_ln1, C);
        st_bias_backward(tg(m, uu, G_ATTB, g), d_qkv, N, 3 * C);
        st_layernorm_backward(din, tg(m, uu, G_LN1W, g), tg(m, uu, G_LN1B, g), d_ln1,
                              in, tp(m, uu, G_LN1W, p), a->ln1_mean, a->ln1_rstd, N, C);
    } else {
        /* RoPE is a rotation: its backward rotates by the opposite angle. */
        st_rope_apply(d_qkv, W, B, m->T, m->H, m->hd, m->rope_cos, m->rope_sin, 1);
        st_rope_apply(d_qkv + qd, W, B, m->T, m->KV, m->hd, m->rope_cos, m->rope_sin, 1);
        linear_backward(0, d_ln1, 0.0f, tg(m, uu, L_Q, g), d_qkv, W, a->ln1, C,
                        tp(m, uu, L_Q, p), N, C, qd);
        linear_backward(0, d_ln1, 1.0f, tg(m, uu, L_K, g), d_qkv + qd, W, a->ln1, C,
                        tp(m, uu, L_K, p), N, C, kvd);
        linear_backward(0, d_ln1, 1.0f, tg(m, uu, L_V, g), d_qkv + qd + kvd, W, a->ln1, C,
                        tp(m, uu, L_V, p), N, C, kvd);
        LORA_BWD(0, a->ln1, C, d_qkv, W, d_ln1, C);
        LORA_BWD(1, a->ln1, C, d_qkv + qd, W, d_ln1, C);
        LORA_BWD(2, a->ln1, C, d_qkv + qd + kvd, W, d_ln1, C);
        st_rmsnorm_backward(din, tg(m, uu, L_NORM1, g), d_ln1, in,
                            tp(m, uu, L_NORM1, p), a->ln1_rstd, N, C);
    }
}

double st_head_forward_backward(const st_model *m, const float *head_p,
                                const float *embed_p, float *head_g,
                                float *embed_g, int64_t B, const float *in,
                                const int32_t *targets, float grad_scale,
                                float *din, float *logits_out, float *scratch)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int hu = st_model_head_unit(m);
    const int64_t N = B * m->T, C = m->C, V = m->V;
    const int backward = grad_scale != 0.0f;
    float *xn = scratch, *mean = xn + N * C, *rstd = mean + N;
    float *dxn = rstd + N, *logits = dxn + N * C;
    const float *normw = tp(m, hu, 0, head_p);
    /* Output weight [V, C]: the head's own, or the tied token embedding. */
    const int64_t wte = st_model_wte_offset(m);
    const float *Wout = m->tied ? embed_p + wte : tp(m, hu, gpt2 ? 2 : 1, head_p);
    /* A NULL gradient (a frozen weight, LoRA) stays NULL. */
    float *dWout = !backward ? NULL
                   : m->tied ? (embed_g ? embed_g + wte : NULL)
                             : tg(m, hu, gpt2 ? 2 : 1, head_g);

    if (gpt2)
        st_layernorm_forward(xn, mean, rstd, in, normw, tp(m, hu, 1, head_p), N, C, m->eps);
    else
        st_rmsnorm_forward(xn, rstd, in, normw, N, C, m->eps);

    double loss = 0.0;
    for (int64_t r0 = 0; r0 < N; r0 += HEAD_CHUNK) {
        int64_t rows = N - r0 < HEAD_CHUNK ? N - r0 : HEAD_CHUNK;
        st_gemm(0, 1, rows, V, C, xn + r0 * C, C, Wout, C, 0.0f, logits, V);
        if (logits_out)
            memcpy(logits_out + r0 * V, logits, sizeof(float) * (size_t)(rows * V));
        loss += st_softmax_xent(logits, targets + r0, rows, V, grad_scale);
        if (backward) {
            /* logits now hold dlogits */
            st_gemm(0, 0, rows, C, V, logits, V, Wout, C, 0.0f, dxn + r0 * C, C);
            if (dWout)      /* NULL: a frozen output weight (LoRA) */
                st_gemm(1, 0, V, C, rows, logits, V, xn + r0 * C, C, 1.0f, dWout, C);
        }
    }
    if (backward) {
        memset(din, 0, sizeof(float) * (size_t)(N * C));
        if (gpt2)
            st_layernorm_backward(din, tg(m, hu, 0, head_g), tg(m, hu, 1, head_g),
                                  dxn, in, normw, mean, rstd, N, C);
        else
            st_rmsnorm_backward(din, tg(m, hu, 0, head_g), dxn, in, normw, rstd, N, C);
    }
    return loss;
}
