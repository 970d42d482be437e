/* Elementwise and gather/scatter kernels of the CUDA backend: bias add and
 * its column-sum backward, GELU, SwiGLU, RoPE, the token/position
 * embedding and its backward, add_inplace and the bf16 casts.  Each kernel
 * is the CPU kernel of src/kernels/cpu_ops.c (or src/kernels/cpu_model.c for the embedding)
 * with its loops turned into a grid: one thread per output element, a
 * grid-stride loop so any size works with a bounded grid, fp32 arithmetic
 * whatever the storage type.  The column sums (bias and embedding
 * backward) walk rows in the CPU's order in one thread per output element,
 * so in fp32 mode they reproduce the CPU's float sums bit for bit (the CPU
 * bias sum is in double, so there they agree to rounding).
 *
 * Speed notes: these kernels are memory-bound and written for obvious
 * correctness; the cheap next steps are 16-byte vector loads for bf16 and a
 * two-stage column sum when C / 32 blocks do not fill the GPU. */
#include "common.cuh"

using namespace st_cuda;

namespace {

const int kThreads = 256;

/* ---- bias ------------------------------------------------------------------ */

template <typename T>
__global__ void add_bias_kernel(T *out, const T *bias, int64_t N, int64_t C)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * C;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f(&out[i], load_f(&out[i]) + load_f(&bias[i % C]));
}

/* Column sums: a block of 32 x kColRows threads owns 32 adjacent columns
 * (coalesced reads of each row's 32 entries); thread row y sums rows
 * y, y + kColRows, ... and the kColRows partials are then added in a fixed
 * order.  Deterministic; agrees with the CPU's double sum to fp32
 * rounding. */
const int kColRows = 16;

template <typename T>
__global__ void bias_backward_kernel(float *dbias, const T *dout, int64_t N, int64_t C)
{
    __shared__ float part[kColRows][33];
    const int64_t c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < C)
        for (int64_t n = threadIdx.y; n < N; n += kColRows)
            s += load_f(&dout[n * C + c]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.0f;
        for (int y = 0; y < kColRows; y++)
            t += part[y][threadIdx.x];
        dbias[c] += t;
    }
}

/* ---- activations ----------------------------------------------------------- */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

template <typename T>
__global__ void gelu_forward_kernel(T *out, const T *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = load_f(&x[i]);
        float u = GELU_K * (v + 0.044715f * v * v * v);
        store_f(&out[i], 0.5f * v * (1.0f + tanhf(u)));
    }
}

template <typename T>
__global__ void gelu_backward_kernel(T *dx, const T *x, const T *dout, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = load_f(&x[i]);
        float u = GELU_K * (v + 0.044715f * v * v * v);
        float t = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        store_f(&dx[i], g * load_f(&dout[i]));
    }
}

/* Index i over N*F outputs: row n = i / F, column j = i % F; the row's
 * gate is at n*2F + j and its up at n*2F + F + j. */
template <typename T>
__global__ void swiglu_forward_kernel(T *out, const T *gate_up, int64_t N, int64_t F)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * F;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / F, j = i - n * F;
        const T *row = gate_up + n * 2 * F;
        float g = load_f(&row[j]), u = load_f(&row[F + j]);
        store_f(&out[i], g / (1.0f + expf(-g)) * u);
    }
}

template <typename T>
__global__ void swiglu_backward_kernel(T *d_gate_up, const T *gate_up, const T *dout,
                                       int64_t N, int64_t F)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * F;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / F, j = i - n * F;
        const T *row = gate_up + n * 2 * F;
        T *drow = d_gate_up + n * 2 * F;
        float g = load_f(&row[j]), u = load_f(&row[F + j]), d = load_f(&dout[i]);
        float sig = 1.0f / (1.0f + expf(-g));
        store_f(&drow[F + j], d * g * sig);
        store_f(&drow[j], d * u * sig * (1.0f + g * (1.0f - sig)));
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

/* One thread per rotated pair (row r, head h, i < hd/2): channels i and
 * i + hd/2 of the head, HF's rotate_half pairing.  The pair is read and
 * written by the same thread, so the in-place update needs no barrier. */
template <typename T>
__global__ void rope_apply_kernel(T *x, int64_t ld, int64_t rows, int64_t Tlen,
                                  int64_t n_heads, int64_t hd, const float *cos_t,
                                  const float *sin_t, float sgn)
{
    const int64_t half = hd / 2, per_row = n_heads * half;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < rows * per_row;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = k / per_row, rem = k - r * per_row;
        int64_t h = rem / half, i = rem - h * half;
        int64_t t = r % Tlen;
        T *v = x + r * ld + h * hd;
        float a = load_f(&v[i]), b = load_f(&v[i + half]);
        float c = cos_t[t * half + i], s = sgn * sin_t[t * half + i];
        store_f(&v[i], a * c - b * s);
        store_f(&v[i + half], b * c + a * s);
    }
}

/* ---- embedding ------------------------------------------------------------- */

template <typename T>
__global__ void embed_forward_kernel(T *out, const T *wte, const T *wpe,
                                     const int32_t *tokens, int64_t rows, int64_t Tlen,
                                     int64_t C)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < rows * C;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = k / C, c = k - r * C;
        float e = load_f(&wte[(int64_t)tokens[r] * C + c]);
        if (wpe)
            e += load_f(&wpe[(r % Tlen) * C + c]);
        store_f(&out[k], e);
    }
}

/* Token-embedding scatter-add, deterministic by ownership rather than by
 * atomics: thread c owns column c of the whole dwte table and walks the
 * rows in order, exactly the CPU's loop, so a token seen twice adds in the
 * same order every run and fp32 results equal the CPU's bit for bit.  No
 * two threads ever write the same element, so no atomics are needed; the
 * price is only C-way parallelism with B*T sequential steps each (a
 * sort-by-token + segmented sum is the faster deterministic design, left
 * for when profiles say it matters). */
template <typename T>
__global__ void embed_backward_wte_kernel(float *dwte, const int32_t *tokens,
                                          const T *dout, int64_t rows, int64_t C)
{
    const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int64_t r = 0; r < rows; r++)
        dwte[(int64_t)tokens[r] * C + c] += load_f(&dout[r * C + c]);
}

/* Position table: element (t, c) receives rows b*T + t for b = 0..B-1, in
 * that order (the CPU's row order), so one thread per element, no race. */
template <typename T>
__global__ void embed_backward_wpe_kernel(float *dwpe, const T *dout, int64_t B,
                                          int64_t Tlen, int64_t C)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < Tlen * C;
         k += (int64_t)gridDim.x * blockDim.x) {
        float acc = dwpe[k];
        for (int64_t b = 0; b < B; b++)
            acc += load_f(&dout[b * Tlen * C + k]);
        dwpe[k] = acc;
    }
}

/* ---- add, casts ------------------------------------------------------------ */

template <typename T>
__global__ void add_inplace_kernel(T *y, const T *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_f(&y[i], load_f(&y[i]) + load_f(&x[i]));
}

/* The CPU's bf16_bits, verbatim in integer arithmetic, so the casts are
 * bit-identical to st_pack_bf16 including inf and NaN. */
__device__ __forceinline__ uint16_t bf16_bits(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__global__ void round_bf16_kernel(float *dst, const float *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)bf16_bits(src[i]) << 16);
}

__global__ void pack_bf16_kernel(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = bf16_bits(src[i]);
}

__global__ void unpack_bf16_kernel(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

/* ---- host-side launchers, one template per op ------------------------------ */

template <typename T>
cudaError_t add_bias(T *out, const T *bias, int64_t N, int64_t C, cudaStream_t s)
{
    if (N * C > 0)
        add_bias_kernel<T><<<grid_for(N * C, kThreads), kThreads, 0, s>>>(out, bias, N, C);
    return launch_status();
}

template <typename T>
cudaError_t bias_backward(float *dbias, const T *dout, int64_t N, int64_t C, cudaStream_t s)
{
    if (C > 0)
        bias_backward_kernel<T><<<(unsigned)((C + 31) / 32), dim3(32, kColRows), 0, s>>>(
            dbias, dout, N, C);
    return launch_status();
}

template <typename T>
cudaError_t gelu_forward(T *out, const T *x, int64_t n, cudaStream_t s)
{
    if (n > 0)
        gelu_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, s>>>(out, x, n);
    return launch_status();
}

template <typename T>
cudaError_t gelu_backward(T *dx, const T *x, const T *dout, int64_t n, cudaStream_t s)
{
    if (n > 0)
        gelu_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, s>>>(dx, x, dout, n);
    return launch_status();
}

template <typename T>
cudaError_t swiglu_forward(T *out, const T *gu, int64_t N, int64_t F, cudaStream_t s)
{
    if (N * F > 0)
        swiglu_forward_kernel<T><<<grid_for(N * F, kThreads), kThreads, 0, s>>>(out, gu, N, F);
    return launch_status();
}

template <typename T>
cudaError_t swiglu_backward(T *dgu, const T *gu, const T *dout, int64_t N, int64_t F,
                            cudaStream_t s)
{
    if (N * F > 0)
        swiglu_backward_kernel<T><<<grid_for(N * F, kThreads), kThreads, 0, s>>>(
            dgu, gu, dout, N, F);
    return launch_status();
}

template <typename T>
cudaError_t rope_apply(T *x, int64_t ld, int64_t B, int64_t Tlen, int64_t n_heads,
                       int64_t hd, const float *cos_t, const float *sin_t, int inverse,
                       cudaStream_t s)
{
    int64_t work = B * Tlen * n_heads * (hd / 2);
    if (work > 0)
        rope_apply_kernel<T><<<grid_for(work, kThreads), kThreads, 0, s>>>(
            x, ld, B * Tlen, Tlen, n_heads, hd, cos_t, sin_t, inverse ? -1.0f : 1.0f);
    return launch_status();
}

template <typename T>
cudaError_t embed_forward(T *out, const T *wte, const T *wpe, const int32_t *tokens,
                          int64_t B, int64_t Tlen, int64_t C, cudaStream_t s)
{
    int64_t work = B * Tlen * C;
    if (work > 0)
        embed_forward_kernel<T><<<grid_for(work, kThreads), kThreads, 0, s>>>(
            out, wte, wpe, tokens, B * Tlen, Tlen, C);
    return launch_status();
}

template <typename T>
cudaError_t embed_backward(float *dwte, float *dwpe, const int32_t *tokens, const T *dout,
                           int64_t B, int64_t Tlen, int64_t C, cudaStream_t s)
{
    if (B * Tlen * C <= 0)
        return launch_status();
    /* 64-thread blocks: C is only 768..8192, so small blocks spread the
     * columns over more multiprocessors. */
    embed_backward_wte_kernel<T><<<(unsigned)((C + 63) / 64), 64, 0, s>>>(
        dwte, tokens, dout, B * Tlen, C);
    if (dwpe)
        embed_backward_wpe_kernel<T><<<grid_for(Tlen * C, kThreads), kThreads, 0, s>>>(
            dwpe, dout, B, Tlen, C);
    return launch_status();
}

template <typename T>
cudaError_t add_inplace(T *y, const T *x, int64_t n, cudaStream_t s)
{
    if (n > 0)
        add_inplace_kernel<T><<<grid_for(n, kThreads), kThreads, 0, s>>>(y, x, n);
    return launch_status();
}

} /* namespace */

/* ---- C entry points ---------------------------------------------------------- */

extern "C" {

cudaError_t st_cuda_add_bias_f32(float *out, const float *bias, int64_t N, int64_t C,
                                 cudaStream_t s)
{
    return add_bias(out, bias, N, C, s);
}
cudaError_t st_cuda_add_bias_bf16(uint16_t *out, const uint16_t *bias, int64_t N,
                                  int64_t C, cudaStream_t s)
{
    return add_bias(as_bf16(out), as_bf16(bias), N, C, s);
}
cudaError_t st_cuda_bias_backward_f32(float *dbias, const float *dout, int64_t N,
                                      int64_t C, cudaStream_t s)
{
    return bias_backward(dbias, dout, N, C, s);
}
cudaError_t st_cuda_bias_backward_bf16(float *dbias, const uint16_t *dout, int64_t N,
                                       int64_t C, cudaStream_t s)
{
    return bias_backward(dbias, as_bf16(dout), N, C, s);
}

cudaError_t st_cuda_gelu_forward_f32(float *out, const float *x, int64_t n, cudaStream_t s)
{
    return gelu_forward(out, x, n, s);
}
cudaError_t st_cuda_gelu_forward_bf16(uint16_t *out, const uint16_t *x, int64_t n,
                                      cudaStream_t s)
{
    return gelu_forward(as_bf16(out), as_bf16(x), n, s);
}
cudaError_t st_cuda_gelu_backward_f32(float *dx, const float *x, const float *dout,
                                      int64_t n, cudaStream_t s)
{
    return gelu_backward(dx, x, dout, n, s);
}
cudaError_t st_cuda_gelu_backward_bf16(uint16_t *dx, const uint16_t *x,
                                       const uint16_t *dout, int64_t n, cudaStream_t s)
{
    return gelu_backward(as_bf16(dx), as_bf16(x), as_bf16(dout), n, s);
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

cudaError_t st_cuda_embed_forward_f32(float *out, const float *wte, const float *wpe,
                                      const int32_t *tokens, int64_t B, int64_t T,
                                      int64_t C, cudaStream_t s)
{
    return embed_forward(out, wte, wpe, tokens, B, T, C, s);
}
cudaError_t st_cuda_embed_forward_bf16(uint16_t *out, const uint16_t *wte,
                                       const uint16_t *wpe, const int32_t *tokens,
                                       int64_t B, int64_t T, int64_t C, cudaStream_t s)
{
    return embed_forward(as_bf16(out), as_bf16(wte), as_bf16(wpe), tokens, B, T, C, s);
}
cudaError_t st_cuda_embed_backward_f32(float *dwte, float *dwpe, const int32_t *tokens,
                                       const float *dout, int64_t B, int64_t T,
                                       int64_t C, cudaStream_t s)
{
    return embed_backward(dwte, dwpe, tokens, dout, B, T, C, s);
}
cudaError_t st_cuda_embed_backward_bf16(float *dwte, float *dwpe, const int32_t *tokens,
                                        const uint16_t *dout, int64_t B, int64_t T,
                                        int64_t C, cudaStream_t s)
{
    return embed_backward(dwte, dwpe, tokens, as_bf16(dout), B, T, C, s);
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

cudaError_t st_cuda_round_bf16(float *dst, const float *src, int64_t n, cudaStream_t s)
{
    if (n > 0)
        round_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst, src, n);
    return launch_status();
}
cudaError_t st_cuda_pack_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s)
{
    if (n > 0)
        pack_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst, src, n);
    return launch_status();
}
cudaError_t st_cuda_unpack_bf16(float *dst, const uint16_t *src, int64_t n,
                                cudaStream_t s)
{
    if (n > 0)
        unpack_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst, src, n);
    return launch_status();
}

} /* extern "C" */
