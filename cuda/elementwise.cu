/* Elementwise kernels of the CUDA backend: the bias gradient's column
 * sum, SwiGLU, RoPE and add_inplace (the bf16 casts are in casts.cu, the
 * embedding in embedding.cu).  Each kernel is the CPU kernel of
 * src/kernels/cpu_ops.c with its loops turned into a grid: one thread per
 * output element (or per 16 bytes of them, see the speed notes), a
 * grid-stride loop so any size works with a bounded grid, fp32 arithmetic
 * whatever the storage type.  The bias gradient is the exception, a
 * reduction over rows: common.cuh's two-stage column sum (row chunks x
 * column tiles into fp32 partials, then a fixed tree), which fills a GPU
 * whatever C is and uses no atomics, so its result does not depend on
 * scheduling; the CPU sums in double, so the two agree to rounding.
 *
 * Speed notes: these kernels are memory-bound.  Each has a 16-byte path
 * (a template flag kVec: every thread moves V = 16 / sizeof(T) adjacent
 * elements with 128-bit loads and stores, common.cuh's load16 / store16)
 * that its launcher takes when the pointers are 16-byte aligned and the
 * row widths and strides multiples of V, and otherwise the one-element
 * scalar path.  The arithmetic per element, and the order of additions in
 * the column sum, are the same in both, so they give the same bits. */
#include "common.cuh"

using namespace st_cuda;

namespace {

const int kThreads = 256;

/* ---- bias ------------------------------------------------------------------ */

/* Stage 1 of the bias gradient's column sum (common.cuh has the scheme):
 * block (chunk, tile) sums rows [chunk * kBiasChunkRows, +kBiasChunkRows)
 * of a tile of 32 * V columns into partial[chunk, :].  Thread (x, y) owns V
 * adjacent columns and walks rows y, y + kBiasRowThreads, ... of the chunk;
 * the kBiasRowThreads results of a column are then added in y order.  V
 * elements are 16 bytes, loaded as one 128-bit word when the caller's
 * layout allows (kVec) and one by one otherwise: the per-column order of
 * additions is the same either way, so the two paths agree bit for bit. */
const int kBiasRowThreads = 8;

template <typename T, bool kVec>
__global__ void bias_partials_kernel(float *partial, const T *dout, int64_t N, int64_t C)
{
    constexpr int V = 16 / sizeof(T), W = 32 * V;
    __shared__ float part[kBiasRowThreads][W + 1];
    const int64_t tile0 = (int64_t)blockIdx.y * W, c0 = tile0 + threadIdx.x * V;
    const int64_t r0 = (int64_t)blockIdx.x * kBiasChunkRows;
    const int64_t r1 = r0 + kBiasChunkRows < N ? r0 + kBiasChunkRows : N;
    float s[V];
    for (int v = 0; v < V; v++)
        s[v] = 0.0f;
    if (c0 < C)
        for (int64_t n = r0 + threadIdx.y; n < r1; n += kBiasRowThreads) {
            const T *row = dout + n * C + c0;
            if (kVec) {
                float q[V];
                load16(row, q);
                for (int v = 0; v < V; v++)
                    s[v] += q[v];
            } else {
                for (int v = 0; v < V; v++)
                    if (c0 + v < C)
                        s[v] += load_f(&row[v]);
            }
        }
    for (int v = 0; v < V; v++)
        part[threadIdx.y][threadIdx.x * V + v] = s[v];
    __syncthreads();
    /* Every thread of the block finishes some of the tile's W columns. */
    for (int j = threadIdx.y * 32 + threadIdx.x; j < W; j += 32 * kBiasRowThreads) {
        if (tile0 + j >= C)
            continue;
        float t = part[0][j];
        for (int y = 1; y < kBiasRowThreads; y++)
            t += part[y][j];
        partial[(int64_t)blockIdx.x * C + tile0 + j] = t;
    }
}

/* ---- activations ----------------------------------------------------------- */

/* The vectorised kernels below (kVec) give each grid-stride item V =
 * vec_width<T, kVec>() consecutive elements of a row (16 bytes, moved by
 * 128-bit accesses; the launcher has checked the layout with common.cuh's
 * aligned16 and widths_vec), the scalar instantiation the original single
 * element.  The per-element arithmetic is written once for both, so the
 * two give the same bits. */

/* Element e over N*F outputs: row n = e / F, column j = e % F; the row's
 * gate is at n*2F + j and its up at n*2F + F + j (F a multiple of V, so an
 * item stays in one row). */
template <typename T, bool kVec>
__global__ void swiglu_forward_kernel(T *out, const T *gate_up, int64_t N, int64_t F)
{
    constexpr int V = vec_width<T, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * F / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i * V, n = e / F, j = e - n * F;
        const T *row = gate_up + n * 2 * F;
        float g[V], u[V], o[V];
        load_vec(&row[j], g);
        load_vec(&row[F + j], u);
        for (int v = 0; v < V; v++)
            o[v] = g[v] / (1.0f + expf(-g[v])) * u[v];
        store_vec(&out[e], o);
    }
}

template <typename T, bool kVec>
__global__ void swiglu_backward_kernel(T *d_gate_up, const T *gate_up, const T *dout,
                                       int64_t N, int64_t F)
{
    constexpr int V = vec_width<T, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * F / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i * V, n = e / F, j = e - n * F;
        const T *row = gate_up + n * 2 * F;
        T *drow = d_gate_up + n * 2 * F;
        float g[V], u[V], d[V], dg[V], du[V];
        load_vec(&row[j], g);
        load_vec(&row[F + j], u);
        load_vec(&dout[e], d);
        for (int v = 0; v < V; v++) {
            const float sig = 1.0f / (1.0f + expf(-g[v]));
            du[v] = d[v] * g[v] * sig;
            dg[v] = d[v] * u[v] * sig * (1.0f + g[v] * (1.0f - sig));
        }
        store_vec(&drow[F + j], du);
        store_vec(&drow[j], dg);
    }
}

/* ---- RoPE ------------------------------------------------------------------ */

/* Double precision like st_rope_tables, so the float tables match the
 * CPU's to the last bit or one ulp (device and host libm may differ). */
__global__ void rope_tables_kernel(float *cos_t, float *sin_t, int64_t T, int64_t hd,
                                    double theta)
{
    const int64_t half = hd / 2;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < T * half;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = k / half, i = k - t * half;
        double inv_freq = pow(theta, -(double)(2 * i) / (double)hd);
        double a = (double)t * inv_freq;
        cos_t[k] = (float)cos(a);
        sin_t[k] = (float)sin(a);
    }
}

/* One item per V rotated pairs (row r, head h, i .. i + V - 1 < hd/2):
 * channels i and i + hd/2 of the head, HF's rotate_half pairing.  The pairs
 * are read and written by the same thread, so the in-place update needs no
 * barrier.  The vector path needs hd/2 and ld multiples of V (x's rows,
 * heads and halves, and the tables' rows, start on 16 bytes). */
template <typename T, bool kVec>
__global__ void rope_apply_kernel(T *x, int64_t ld, int64_t rows, int64_t Tlen,
                                  int64_t n_heads, int64_t hd, const float *cos_t,
                                  const float *sin_t, float sgn)
{
    constexpr int V = vec_width<T, kVec>();
    const int64_t half = hd / 2, per_row = n_heads * half / V;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < rows * per_row;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / per_row, rem = (k - r * per_row) * V;
        const int64_t h = rem / half, i = rem - h * half;
        const int64_t t = r % Tlen;
        T *p = x + r * ld + h * hd;
        float a[V], b[V], c[V], s[V], oa[V], ob[V];
        load_vec(&p[i], a);
        load_vec(&p[i + half], b);
        load_vec(&cos_t[t * half + i], c);
        load_vec(&sin_t[t * half + i], s);
        for (int v = 0; v < V; v++) {
            const float sv = sgn * s[v];
            oa[v] = a[v] * c[v] - b[v] * sv;
            ob[v] = b[v] * c[v] + a[v] * sv;
        }
        store_vec(&p[i], oa);
        store_vec(&p[i + half], ob);
    }
}

/* ---- add ----------------------------------------------------------------- */

template <typename T, bool kVec>
__global__ void add_inplace_kernel(T *y, const T *x, int64_t n)
{
    constexpr int V = vec_width<T, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        float a[V], b[V];
        load_vec(&y[i * V], a);
        load_vec(&x[i * V], b);
        for (int v = 0; v < V; v++)
            a[v] += b[v];
        store_vec(&y[i * V], a);
    }
}

/* ---- host-side launchers, one template per op ------------------------------ */

template <typename T>
cudaError_t bias_backward(float *dbias, const T *dout, int64_t N, int64_t C, void *ws,
                          cudaStream_t s)
{
    if (N <= 0 || C <= 0)
        return launch_status();
    if (!ws)
        return cudaErrorInvalidValue;
    constexpr int V = 16 / sizeof(T);
    float *partial = static_cast<float *>(ws);
    const int64_t R = colsum_chunks(N, kBiasChunkRows);
    const dim3 grid((unsigned)R, (unsigned)((C + 32 * V - 1) / (32 * V)));
    /* 16-byte loads need every row start, hence dout and C * sizeof(T),
     * on a 16-byte boundary. */
    if (aligned16(dout) && widths_vec<T>(C))
        bias_partials_kernel<T, true><<<grid, dim3(32, kBiasRowThreads), 0, s>>>(
            partial, dout, N, C);
    else
        bias_partials_kernel<T, false><<<grid, dim3(32, kBiasRowThreads), 0, s>>>(
            partial, dout, N, C);
    colsum_finish_kernel<0><<<colsum_finish_blocks(C), dim3(32, kFinishRows), 0, s>>>(
        dbias, partial, R, C);
    return launch_status();
}

/* Each launcher takes the 16-byte path (kVec) only when the pointers it
 * passes are 16-byte aligned and the widths that place rows and items are
 * multiples of V (common.cuh); the kernels' comments say which. */
template <typename T>
cudaError_t swiglu_forward(T *out, const T *gu, int64_t N, int64_t F, cudaStream_t s)
{
    const bool vec = aligned16(out, gu) && widths_vec<T>(F);
    if (N * F > 0)
        with_vec_items<T>(vec, N * F, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            swiglu_forward_kernel<T, kVec><<<grid, kThreads, 0, s>>>(out, gu, N, F);
        });
    return launch_status();
}

template <typename T>
cudaError_t swiglu_backward(T *dgu, const T *gu, const T *dout, int64_t N, int64_t F,
                            cudaStream_t s)
{
    const bool vec = aligned16(dgu, gu, dout) && widths_vec<T>(F);
    if (N * F > 0)
        with_vec_items<T>(vec, N * F, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            swiglu_backward_kernel<T, kVec><<<grid, kThreads, 0, s>>>(dgu, gu, dout, N, F);
        });
    return launch_status();
}

template <typename T>
cudaError_t rope_apply(T *x, int64_t ld, int64_t B, int64_t Tlen, int64_t n_heads,
                       int64_t hd, const float *cos_t, const float *sin_t, int inverse,
                       cudaStream_t s)
{
    const int64_t work = B * Tlen * n_heads * (hd / 2);
    const bool vec = aligned16(x, cos_t, sin_t) && widths_vec<T>(ld, hd / 2);
    if (work > 0)
        with_vec_items<T>(vec, work, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            rope_apply_kernel<T, kVec><<<grid, kThreads, 0, s>>>(
                x, ld, B * Tlen, Tlen, n_heads, hd, cos_t, sin_t, inverse ? -1.0f : 1.0f);
        });
    return launch_status();
}

template <typename T>
cudaError_t add_inplace(T *y, const T *x, int64_t n, cudaStream_t s)
{
    const bool vec = aligned16(y, x) && widths_vec<T>(n);
    if (n > 0)
        with_vec_items<T>(vec, n, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            add_inplace_kernel<T, kVec><<<grid, kThreads, 0, s>>>(y, x, n);
        });
    return launch_status();
}

} /* namespace */

/* ---- C entry points ---------------------------------------------------------- */

extern "C" {

size_t st_cuda_bias_backward_workspace_bytes(int64_t N, int64_t C)
{
    return N > 0 && C > 0 ? (size_t)colsum_chunks(N, kBiasChunkRows) * C * sizeof(float) : 0;
}
cudaError_t st_cuda_bias_backward_f32(float *dbias, const float *dout, int64_t N,
                                      int64_t C, void *ws, cudaStream_t s)
{
    return bias_backward(dbias, dout, N, C, ws, s);
}
cudaError_t st_cuda_bias_backward_bf16(float *dbias, const uint16_t *dout, int64_t N,
                                       int64_t C, void *ws, cudaStream_t s)
{
    return bias_backward(dbias, as_bf16(dout), N, C, ws, s);
}

cudaError_t st_cuda_swiglu_forward_f32(float *out, const float *gate_up, int64_t N,
                                       int64_t F, cudaStream_t s)
{
    return swiglu_forward(out, gate_up, N, F, s);
}
cudaError_t st_cuda_swiglu_forward_bf16(uint16_t *out, const uint16_t *gate_up,
                                        int64_t N, int64_t F, cudaStream_t s)
{
    return swiglu_forward(as_bf16(out), as_bf16(gate_up), N, F, s);
}
cudaError_t st_cuda_swiglu_backward_f32(float *d_gate_up, const float *gate_up,
                                        const float *dout, int64_t N, int64_t F,
                                        cudaStream_t s)
{
    return swiglu_backward(d_gate_up, gate_up, dout, N, F, s);
}
cudaError_t st_cuda_swiglu_backward_bf16(uint16_t *d_gate_up, const uint16_t *gate_up,
                                         const uint16_t *dout, int64_t N, int64_t F,
                                         cudaStream_t s)
{
    return swiglu_backward(as_bf16(d_gate_up), as_bf16(gate_up), as_bf16(dout), N, F, s);
}

cudaError_t st_cuda_rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hd,
                                double theta, cudaStream_t s)
{
    int64_t work = T * (hd / 2);
    if (work > 0)
        rope_tables_kernel<<<grid_for(work, kThreads), kThreads, 0, s>>>(cos_t, sin_t, T,
                                                                          hd, theta);
    return launch_status();
}
cudaError_t st_cuda_rope_apply_f32(float *x, int64_t ld, int64_t B, int64_t T,
                                   int64_t n_heads, int64_t hd, const float *cos_t,
                                   const float *sin_t, int inverse, cudaStream_t s)
{
    return rope_apply(x, ld, B, T, n_heads, hd, cos_t, sin_t, inverse, s);
}
cudaError_t st_cuda_rope_apply_bf16(uint16_t *x, int64_t ld, int64_t B, int64_t T,
                                    int64_t n_heads, int64_t hd, const float *cos_t,
                                    const float *sin_t, int inverse, cudaStream_t s)
{
    return rope_apply(as_bf16(x), ld, B, T, n_heads, hd, cos_t, sin_t, inverse, s);
}


cudaError_t st_cuda_add_inplace_f32(float *y, const float *x, int64_t n, cudaStream_t s)
{
    return add_inplace(y, x, n, s);
}
cudaError_t st_cuda_add_inplace_bf16(uint16_t *y, const uint16_t *x, int64_t n,
                                     cudaStream_t s)
{
    return add_inplace(as_bf16(y), as_bf16(x), n, s);
}

} /* extern "C" */
