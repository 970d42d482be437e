/* LayerNorm (GPT-2) and RMSNorm (Llama), forward and backward, for the
 * CUDA backend; the reference is src/kernels/cpu_ops.c.  Both norms share one
 * template with a `centered` flag, as the CPU code shares
 * norm_backward_rows / norm_backward_params.
 *
 * Layout of the work: the forward is one block per row (the statistics
 * need two row sums).  The backward is one block per chunk of
 * kNormChunkRows rows, which computes dx row by row and, in the same pass
 * over x and dout, its chunk's share of dw and db (sums over rows) into a
 * partial buffer the caller provides; a second kernel (common.cuh's
 * colsum_finish_kernel) adds the chunks' partials in a fixed order (rows
 * wider than 8192, whose columns do not fit in registers, compute dx and
 * the partials in two kernels instead).  That
 * replaced a separate column-sum kernel of C / 32 blocks, which could not
 * fill a large GPU and read x and dout a second time.  No atomics
 * anywhere, so results are deterministic; the sums over rows are fp32 in a
 * different order from the CPU's double sums, so dw and db agree with the
 * CPU to rounding, not bit for bit.
 *
 * Precision: the CPU sums rows in double; here sums are fp32 block
 * reductions (a tree, so the rounding error grows like log2(C) rather than
 * C).  The variance is computed in two passes over x (mean first, then the
 * squared deviations), never as E[x^2] - mean^2, so there is no
 * cancellation for rows with a large mean. */
#include "common.cuh"

using namespace st_cuda;

namespace {

const int kRowThreads = 256; /* a multiple of 32, at most 1024 */

/* Column groups.  Every kernel here gives a thread groups of V = 16 /
 * sizeof(T) adjacent columns (4 fp32, 8 bf16) rather than single columns,
 * so that with kVec a group moves in one 128-bit access (common.cuh's
 * load16 / store16; the launchers take it when the pointers are 16-byte
 * aligned and C is a multiple of V).  Without kVec the same groups are
 * read element by element, columns past C masked, so the two paths add
 * the same numbers in the same order and give the same bits.  (The
 * grouping did change the order of each thread's share of the row sums,
 * hence the last bits of mean, rstd and dx, from the one-column-per-thread
 * kernels it replaced; both orders are fp32 trees of the same depth.) */
template <typename T> __host__ __device__ constexpr int group_width()
{
    return vec_width<T, true>();
}

template <bool kVec, int V, typename T>
__device__ __forceinline__ void load_cols(const T *p, int64_t c0, int64_t C, float (&v)[V])
{
    if constexpr (kVec) {
        if (c0 < C) /* C a multiple of V: the group is whole or absent */
            load_vec(p + c0, v);
        else
            for (int k = 0; k < V; k++)
                v[k] = 0.0f;
    } else {
        for (int k = 0; k < V; k++)
            v[k] = c0 + k < C ? load_f(&p[c0 + k]) : 0.0f;
    }
}
template <bool kVec, int V, typename T>
__device__ __forceinline__ void store_cols(T *p, int64_t c0, int64_t C, const float (&v)[V])
{
    if constexpr (kVec) {
        if (c0 < C)
            store_vec(p + c0, v);
    } else {
        for (int k = 0; k < V; k++)
            if (c0 + k < C)
                store_f(&p[c0 + k], v[k]);
    }
}

/* out = ((x - mean) * rstd) * w (+ b); mean is 0 when !centered.  Thread t
 * owns the column groups t, t + blockDim.x, ... */
template <typename T, bool centered, bool kVec>
__global__ void norm_forward_kernel(T *out, float *mean, float *rstd, const T *x,
                                    const T *w, const T *b, int64_t C, float eps)
{
    constexpr int V = group_width<T>();
    __shared__ float scratch[32];
    const int64_t n = blockIdx.x, step = (int64_t)blockDim.x * V;
    const T *xr = x + n * C;
    float xv[V];
    float m = 0.0f;
    if (centered) {
        float s = 0.0f;
        for (int64_t c = threadIdx.x * V; c < C; c += step) {
            load_cols<kVec>(xr, c, C, xv);
            for (int k = 0; k < V; k++)
                if (c + k < C)
                    s += xv[k];
        }
        m = block_sum(s, scratch) / (float)C;
    }
    float ss = 0.0f;
    for (int64_t c = threadIdx.x * V; c < C; c += step) {
        load_cols<kVec>(xr, c, C, xv);
        for (int k = 0; k < V; k++)
            if (c + k < C) {
                const float d = xv[k] - m;
                ss += d * d;
            }
    }
    const float var = block_sum(ss, scratch) / (float)C;
    const float r = 1.0f / sqrtf(var + eps);
    T *o = out + n * C;
    for (int64_t c = threadIdx.x * V; c < C; c += step) {
        float wv[V], bv[V], y[V];
        load_cols<kVec>(xr, c, C, xv);
        load_cols<kVec>(w, c, C, wv);
        if (centered)
            load_cols<kVec>(b, c, C, bv);
        for (int k = 0; k < V; k++) {
            y[k] = ((xv[k] - m) * r) * wv[k];
            if (centered)
                y[k] += bv[k];
        }
        store_cols<kVec>(o, c, C, y);
    }
    if (threadIdx.x == 0) {
        if (centered)
            mean[n] = m;
        rstd[n] = r;
    }
}

/* Threads per block of the fused backward, at most: each thread keeps 5 x
 * kCPT floats of its columns live, so the register file (64 K per SM) caps
 * the block; __launch_bounds__ holds ptxas to it (sm_90, nvcc 13: 8
 * columns in 55-84 registers, 32 columns in 159-255, no spill but 24 bytes
 * in fp32 LayerNorm's scalar path).  Wider rows (C > 8192) take the
 * unfused path below. */
__host__ __device__ constexpr int kFusedThreads(int cpt) { return cpt <= 8 ? 512 : 256; }
const int64_t kFusedMaxC = 32 * 256;

/* The backward, fused: block b owns rows [b * kNormChunkRows, +kNormChunkRows)
 * and thread t owns the column groups t, t + blockDim.x, ... (kCPT / V of
 * them, kCPT columns, held in registers).  For each row in order: dx[n,:] =
 * dres[n,:] + (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) * rstd,
 * dres being dx itself (accumulate) or the residual's gradient from
 * elsewhere (the block's backward adds it here instead of copying it into
 * dx first), dxhat = dout * w (the mean(dxhat) term only when centered),
 * and the thread adds the row's dw and db terms (dout * xhat, dout) to its
 * columns' running sums.  The block writes those sums as its partial row
 * of dw and db; colsum_finish_kernel adds the partials.  So x and dout are
 * read once for everything, and each column's sum runs over rows in a
 * fixed order whatever the schedule. */
template <typename T, bool centered, int kCPT, bool kVec>
__global__ void __launch_bounds__(kFusedThreads(kCPT))
norm_backward_kernel(T *dx, const T *dres, float *part_w, float *part_b, const T *dout,
                     const T *x, const T *w, const float *mean, const float *rstd, int64_t N,
                     int64_t C)
{
    constexpr int V = group_width<T>(), G = kCPT / V;
    static_assert(kCPT % V == 0, "whole column groups per thread");
    __shared__ float scratch[32];
    const int64_t r0 = (int64_t)blockIdx.x * kNormChunkRows;
    const int64_t r1 = r0 + kNormChunkRows < N ? r0 + kNormChunkRows : N;
    float wv[G][V], aw[G][V], ab[G][V], xh[G][V], dv[G][V];
    for (int g = 0; g < G; g++) {
        const int64_t c0 = (threadIdx.x + (int64_t)g * blockDim.x) * V;
        load_cols<kVec>(w, c0, C, wv[g]);
        for (int k = 0; k < V; k++)
            aw[g][k] = ab[g][k] = 0.0f;
    }
    for (int64_t n = r0; n < r1; n++) {
        const T *xr = x + n * C, *dr = dout + n * C;
        const float m = centered ? mean[n] : 0.0f, r = rstd[n];
        float s_dxhat = 0.0f, s_dxhat_xhat = 0.0f;
        for (int g = 0; g < G; g++) {
            const int64_t c0 = (threadIdx.x + (int64_t)g * blockDim.x) * V;
            load_cols<kVec>(xr, c0, C, xh[g]);
            load_cols<kVec>(dr, c0, C, dv[g]);
            for (int k = 0; k < V; k++) {
                xh[g][k] = c0 + k < C ? (xh[g][k] - m) * r : 0.0f;
                const float dxhat = dv[g][k] * wv[g][k];
                s_dxhat += dxhat;
                s_dxhat_xhat += dxhat * xh[g][k];
            }
        }
        const float a = centered ? block_sum(s_dxhat, scratch) / (float)C : 0.0f;
        const float bb = block_sum(s_dxhat_xhat, scratch) / (float)C;
        T *dxr = dx + n * C;
        const T *rr = dres + n * C;
        for (int g = 0; g < G; g++) {
            const int64_t c0 = (threadIdx.x + (int64_t)g * blockDim.x) * V;
            if (c0 >= C)
                continue;
            float o[V];
            load_cols<kVec>(rr, c0, C, o);
            for (int k = 0; k < V; k++) {
                const float gk = dv[g][k] * wv[g][k] - a - xh[g][k] * bb;
                o[k] += gk * r;
                aw[g][k] += dv[g][k] * xh[g][k];
                ab[g][k] += dv[g][k];
            }
            store_cols<kVec>(dxr, c0, C, o);
        }
    }
    for (int g = 0; g < G; g++) {
        const int64_t c0 = (threadIdx.x + (int64_t)g * blockDim.x) * V;
        if (c0 < C) {
            store_cols<kVec>(part_w + (int64_t)blockIdx.x * C, c0, C, aw[g]);
            if (centered)
                store_cols<kVec>(part_b + (int64_t)blockIdx.x * C, c0, C, ab[g]);
        }
    }
}

/* Fewer threads for narrow rows (in column groups), so no warp idles for
 * a whole row. */
static int row_threads(int64_t groups)
{
    int t = 32;
    while (t < kRowThreads && t < groups)
        t *= 2;
    return t;
}

template <typename T, bool centered>
cudaError_t norm_forward(T *out, float *mean, float *rstd, const T *x, const T *w,
                         const T *b, int64_t N, int64_t C, float eps, cudaStream_t s)
{
    constexpr int V = group_width<T>();
    if (N > 0 && C > 0)
        with_vec(aligned16(out, x, w, b) && widths_vec<T>(C), [&](auto tag) {
            constexpr bool kVec = decltype(tag)::value;
            const int threads = row_threads((C + V - 1) / V);
            norm_forward_kernel<T, centered, kVec><<<(unsigned)N, threads, 0, s>>>(
                out, mean, rstd, x, w, b, C, eps);
        });
    return launch_status();
}

/* Rows wider than kFusedMaxC: dx by one block per row (two passes over
 * the row), and the chunks' dw / db partials by a second kernel, one
 * thread per column group of a chunk, rows in order; the same partial
 * layout and second stage as the fused path. */
template <typename T, bool centered, bool kVec>
__global__ void norm_backward_rows_kernel(T *dx, const T *dres, const T *dout, const T *x,
                                          const T *w,
                                          const float *mean, const float *rstd, int64_t C)
{
    constexpr int V = group_width<T>();
    __shared__ float scratch[32];
    const int64_t n = blockIdx.x, step = (int64_t)blockDim.x * V;
    const T *xr = x + n * C, *dr = dout + n * C;
    const float m = centered ? mean[n] : 0.0f, r = rstd[n];
    float s_dxhat = 0.0f, s_dxhat_xhat = 0.0f;
    float xv[V], dv[V], wv[V];
    for (int64_t c = threadIdx.x * V; c < C; c += step) {
        load_cols<kVec>(xr, c, C, xv);
        load_cols<kVec>(dr, c, C, dv);
        load_cols<kVec>(w, c, C, wv);
        for (int k = 0; k < V; k++)
            if (c + k < C) {
                const float xhat = (xv[k] - m) * r, dxhat = dv[k] * wv[k];
                s_dxhat += dxhat;
                s_dxhat_xhat += dxhat * xhat;
            }
    }
    const float a = centered ? block_sum(s_dxhat, scratch) / (float)C : 0.0f;
    const float bb = block_sum(s_dxhat_xhat, scratch) / (float)C;
    T *dxr = dx + n * C;
    const T *rr = dres + n * C;
    for (int64_t c = threadIdx.x * V; c < C; c += step) {
        float o[V];
        load_cols<kVec>(xr, c, C, xv);
        load_cols<kVec>(dr, c, C, dv);
        load_cols<kVec>(w, c, C, wv);
        load_cols<kVec>(rr, c, C, o);
        for (int k = 0; k < V; k++) {
            const float xhat = (xv[k] - m) * r, dxhat = dv[k] * wv[k];
            o[k] += (dxhat - a - xhat * bb) * r;
        }
        store_cols<kVec>(dxr, c, C, o);
    }
}

template <typename T, bool centered, bool kVec>
__global__ void norm_params_partials_kernel(float *part_w, float *part_b, const T *dout,
                                            const T *x, const float *mean,
                                            const float *rstd, int64_t N, int64_t C)
{
    constexpr int V = group_width<T>();
    const int64_t c0 = ((int64_t)blockIdx.y * blockDim.x + threadIdx.x) * V;
    const int64_t r0 = (int64_t)blockIdx.x * kNormChunkRows;
    const int64_t r1 = r0 + kNormChunkRows < N ? r0 + kNormChunkRows : N;
    if (c0 >= C)
        return;
    float aw[V], ab[V], xv[V], dv[V];
    for (int k = 0; k < V; k++)
        aw[k] = ab[k] = 0.0f;
    for (int64_t n = r0; n < r1; n++) {
        load_cols<kVec>(x + n * C, c0, C, xv);
        load_cols<kVec>(dout + n * C, c0, C, dv);
        const float m = centered ? mean[n] : 0.0f, r = rstd[n];
        for (int k = 0; k < V; k++) {
            aw[k] += dv[k] * ((xv[k] - m) * r);
            ab[k] += dv[k];
        }
    }
    store_cols<kVec>(part_w + (int64_t)blockIdx.x * C, c0, C, aw);
    if (centered)
        store_cols<kVec>(part_b + (int64_t)blockIdx.x * C, c0, C, ab);
}

template <typename T, bool centered, int kCPT, bool kVec>
void launch_norm_backward(T *dx, const T *dres, float *pw, float *pb, const T *dout,
                          const T *x, const T *w, const float *mean, const float *rstd,
                          int64_t N, int64_t C, cudaStream_t s)
{
    const int64_t per = (C + kCPT - 1) / kCPT;
    const int threads = (int)((per + 31) / 32 * 32); /* <= kFusedThreads(kCPT) */
    norm_backward_kernel<T, centered, kCPT, kVec>
        <<<(unsigned)colsum_chunks(N, kNormChunkRows), threads, 0, s>>>(
            dx, dres, pw, pb, dout, x, w, mean, rstd, N, C);
}

template <typename T, bool centered>
cudaError_t norm_backward(T *dx, const T *dres, float *dw, float *db, const T *dout,
                          const T *x, const T *w, const float *mean, const float *rstd,
                          int64_t N, int64_t C, void *ws, cudaStream_t s)
{
    constexpr int V = group_width<T>();
    if (N <= 0 || C <= 0)
        return launch_status();
    if (!ws)
        return cudaErrorInvalidValue;
    const int64_t R = colsum_chunks(N, kNormChunkRows);
    float *pw = static_cast<float *>(ws), *pb = pw + R * C;
    if (!dres)
        dres = dx;
    /* The partial rows are fp32 of width C, aligned when ws is and C is a
     * multiple of 4, which a multiple of V is. */
    const bool vec = aligned16(dx, dres, dout, x, w, pw, pb) && widths_vec<T>(C);
    with_vec(vec, [&](auto tag) {
        constexpr bool kVec = decltype(tag)::value;
        if (C <= 8 * kFusedThreads(8)) {
            launch_norm_backward<T, centered, 8, kVec>(dx, dres, pw, pb, dout, x, w, mean, rstd,
                                                       N, C, s);
        } else if (C <= kFusedMaxC) {
            launch_norm_backward<T, centered, 32, kVec>(dx, dres, pw, pb, dout, x, w, mean,
                                                        rstd, N, C, s);
        } else {
            norm_backward_rows_kernel<T, centered, kVec><<<(unsigned)N, kRowThreads, 0, s>>>(
                dx, dres, dout, x, w, mean, rstd, C);
            const dim3 grid((unsigned)R, (unsigned)(((C + V - 1) / V + 255) / 256));
            norm_params_partials_kernel<T, centered, kVec><<<grid, 256, 0, s>>>(
                pw, pb, dout, x, mean, rstd, N, C);
        }
    });
    /* dw (and db) NULL: frozen norm weights (LoRA), whose partials the
     * first stage wrote in passing but no one adds up. */
    if (dw)
        colsum_finish_kernel<0><<<colsum_finish_blocks(C), dim3(32, kFinishRows), 0, s>>>(
            dw, pw, R, C);
    if (centered && db)
        colsum_finish_kernel<0><<<colsum_finish_blocks(C), dim3(32, kFinishRows), 0, s>>>(
            db, pb, R, C);
    return launch_status();
}

} /* namespace */

extern "C" {

size_t st_cuda_norm_backward_workspace_bytes(int64_t N, int64_t C)
{
    return N > 0 && C > 0
               ? 2 * (size_t)colsum_chunks(N, kNormChunkRows) * C * sizeof(float)
               : 0;
}

cudaError_t st_cuda_layernorm_forward_f32(float *out, float *mean, float *rstd,
                                          const float *x, const float *w, const float *b,
                                          int64_t N, int64_t C, float eps, cudaStream_t s)
{
    return norm_forward<float, true>(out, mean, rstd, x, w, b, N, C, eps, s);
}
cudaError_t st_cuda_layernorm_forward_bf16(uint16_t *out, float *mean, float *rstd,
                                           const uint16_t *x, const uint16_t *w,
                                           const uint16_t *b, int64_t N, int64_t C,
                                           float eps, cudaStream_t s)
{
    return norm_forward<bf16, true>(as_bf16(out), mean, rstd, as_bf16(x), as_bf16(w),
                                    as_bf16(b), N, C, eps, s);
}
cudaError_t st_cuda_layernorm_backward_f32(float *dx, const float *dres, float *dw,
                                           float *db, const float *dout, const float *x,
                                           const float *w, const float *mean,
                                           const float *rstd, int64_t N, int64_t C,
                                           void *ws, cudaStream_t s)
{
    return norm_backward<float, true>(dx, dres, dw, db, dout, x, w, mean, rstd, N, C, ws, s);
}
cudaError_t st_cuda_layernorm_backward_bf16(uint16_t *dx, const uint16_t *dres, float *dw,
                                            float *db, const uint16_t *dout, const uint16_t *x,
                                            const uint16_t *w, const float *mean,
                                            const float *rstd, int64_t N, int64_t C,
                                            void *ws, cudaStream_t s)
{
    return norm_backward<bf16, true>(as_bf16(dx), as_bf16(dres), dw, db, as_bf16(dout),
                                     as_bf16(x), as_bf16(w), mean, rstd, N, C, ws, s);
}
cudaError_t st_cuda_rmsnorm_forward_f32(float *out, float *rstd, const float *x,
                                        const float *w, int64_t N, int64_t C, float eps,
                                        cudaStream_t s)
{
    return norm_forward<float, false>(out, NULL, rstd, x, w, NULL, N, C, eps, s);
}
cudaError_t st_cuda_rmsnorm_forward_bf16(uint16_t *out, float *rstd, const uint16_t *x,
                                         const uint16_t *w, int64_t N, int64_t C,
                                         float eps, cudaStream_t s)
{
    return norm_forward<bf16, false>(as_bf16(out), NULL, rstd, as_bf16(x), as_bf16(w),
                                     NULL, N, C, eps, s);
}
cudaError_t st_cuda_rmsnorm_backward_f32(float *dx, const float *dres, float *dw,
                                         const float *dout, const float *x, const float *w,
                                         const float *rstd, int64_t N, int64_t C, void *ws,
                                         cudaStream_t s)
{
    return norm_backward<float, false>(dx, dres, dw, NULL, dout, x, w, NULL, rstd, N, C, ws,
                                       s);
}
cudaError_t st_cuda_rmsnorm_backward_bf16(uint16_t *dx, const uint16_t *dres, float *dw,
                                          const uint16_t *dout, const uint16_t *x,
                                          const uint16_t *w,
                                          const float *rstd, int64_t N, int64_t C,
                                          void *ws, cudaStream_t s)
{
    return norm_backward<bf16, false>(as_bf16(dx), as_bf16(dres), dw, NULL, as_bf16(dout),
                                      as_bf16(x), as_bf16(w), NULL, rstd, N, C, ws, s);
}

} /* extern "C" */
