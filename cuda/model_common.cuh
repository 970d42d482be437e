/* What the two block files (cuda/model_gpt2.cu, cuda/model_llama.cu) share
 * beyond model_units.cuh: the per-architecture table of block entry
 * points that cuda/model_common.cu dispatches through, and the LoRA
 * adapters (model.h's st_model_lora), which both architectures apply to
 * their own targets.  The adapter kernels are compiled once, in
 * model_common.cu, behind the small launchers declared here, so that each
 * block file holds only its architecture's sequence of operations. */
#ifndef ST_CUDA_MODEL_COMMON_CUH
#define ST_CUDA_MODEL_COMMON_CUH

#include "model_units.cuh"

namespace st_cuda_block {

/* One storage type's block forward and backward, with the arguments of
 * model_cuda.h's st_cuda_model_block_forward/backward_{f32,bf16}. */
template <class S> struct BlockFns {
    cudaError_t (*forward)(const st_model *m, const S *p, const st_cuda_lora *la, int64_t B,
                           const S *in, S *out, const st_cuda_block_acts *ap, void *scratch,
                           st_cuda_model_ctx *x);
    cudaError_t (*backward)(const st_model *m, const S *p, float *g, const st_cuda_lora *la,
                            int64_t B, const S *in, const st_cuda_block_acts *ap,
                            const S *dout, S *din, void *scratch, st_cuda_model_ctx *x);
};
struct BlockOps {
    BlockFns<float> f32;
    BlockFns<uint16_t> bf16;
};
/* Defined by the architecture's file; model_common.cu's table holds them
 * in the order of enum st_arch. */
extern const BlockOps gpt2_block_ops;
extern const BlockOps llama_block_ops;

/* What st_lora_keep_at needs besides the element. */
struct KeepArgs {
    uint64_t seed, step;
    int64_t layer, first_seq, T;
    double dropout;
    int target;
};

/* The adapters' elementwise steps (model_common.cu), T float or bf16,
 * each one grid-stride launch on stream s:
 *   dropout   xd[n, c] = keep ? x[n, c] * keep_scale : 0, xd [N, in] dense;
 *   scale     dst[n, j] = scale * src[n, j], j < r, rows ld apart;
 *   pad       Bp [out, rp] = B [out, r] with zero columns r..rp-1;
 *   add_db    dB [out, r] += dBp [out, rp]'s first r columns;
 *   mask_add  dx[n, c] = (accumulate ? dx[n, c] : 0)
 *                        + (keep ? dxd[n, c] * keep_scale : 0). */
template <class T>
void lora_dropout(T *xd, const T *x, int64_t ldx, int64_t N, int64_t in, KeepArgs k,
                  float keep_scale, cudaStream_t s);
template <class T>
void lora_scale(T *dst, const float *src, int64_t N, int64_t r, int64_t ld, float scale,
                cudaStream_t s);
template <class T>
void lora_pad(T *Bp, const T *B, int64_t out, int64_t r, int64_t rp, cudaStream_t s);
void lora_add_db(float *dB, const float *dBp, int64_t out, int64_t r, int64_t rp,
                 cudaStream_t s);
template <class T>
void lora_mask_add(T *dx, int64_t lddx, const T *dxd, int64_t N, int64_t in, int accumulate,
                   KeepArgs k, float keep_scale, cudaStream_t s);

} /* namespace st_cuda_block */

namespace {

using st_cuda_block::KeepArgs;

/* The storage type's device element (uint16_t words are bf16). */
template <class S> struct dev_of { typedef S t; };
template <> struct dev_of<uint16_t> { typedef st_cuda::bf16 t; };
template <class S> typename dev_of<S>::t *dev(S *p) { return (typename dev_of<S>::t *)p; }
template <class S> const typename dev_of<S>::t *dev(const S *p)
{
    return (const typename dev_of<S>::t *)p;
}

/* ---- LoRA adapters ---------------------------------------------------------
 * src/kernels/cpu_lora.c on the GPU, product for product: xa = scale *
 * (dropout(x) A^T), y += xa B^T; backward dB += dy^T xa, dxa = scale *
 * (dy B), dA += dxa^T dropout(x), dx += mask * (dxa A) / (1 - p).  The
 * rank-sized products run on st_cuda_gemm with padded row strides
 * (LoraScratch, model_units.cuh); the scaling, the dropout mask (the
 * same st_lora_keep_at hash as the CPU's, on the device) and the padding
 * copies are the launchers above.  Nothing here runs without adapters.
 * One block call's adapters: the arguments, the scratch, the target test. */
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
        st_cuda_block::lora_dropout(dev(sc.xd), dev(in), ldx, N, w, keep(i), keep_scale(),
                                    x->stream);
        *xin = sc.xd;
        *ld = w;
        return cudaGetLastError();
    }

    /* sc.xa = scale * (xin A^T) [N, r] at stride rp, and sc.Bp. */
    cudaError_t xa_and_bp(int i, const S *xin, int64_t ld)
    {
        const int64_t r = m->lora.rank, rp = sc.rp, w = m->lora.in[i], out = m->lora.out[i];
        TRY(mm(x, 0, 1, N, r, w, xin, ld, A(i), w, 0.0f, sc.xa32, rp));
        st_cuda_block::lora_scale(dev(sc.xa), sc.xa32, N, r, rp, m->lora.scale, x->stream);
        TRY(cudaGetLastError());
        st_cuda_block::lora_pad(dev(sc.Bp), dev(Bw(i)), out, r, rp, x->stream);
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
        st_cuda_block::lora_add_db(a->g + m->lora.b_off[i], sc.dBp, out, r, rp, x->stream);
        TRY(cudaGetLastError());
        TRY(mm(x, 0, 0, N, r, out, dy, lddy, (const S *)sc.Bp, rp, 0.0f, sc.dxa32, rp));
        st_cuda_block::lora_scale(dev(sc.dxa), sc.dxa32, N, r, rp, m->lora.scale, x->stream);
        TRY(cudaGetLastError());
        TRY(mm(x, 1, 0, r, w, N, (const S *)sc.dxa, rp, xin, ld, 1.0f,
               a->g + m->lora.a_off[i], w));
        /* dx += dxa A, through the dropout mask when there is one. */
        if (a->dropout <= 0.0)
            return mm(x, 0, 0, N, w, r, (const S *)sc.dxa, rp, A(i), w, dx_beta, dx, lddx);
        TRY(mm(x, 0, 0, N, w, r, (const S *)sc.dxa, rp, A(i), w, 0.0f, sc.dxd, w));
        st_cuda_block::lora_mask_add(dev(dx), lddx, dev((const S *)sc.dxd), N, w,
                                     dx_beta != 0.0f, keep(i), keep_scale(), x->stream);
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

} /* namespace */

#endif
