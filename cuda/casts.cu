/* The bf16 casts of the CUDA backend: round_bf16 (fp32 rounded to bf16
 * precision, kept in fp32), pack_bf16 (fp32 -> bf16 words), unpack_bf16
 * and unpack_bf16_rows (bf16 words -> fp32, the latter between strided
 * rows).  Each is bit-identical to base/dtype.h's st_round_bf16 /
 * st_pack_bf16 / st_unpack_bf16, NaN and inf included: the rounding is the
 * CPU's integer arithmetic, not the hardware conversion.  One grid-stride
 * item per element, or, when the launcher finds the pointers 16-byte
 * aligned and the lengths, widths and strides multiples of the vector
 * (common.cuh's aligned16 / widths_vec), per 16 bytes of bf16 or fp32 moved
 * by 128-bit loads and stores: these kernels only move memory, so that is
 * their speed.  Split from elementwise.cu, which was growing past a
 * readable length. */
#include "common.cuh"

using namespace st_cuda;

namespace {

const int kThreads = 256;

/* The casts' vector items are 8 elements (16 bytes of bf16, 32 of fp32)
 * for pack / unpack and 4 for round_bf16.  unpack's fp32 values are the
 * bf16 words shifted up, in both paths (load16 does the same shift). */
template <int V> __device__ __forceinline__ void unpack_item(const uint16_t *p, float (&v)[V])
{
    if constexpr (V == 1)
        v[0] = __uint_as_float((uint32_t)*p << 16);
    else
        load_vec(as_bf16(p), v);
}
template <bool kVec>
__global__ void round_bf16_kernel(float *dst, const float *src, int64_t n)
{
    constexpr int V = vec_width<float, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v[V];
        load_vec(&src[i * V], v);
        for (int k = 0; k < V; k++)
            v[k] = __uint_as_float((uint32_t)bf16_bits(v[k]) << 16);
        store_vec(&dst[i * V], v);
    }
}

template <bool kVec>
__global__ void pack_bf16_kernel(uint16_t *dst, const float *src, int64_t n)
{
    constexpr int V = vec_width<bf16, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v[V];
        uint16_t h[V];
        load_vec(&src[i * V], v);
        for (int k = 0; k < V; k++)
            h[k] = bf16_bits(v[k]);
        if constexpr (kVec)
            store16_bits(&dst[i * V], h);
        else
            dst[i] = h[0];
    }
}

template <bool kVec>
__global__ void unpack_bf16_kernel(float *dst, const uint16_t *src, int64_t n)
{
    constexpr int V = vec_width<bf16, kVec>();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n / V;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v[V];
        unpack_item(&src[i * V], v);
        store_vec(&dst[i * V], v);
    }
}

template <bool kVec>
__global__ void unpack_bf16_rows_kernel(float *dst, int64_t ldd, const uint16_t *src,
                                        int64_t lds, int64_t rows, int64_t cols)
{
    constexpr int V = vec_width<bf16, kVec>();
    const int64_t n = rows * cols / V;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i * V / cols, c = i * V - r * cols;
        float v[V];
        unpack_item(&src[r * lds + c], v);
        store_vec(&dst[r * ldd + c], v);
    }
}

} /* namespace */

extern "C" {

cudaError_t st_cuda_round_bf16(float *dst, const float *src, int64_t n, cudaStream_t s)
{
    const bool vec = aligned16(dst, src) && widths_vec<float>(n);
    if (n > 0)
        with_vec_items<float>(vec, n, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            round_bf16_kernel<kVec><<<grid, kThreads, 0, s>>>(dst, src, n);
        });
    return launch_status();
}
cudaError_t st_cuda_pack_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s)
{
    const bool vec = aligned16(dst, src) && widths_vec<bf16>(n);
    if (n > 0)
        with_vec_items<bf16>(vec, n, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            pack_bf16_kernel<kVec><<<grid, kThreads, 0, s>>>(dst, src, n);
        });
    return launch_status();
}
cudaError_t st_cuda_unpack_bf16(float *dst, const uint16_t *src, int64_t n,
                                cudaStream_t s)
{
    const bool vec = aligned16(dst, src) && widths_vec<bf16>(n);
    if (n > 0)
        with_vec_items<bf16>(vec, n, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            unpack_bf16_kernel<kVec><<<grid, kThreads, 0, s>>>(dst, src, n);
        });
    return launch_status();
}
cudaError_t st_cuda_unpack_bf16_rows(float *dst, int64_t ldd, const uint16_t *src,
                                     int64_t lds, int64_t rows, int64_t cols,
                                     cudaStream_t s)
{
    if (ldd < cols || lds < cols)
        return cudaErrorInvalidValue;
    /* fp32 rows of ldd need ldd a multiple of 4, bf16 rows of lds and the
     * 8-element items a multiple of 8. */
    const bool vec =
        aligned16(dst, src) && widths_vec<bf16>(cols, lds) && widths_vec<float>(ldd);
    if (rows > 0 && cols > 0)
        with_vec_items<bf16>(vec, rows * cols, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            unpack_bf16_rows_kernel<kVec><<<grid, kThreads, 0, s>>>(dst, ldd, src, lds, rows,
                                                                    cols);
        });
    return launch_status();
}

} /* extern "C" */
