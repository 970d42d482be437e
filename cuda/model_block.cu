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

using st_cuda::bf16;
using st_cuda::load_f;
using st_cuda::store_f;

/* ---- LoRA adapters (model.h's st_model_lora) ------------------------------
 * src/kernels/cpu_lora.c on the GPU, product for product: xa = scale *
 * (dropout(x) A^T), y += xa B^T; backward dB += dy^T xa, dxa = scale *
 * (dy B), dA += dxa^T dropout(x), dx += mask * (dxa A) / (1 - p).  The
 * rank-sized products run on st_cuda_gemm with padded row strides
 * (LoraScratch, model_units.cuh); the scaling, the dropout mask (the
 * same st_lora_keep_at hash as the CPU's, on the device) and the padding
 * copies are the small grid-stride kernels below.  Nothing here runs
 * without adapters. */

/* The storage type's device element (uint16_t words are bf16). */
template <class S> struct dev_of { typedef S t; };
template <> struct dev_of<uint16_t> { typedef bf16 t; };
template <class S> typename dev_of<S>::t *dev(S *p) { return (typename dev_of<S>::t *)p; }
template <class S> const typename dev_of<S>::t *dev(const S *p)
{
    return (const typename dev_of<S>::t *)p;
}

/* What st_lora_keep_at needs besides the element. */
struct KeepArgs {
    uint64_t seed, step;
    int64_t layer, first_seq, T;
    double dropout;
    int target;
};

const int kLoraThreads = 256;

/* xd[n, c] = keep ? x[n, c] / (1 - p) : 0, xd [N, in] dense. */
template <class T>
__global__ void lora_dropout_kernel(T *xd, const T *x, int64_t ldx, int64_t N, int64_t in,
                                    KeepArgs k, float keep_scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * in;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = e / in, c = e % in;
        const bool keep = st_lora_keep_at(k.seed, k.layer, k.target, k.step, k.first_seq, k.T,
                                          n, c, in, k.dropout);
        store_f(&xd[e], keep ? load_f(&x[n * ldx + c]) * keep_scale : 0.0f);
    }
}

/* dst[n, j] = scale * src[n, j] for j < r, rows ld apart (dst may be src). */
template <class T>
__global__ void lora_scale_kernel(T *dst, const float *src, int64_t N, int64_t r, int64_t ld,
                                  float scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * r;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / r * ld + e % r;
        store_f(&dst[i], src[i] * scale);
    }
}

/* Bp [out, rp] = B [out, r] with zero columns r..rp-1 (exact copies). */
template <class T>
__global__ void lora_pad_kernel(T *Bp, const T *B, int64_t out, int64_t r, int64_t rp)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < out * rp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / rp, j = e % rp;
        store_f(&Bp[e], j < r ? load_f(&B[o * r + j]) : 0.0f);
    }
}

/* dB [out, r] += dBp [out, rp]'s first r columns. */
__global__ void lora_add_db_kernel(float *dB, const float *dBp, int64_t out, int64_t r,
                                   int64_t rp)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < out * r;
         e += (int64_t)gridDim.x * blockDim.x)
        dB[e] += dBp[e / r * rp + e % r];
}

/* dx[n, c] = (accumulate ? dx[n, c] : 0) + (keep ? dxd[n, c] / (1 - p) : 0). */
template <class T>
__global__ void lora_mask_add_kernel(T *dx, int64_t lddx, const T *dxd, int64_t N, int64_t in,
                                     int accumulate, KeepArgs k, float keep_scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * in;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = e / in, c = e % in;
        const bool keep = st_lora_keep_at(k.seed, k.layer, k.target, k.step, k.first_seq, k.T,
                                          n, c, in, k.dropout);
        T *d = &dx[n * lddx + c];
        const float base = accumulate ? load_f(d) : 0.0f;
        store_f(d, keep ? base + load_f(&dxd[e]) * keep_scale : base);
    }
}

inline unsigned lora_grid(int64_t n) { return st_cuda::grid_for(n, kLoraThreads); }

/* One block call's adapters: the arguments, the scratch, the target test. */
template <class S> struct Lora {
    const st_model *m;
    const st_cuda_lora *a;     /* NULL: no adapters */
    LoraScratch<S> sc;
    int64_t B, N;
    st_cuda_model_ctx *x;
    bool on(int i) const { return a && m->lora.a_off[i] >= 0; }
    KeepArgs keep(int i) const
    {
        return KeepArgs{a->seed, a->step, a->layer, a->first_seq, m->T, a->dropout, i};
    }
    float keep_scale() const { return (float)(1.0 / (1.0 - a->dropout)); }
    const S *A(int i) const { return (const S *)a->p + m->lora.a_off[i]; }
    const S *Bw(int i) const { return (const S *)a->p + m->lora.b_off[i]; }

    /* The adapter's input: x itself, or x with dropout applied in sc.xd. */
    cudaError_t input(int i, const S *in, int64_t ldx, const S **xin, int64_t *ld)
    {
        if (a->dropout <= 0.0) {
            *xin = in;
            *ld = ldx;
            return cudaSuccess;
        }
        const int64_t w = m->lora.in[i];
        lora_dropout_kernel<<<lora_grid(N * w), kLoraThreads, 0, x->stream>>>(
            dev(sc.xd), dev(in), ldx, N, w, keep(i), keep_scale());
        *xin = sc.xd;
        *ld = w;
        return cudaGetLastError();
    }

    /* sc.xa = scale * (xin A^T) [N, r] at stride rp, and sc.Bp. */
    cudaError_t xa_and_bp(int i, const S *xin, int64_t ld)
    {
        const int64_t r = m->lora.rank, rp = sc.rp, w = m->lora.in[i], out = m->lora.out[i];
        TRY(mm(x, 0, 1, N, r, w, xin, ld, A(i), w, 0.0f, sc.xa32, rp));
        lora_scale_kernel<<<lora_grid(N * r), kLoraThreads, 0, x->stream>>>(
            dev(sc.xa), sc.xa32, N, r, rp, m->lora.scale);
        TRY(cudaGetLastError());
        lora_pad_kernel<<<lora_grid(out * rp), kLoraThreads, 0, x->stream>>>(
            dev(sc.Bp), dev(Bw(i)), out, r, rp);
        return cudaGetLastError();
    }

    /* y = beta * y + scale * (dropout(in) A^T) B^T (beta 1: the target's
     * output gets the adapter's share; 0: y holds the share alone). */
    cudaError_t forward(int i, const S *in, int64_t ldx, S *y, int64_t ldy, float beta = 1.0f)
    {
        const S *xin;
        int64_t ld;
        TRY(input(i, in, ldx, &xin, &ld));
        TRY(xa_and_bp(i, xin, ld));
        return mm(x, 0, 1, N, m->lora.out[i], (int64_t)m->lora.rank, (const S *)sc.xa, sc.rp,
                  (const S *)sc.Bp, sc.rp, beta, y, ldy);
    }

    /* dA, dB into the adapter gradient; dx = dx_beta * dx + the input's
     * gradient through the adapter. */
    cudaError_t backward(int i, const S *in, int64_t ldx, const S *dy, int64_t lddy, S *dx,
                         int64_t lddx, float dx_beta = 1.0f)
    {
        const int64_t r = m->lora.rank, rp = sc.rp, w = m->lora.in[i], out = m->lora.out[i];
        const S *xin;
        int64_t ld;
        TRY(input(i, in, ldx, &xin, &ld));
        TRY(xa_and_bp(i, xin, ld)); /* the forward again */
        /* dB += dy^T xa (padded, then added);  dxa = scale * dy B;
         * dA += dxa^T xin. */
        TRY(mm(x, 1, 0, out, r, N, dy, lddy, (const S *)sc.xa, rp, 0.0f, sc.dBp, rp));
        lora_add_db_kernel<<<lora_grid(out * r), kLoraThreads, 0, x->stream>>>(
            a->g + m->lora.b_off[i], sc.dBp, out, r, rp);
        TRY(cudaGetLastError());
        TRY(mm(x, 0, 0, N, r, out, dy, lddy, (const S *)sc.Bp, rp, 0.0f, sc.dxa32, rp));
        lora_scale_kernel<<<lora_grid(N * r), kLoraThreads, 0, x->stream>>>(
            dev(sc.dxa), sc.dxa32, N, r, rp, m->lora.scale);
        TRY(cudaGetLastError());
        TRY(mm(x, 1, 0, r, w, N, (const S *)sc.dxa, rp, xin, ld, 1.0f,
               a->g + m->lora.a_off[i], w));
        /* dx += dxa A, through the dropout mask when there is one. */
        if (a->dropout <= 0.0)
            return mm(x, 0, 0, N, w, r, (const S *)sc.dxa, rp, A(i), w, dx_beta, dx, lddx);
        TRY(mm(x, 0, 0, N, w, r, (const S *)sc.dxa, rp, A(i), w, 0.0f, sc.dxd, w));
        lora_mask_add_kernel<<<lora_grid(N * w), kLoraThreads, 0, x->stream>>>(
            dev(dx), lddx, dev((const S *)sc.dxd), N, w, dx_beta != 0.0f, keep(i),
            keep_scale());
        return cudaGetLastError();
    }
};

template <class S>
Lora<S> lora_for(const st_model *m, const st_cuda_lora *a, int64_t B, void *scratch,
                 st_cuda_model_ctx *x)
{
    Lora<S> l;
    l.m = m;
    l.a = a && m->lora.rank ? a : nullptr;
    l.B = B;
    l.N = B * m->T;
    l.x = x;
    BlockScratch<S> bs;
    layout_block_scratch(&bs, m, B, l.a ? scratch : nullptr);
    l.sc = bs.lora;
    return l;
}

template <class S>
cudaError_t block_forward_t(const st_model *m, const S *p, const st_cuda_lora *la, int64_t B,
                            const S *in, S *out, const st_cuda_block_acts *ap, void *scratch,
                            st_cuda_model_ctx *x)
{
    const int gpt2 = m->arch == ST_ARCH_GPT2;
    const int uu = 1; /* tensor offsets are the same in every block unit */
    const int64_t N = B * m->T, C = m->C, F = m->F, W = qkv_width(m);
    const int64_t qd = m->H * m->hd, kvd = m->KV * m->hd;
    const cudaStream_t s = x->stream;
    S *ln1 = (S *)ap->ln1, *qkv = (S *)ap->qkv, *att = (S *)ap->att;
    S *res_mid = (S *)ap->res_mid, *ln2 = (S *)ap->ln2, *fc = (S *)ap->fc;
    S *act = (S *)ap->act;
    Lora<S> lo = lora_for<S>(m, la, B, scratch, x);

    if (gpt2) {
        TRY(layernorm_forward(ln1, ap->ln1_mean, ap->ln1_rstd, in, tp(m, uu, G_LN1W, p),
                              tp(m, uu, G_LN1B, p), N, C, m->eps, s));
        TRY(linear_forward_epi(x, 1, qkv, W, ln1, C, tp(m, uu, G_ATTW, p), N, C, 3 * C,
                               (const S *)nullptr, 0, ST_CUDA_EPI_BIAS, tp(m, uu, G_ATTB, p),
                               (S *)nullptr, 0));
        if (lo.on(0))
            TRY(lo.forward(0, ln1, C, qkv, W));
    } else {
        TRY(rmsnorm_forward(ln1, ap->ln1_rstd, in, tp(m, uu, L_NORM1, p), N, C, m->eps, s));
        TRY(linear_forward(x, qkv, W, ln1, C, tp(m, uu, L_Q, p), N, C, qd, 0.0f));
        TRY(linear_forward(x, qkv + qd, W, ln1, C, tp(m, uu, L_K, p), N, C, kvd, 0.0f));
        TRY(linear_forward(x, qkv + qd + kvd, W, ln1, C, tp(m, uu, L_V, p), N, C, kvd,
                           0.0f));
        if (lo.on(0))
            TRY(lo.forward(0, ln1, C, qkv, W));
        if (lo.on(1))
            TRY(lo.forward(1, ln1, C, qkv + qd, W));
        if (lo.on(2))
            TRY(lo.forward(2, ln1, C, qkv + qd + kvd, W));
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
        if (lo.on(1))
            TRY(lo.forward(1, att, C, res_mid, C));
        TRY(layernorm_forward(ln2, ap->ln2_mean, ap->ln2_rstd, res_mid,
                              tp(m, uu, G_LN2W, p), tp(m, uu, G_LN2B, p), N, C, m->eps, s));
        /* fc keeps the pre-activation for the backward's DGELU.  An adapter
         * on c_fc acts before the GELU: its share, computed first, is the
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
    } else {
        TRY(linear_forward_epi(x, 0, res_mid, C, att, qd, tp(m, uu, L_O, p), N, qd, C, in, C,
                               ST_CUDA_EPI_NONE, (const S *)nullptr, (S *)nullptr, 0));
        if (lo.on(3))
            TRY(lo.forward(3, att, qd, res_mid, C));
        TRY(rmsnorm_forward(ln2, ap->ln2_rstd, res_mid, tp(m, uu, L_NORM2, p), N, C, m->eps,
                            s));
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
    }
    return cudaSuccess;
}

template <class S>
cudaError_t block_backward_t(const st_model *m, const S *p, float *g, const st_cuda_lora *la,
                             int64_t B, const S *in, const st_cuda_block_acts *ap, const S *dout,
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
    Lora<S> lo = lora_for<S>(m, la, B, scratch, x);
    /* g NULL: frozen base weights (LoRA), no weight, bias or norm gradient
     * (tg gives NULL, which linear_backward and the norms skip). */

    /* MLP: out = res_mid + mlp(norm2(res_mid)) */
    if (gpt2) {
        TRY(linear_backward(x, 1, (S *)nullptr, 0.0f, tg(m, uu, G_PRJW, g), dout, C, act, F,
                            tp(m, uu, G_PRJW, p), N, F, C));
        if (g)
            TRY(bias_backward(tg(m, uu, G_PRJB, g), dout, N, C, sc.red_ws, s));
        /* mlp.c_proj's adapter: its share of d_act joins the DGELU
         * product as C (the base's share never exists on its own). */
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
    } else {
        TRY(linear_backward(x, 0, sc.d_act, 0.0f, tg(m, uu, L_DOWN, g), dout, C, act, F,
                            tp(m, uu, L_DOWN, p), N, F, C));
        if (lo.on(6))
            TRY(lo.backward(6, act, F, dout, C, sc.d_act, F));
        TRY(swiglu_backward(sc.d_fc, fc, sc.d_act, N, F, s));
        TRY(linear_backward(x, 0, sc.d_ln, 0.0f, tg(m, uu, L_GATE, g), sc.d_fc, 2 * F, ln2,
                            C, tp(m, uu, L_GATE, p), N, C, F));
        TRY(linear_backward(x, 0, sc.d_ln, 1.0f, tg(m, uu, L_UP, g), sc.d_fc + F, 2 * F, ln2,
                            C, tp(m, uu, L_UP, p), N, C, F));
        if (lo.on(4))
            TRY(lo.backward(4, ln2, C, sc.d_fc, 2 * F, sc.d_ln, C));
        if (lo.on(5))
            TRY(lo.backward(5, ln2, C, sc.d_fc + F, 2 * F, sc.d_ln, C));
        TRY(rmsnorm_backward(sc.d_res_mid, dout, tg(m, uu, L_NORM2, g), sc.d_ln, res_mid,
                             tp(m, uu, L_NORM2, p), ap->ln2_rstd, N, C, sc.red_ws, s));
    }

    /* Attention: res_mid = in + proj(attention(qkv(norm1(in)))) */
    if (gpt2) {
        TRY(linear_backward(x, 1, sc.d_att, 0.0f, tg(m, uu, G_CPRW, g), sc.d_res_mid, C,
                            att, C, tp(m, uu, G_CPRW, p), N, C, C));
        if (lo.on(1))
            TRY(lo.backward(1, att, C, sc.d_res_mid, C, sc.d_att, C));
        if (g)
            TRY(bias_backward(tg(m, uu, G_CPRB, g), sc.d_res_mid, N, C, sc.red_ws, s));
    } else {
        TRY(linear_backward(x, 0, sc.d_att, 0.0f, tg(m, uu, L_O, g), sc.d_res_mid, C, att,
                            qd, tp(m, uu, L_O, p), N, qd, C));
        if (lo.on(3))
            TRY(lo.backward(3, att, qd, sc.d_res_mid, C, sc.d_att, qd));
    }
    TRY(attention_backward(sc.d_qkv, W, sc.d_qkv + qd, W, sc.d_qkv + qd + kvd, W, sc.d_att,
                           qd, att, qd, ap->lse, qkv, W, qkv + qd, W, qkv + qd + kvd, W, B,
                           m->T, m->H, m->KV, m->hd, sc.attn_ws, s));
    S *d_ln1 = sc.d_ln;
    /* din = d_res_mid (the residual's path) + the first norm's gradient,
     * added by the norm backward below: d_res_mid is not written again. */
    if (gpt2) {
        TRY(linear_backward(x, 1, d_ln1, 0.0f, tg(m, uu, G_ATTW, g), sc.d_qkv, W, ln1, C,
                            tp(m, uu, G_ATTW, p), N, C, 3 * C));
        if (lo.on(0))
            TRY(lo.backward(0, ln1, C, sc.d_qkv, W, d_ln1, C));
        if (g)
            TRY(bias_backward(tg(m, uu, G_ATTB, g), sc.d_qkv, N, 3 * C, sc.red_ws, s));
        TRY(layernorm_backward(din, (const S *)sc.d_res_mid, tg(m, uu, G_LN1W, g),
                               tg(m, uu, G_LN1B, g), d_ln1, in,
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
        if (lo.on(0))
            TRY(lo.backward(0, ln1, C, sc.d_qkv, W, d_ln1, C));
        if (lo.on(1))
            TRY(lo.backward(1, ln1, C, sc.d_qkv + qd, W, d_ln1, C));
        if (lo.on(2))
            TRY(lo.backward(2, ln1, C, sc.d_qkv + qd + kvd, W, d_ln1, C));
        TRY(rmsnorm_backward(din, (const S *)sc.d_res_mid, tg(m, uu, L_NORM1, g), d_ln1, in,
                             tp(m, uu, L_NORM1, p),
                             ap->ln1_rstd, N, C, sc.red_ws, s));
    }
    return cudaSuccess;
}

} /* namespace */

extern "C" {

cudaError_t st_cuda_model_block_forward_f32(const st_model *m, const float *p,
                                            const st_cuda_lora *lora, int64_t B,
                                            const float *in, float *out,
                                            const st_cuda_block_acts *a, void *scratch,
                                            st_cuda_model_ctx *ctx)
{
    return block_forward_t(m, p, lora, B, in, out, a, scratch, ctx);
}

cudaError_t st_cuda_model_block_backward_f32(const st_model *m, const float *p, float *g,
                                             const st_cuda_lora *lora, int64_t B,
                                             const float *in, const st_cuda_block_acts *a,
                                             const float *dout, float *din, void *scratch,
                                             st_cuda_model_ctx *ctx)
{
    return block_backward_t(m, p, g, lora, B, in, a, dout, din, scratch, ctx);
}

cudaError_t st_cuda_model_block_forward_bf16(const st_model *m, const uint16_t *p,
                                             const st_cuda_lora *lora, int64_t B,
                                             const uint16_t *in, uint16_t *out,
                                             const st_cuda_block_acts *a, void *scratch,
                                             st_cuda_model_ctx *ctx)
{
    return block_forward_t(m, p, lora, B, in, out, a, scratch, ctx);
}

cudaError_t st_cuda_model_block_backward_bf16(const st_model *m, const uint16_t *p,
                                              float *g, const st_cuda_lora *lora, int64_t B,
                                              const uint16_t *in, const st_cuda_block_acts *a,
                                              const uint16_t *dout, uint16_t *din,
                                              void *scratch, st_cuda_model_ctx *ctx)
{
    return block_backward_t(m, p, g, lora, B, in, a, dout, din, scratch, ctx);
}

} /* extern "C" */
