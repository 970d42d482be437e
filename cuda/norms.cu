/* LayerNorm (GPT-2) and RMSNorm (Llama), forward and backward, for the
 * CUDA backend; the reference is src/kernels/cpu_ops.c.  Both norms share one
 * template with a `centered` flag, as the CPU code shares
 * norm_backward_rows / norm_backward_params.
 *
 * Layout of the work: one block per row for everything that reduces along
 * a row (the statistics, and dx, which needs two row sums), and one thread
 * per column for the parameter gradients (dw, db are sums over rows), with
 * the rows split over kColRows thread rows and the partials added in a
 * fixed order.  No atomics anywhere, so results are deterministic.
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
const int kColRows = 16;

/* out = ((x - mean) * rstd) * w (+ b); mean is 0 when !centered. */
template <typename T, bool centered>
__global__ void norm_forward_kernel(T *out, float *mean, float *rstd, const T *x,
                                    const T *w, const T *b, int64_t C, float eps)
{
    __shared__ float scratch[32];
    const int64_t n = blockIdx.x;
    const T *xr = x + n * C;
    float m = 0.0f;
    if (centered) {
        float s = 0.0f;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            s += load_f(&xr[c]);
        m = block_sum(s, scratch) / (float)C;
    }
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float d = load_f(&xr[c]) - m;
        ss += d * d;
    }
    const float var = block_sum(ss, scratch) / (float)C;
    const float r = 1.0f / sqrtf(var + eps);
    T *o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float y = ((load_f(&xr[c]) - m) * r) * load_f(&w[c]);
        if (centered)
            y += load_f(&b[c]);
        store_f(&o[c], y);
    }
    if (threadIdx.x == 0) {
        if (centered)
            mean[n] = m;
        rstd[n] = r;
    }
}

/* dx[n,:] += (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) * rstd,
 * dxhat = dout * w; the mean(dxhat) term only when centered. */
template <typename T, bool centered>
__global__ void norm_backward_rows_kernel(T *dx, const T *dout, const T *x, const T *w,
                                          const float *mean, const float *rstd, int64_t C)
{
    __shared__ float scratch[32];
    const int64_t n = blockIdx.x;
    const T *xr = x + n * C, *dr = dout + n * C;
    const float m = centered ? mean[n] : 0.0f, r = rstd[n];
    float s_dxhat = 0.0f, s_dxhat_xhat = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (load_f(&xr[c]) - m) * r;
        float dxhat = load_f(&dr[c]) * load_f(&w[c]);
        s_dxhat += dxhat;
        s_dxhat_xhat += dxhat * xhat;
    }
    const float a = centered ? block_sum(s_dxhat, scratch) / (float)C : 0.0f;
    const float bb = block_sum(s_dxhat_xhat, scratch) / (float)C;
    T *dxr = dx + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (load_f(&xr[c]) - m) * r;
        float dxhat = load_f(&dr[c]) * load_f(&w[c]);
        float g = dxhat - a - xhat * bb;
        store_f(&dxr[c], load_f(&dxr[c]) + g * r);
    }
}

/* dw[c] += sum_n dout[n,c] * xhat[n,c]; db[c] += sum_n dout[n,c] (centered).
 * A block of 32 x kColRows threads owns 32 adjacent columns. */
template <typename T, bool centered>
__global__ void norm_backward_params_kernel(float *dw, float *db, const T *dout,
                                           const T *x, const float *mean,
                                           const float *rstd, int64_t N, int64_t C)
{
    __shared__ float part_w[kColRows][33], part_b[kColRows][33];
    const int64_t c = blockIdx.x * 32 + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int64_t n = threadIdx.y; n < N; n += kColRows) {
            float xhat = (load_f(&x[n * C + c]) - (centered ? mean[n] : 0.0f)) * rstd[n];
            float d = load_f(&dout[n * C + c]);
            sw += d * xhat;
            sb += d;
        }
    part_w[threadIdx.y][threadIdx.x] = sw;
    part_b[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int y = 0; y < kColRows; y++) {
            tw += part_w[y][threadIdx.x];
            tb += part_b[y][threadIdx.x];
        }
        dw[c] += tw;
        if (centered)
            db[c] += tb;
    }
}

/* Fewer threads for narrow rows, so no warp idles for a whole row. */
static int row_threads(int64_t C)
{
    int t = 32;
    while (t < kRowThreads && t < C)
        t *= 2;
    return t;
}

template <typename T, bool centered>
cudaError_t norm_forward(T *out, float *mean, float *rstd, const T *x, const T *w,
                         const T *b, int64_t N, int64_t C, float eps, cudaStream_t s)
{
    if (N > 0 && C > 0)
        norm_forward_kernel<T, centered><<<(unsigned)N, row_threads(C), 0, s>>>(
            out, mean, rstd, x, w, b, C, eps);
    return launch_status();
}

template <typename T, bool centered>
cudaError_t norm_backward(T *dx, float *dw, float *db, const T *dout, const T *x,
                          const T *w, const float *mean, const float *rstd, int64_t N,
                          int64_t C, cudaStream_t s)
{
    if (N <= 0 || C <= 0)
        return launch_status();
    norm_backward_rows_kernel<T, centered><<<(unsigned)N, row_threads(C), 0, s>>>(
        dx, dout, x, w, mean, rstd, C);
    norm_backward_params_kernel<T, centered>
        <<<(unsigned)((C + 31) / 32), dim3(32, kColRows), 0, s>>>(dw, db, dout, x, mean,
                                                                 rstd, N, C);
    return launch_status();
}

} /* namespace */

extern "C" {

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
cudaError_t st_cuda_layernorm_backward_f32(float *dx, float *dw, float *db,
                                           const float *dout, const float *x,
                                           const float *w, const float *mean,
                                           const float *rstd, int64_t N, int64_t C,
                                           cudaStream_t s)
{
    return norm_backward<float, true>(dx, dw, db, dout, x, w, mean, rstd, N, C, s);
}
cudaError_t st_cuda_layernorm_backward_bf16(uint16_t *dx, float *dw, float *db,
                                            const uint16_t *dout, const uint16_t *x,
                                            const uint16_t *w, const float *mean,
                                            const float *rstd, int64_t N, int64_t C,
                                            cudaStream_t s)
{
    return norm_backward<bf16, true>(as_bf16(dx), dw, db, as_bf16(dout), as_bf16(x),
                                     as_bf16(w), mean, rstd, N, C, s);
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
cudaError_t st_cuda_rmsnorm_backward_f32(float *dx, float *dw, const float *dout,
                                         const float *x, const float *w,
                                         const float *rstd, int64_t N, int64_t C,
                                         cudaStream_t s)
{
    return norm_backward<float, false>(dx, dw, NULL, dout, x, w, NULL, rstd, N, C, s);
}
cudaError_t st_cuda_rmsnorm_backward_bf16(uint16_t *dx, float *dw, const uint16_t *dout,
                                          const uint16_t *x, const uint16_t *w,
                                          const float *rstd, int64_t N, int64_t C,
                                          cudaStream_t s)
{
    return norm_backward<bf16, false>(as_bf16(dx), dw, NULL, as_bf16(dout), as_bf16(x),
                                      as_bf16(w), NULL, rstd, N, C, s);
}

} /* extern "C" */
