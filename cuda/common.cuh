/* Shared device helpers of the CUDA kernels in this directory: the two
 * storage types behind one load/store interface (so each kernel is written
 * once as a template and accumulates in fp32 whatever it reads), the
 * 16-byte vector accesses and the host-side test of when a layout allows
 * them, launch geometry, and the warp/block reductions.  Internal to cuda/; the public
 * C interface is ops.h. */
#ifndef ST_CUDA_COMMON_CUH
#define ST_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <string.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "dynamic_smem.cuh"
#include "ops.h"

namespace st_cuda {

typedef __nv_bfloat16 bf16;

/* Storage element -> fp32 and back.  The bf16 store rounds to nearest even
 * like st_round_bf16 (for finite values __float2bfloat16_rn and the CPU's
 * integer trick agree; NaN payloads may differ, which no kernel relies on). */
__device__ __forceinline__ float load_f(const float *p) { return *p; }
__device__ __forceinline__ float load_f(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_f(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* fp32 -> bf16 bits as the CPU's bf16_bits (base/dtype.h), verbatim in
 * integer arithmetic: finite values round to nearest even, inf and NaN
 * are truncated.  The casts (casts.cu) and AdamW's bf16 copy use it, so
 * they are bit-identical to st_pack_bf16 whatever the input. */
__device__ __forceinline__ uint16_t bf16_bits(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The C API passes bf16 buffers as uint16_t words; same bits. */
__host__ __device__ __forceinline__ bf16 *as_bf16(uint16_t *p)
{
    return reinterpret_cast<bf16 *>(p);
}
__host__ __device__ __forceinline__ const bf16 *as_bf16(const uint16_t *p)
{
    return reinterpret_cast<const bf16 *>(p);
}

/* Grid size for a grid-stride loop over n items: enough blocks to fill any
 * current GPU several times over, capped so the count fits in an int. */
static inline unsigned grid_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535 * 8)
        b = 65535 * 8;
    return (unsigned)(b > 0 ? b : 1);
}

static inline cudaError_t launch_status(void) { return cudaGetLastError(); }


/* ---- 16-byte accesses -----------------------------------------------------
 * A 128-bit load or store moves 16 bytes, V = 16 / sizeof(T) elements (4
 * fp32 or 8 bf16), in one instruction, which the memory-bound kernels need
 * to approach the bandwidth in bf16.  The GPU faults on a 128-bit access
 * that is not 16-byte aligned, so a launcher takes such a kernel's vector
 * path only when vec_layout_ok says that every pointer it hands the kernel
 * is 16-byte aligned and every row width and row stride is a multiple of
 * V; otherwise the same kernel runs with one element per access.  The x86
 * host emulation (tests/gpu/emu/shim.h) would not fault, so it defines
 * ST_CUDA_CHECK_ALIGN16 to abort on a misaligned address: a launcher that
 * chooses the vector path wrongly fails its test there.  For nvcc the check
 * is empty. */
#ifndef ST_CUDA_CHECK_ALIGN16
#define ST_CUDA_CHECK_ALIGN16(p) ((void)0)
#endif

/* Host side: all pointers 16-byte aligned (a null pointer, an absent
 * operand, passes) and all widths multiples of V = 16 / sizeof(T). */
static inline bool aligned16() { return true; }
template <typename P, typename... Ps>
static inline bool aligned16(const P *p, const Ps *...rest)
{
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && aligned16(rest...);
}
template <typename T> static inline bool widths_vec() { return true; }
template <typename T, typename... Ws> static inline bool widths_vec(int64_t w, Ws... rest)
{
    return w % (int64_t)(16 / sizeof(T)) == 0 && widths_vec<T>(rest...);
}

/* Elements per access of a kernel's vector (kVec) or scalar path. */
template <typename T, bool kVec> __host__ __device__ constexpr int vec_width()
{
    return kVec ? 16 / sizeof(T) : 1;
}

/* Runs f(vec_tag<true>()) when vec, else f(vec_tag<false>()): a launcher
 * writes its launch once, with the kernel's kVec template argument taken
 * from the tag's type. */
template <bool b> struct vec_tag {
    static constexpr bool value = b;
};
template <typename F> static inline void with_vec(bool vec, F f)
{
    if (vec)
        f(vec_tag<true>());
    else
        f(vec_tag<false>());
}

/* 8 bf16 words (or any 16 bytes of them) stored as one 128-bit word. */
__device__ __forceinline__ void store16_bits(uint16_t *p, const uint16_t (&h)[8])
{
    ST_CUDA_CHECK_ALIGN16(p);
    uint4 q;
    memcpy(&q, h, sizeof q);
    *reinterpret_cast<uint4 *>(p) = q;
}

/* with_vec for a grid-stride launch over n elements of T: f(tag, grid),
 * the grid sized by grid_for for the n / V items of the path taken. */
template <typename T, typename F>
static inline void with_vec_items(bool vec, int64_t n, int threads, F f)
{
    if (vec)
        f(vec_tag<true>(), grid_for(n / vec_width<T, true>(), threads));
    else
        f(vec_tag<false>(), grid_for(n, threads));
}

/* 16 bytes of storage elements as fp32, in one 128-bit access: p must be
 * 16-byte aligned (the callers check their layout before choosing this
 * path).  bf16 -> fp32 is exact: the word is the top half of the float;
 * fp32 -> bf16 rounds as store_f does. */
__device__ __forceinline__ void load16(const float *p, float (&v)[4])
{
    ST_CUDA_CHECK_ALIGN16(p);
    const float4 q = *reinterpret_cast<const float4 *>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load16(const bf16 *p, float (&v)[8])
{
    ST_CUDA_CHECK_ALIGN16(p);
    const uint4 q = *reinterpret_cast<const uint4 *>(p);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}
__device__ __forceinline__ void store16(float *p, const float (&v)[4])
{
    ST_CUDA_CHECK_ALIGN16(p);
    float4 q;
    q.x = v[0], q.y = v[1], q.z = v[2], q.w = v[3];
    *reinterpret_cast<float4 *>(p) = q;
}
__device__ __forceinline__ void store16(bf16 *p, const float (&v)[8])
{
    bf16 h[8];
    uint16_t w[8];
    for (int i = 0; i < 8; i++)
        store_f(&h[i], v[i]);
    memcpy(w, h, sizeof w);
    store16_bits(reinterpret_cast<uint16_t *>(p), w);
}

/* V consecutive elements at p as fp32: one access per element when V is 1
 * (the scalar path: load_f / store_f, as before the vector paths), else
 * V * sizeof(T) / 16 128-bit accesses (p 16-byte aligned).  The values,
 * hence every result computed from them, are the same either way. */
template <int V, typename T>
__device__ __forceinline__ void load_vec(const T *p, float (&v)[V])
{
    if constexpr (V == 1) {
        v[0] = load_f(p);
    } else {
        constexpr int W = 16 / sizeof(T);
        static_assert(V % W == 0, "a whole number of 16-byte words");
        for (int k = 0; k < V / W; k++)
            load16(p + k * W, *reinterpret_cast<float(*)[W]>(&v[k * W]));
    }
}
template <int V, typename T>
__device__ __forceinline__ void store_vec(T *p, const float (&v)[V])
{
    if constexpr (V == 1) {
        store_f(p, v[0]);
    } else {
        constexpr int W = 16 / sizeof(T);
        static_assert(V % W == 0, "a whole number of 16-byte words");
        for (int k = 0; k < V / W; k++)
            store16(p + k * W, *reinterpret_cast<const float(*)[W]>(&v[k * W]));
    }
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the whole block (blockDim.x a multiple of 32, at most 1024);
 * every thread gets the result.  Fixed shuffle tree, so deterministic.
 * scratch must hold 32 floats; the leading barrier makes back-to-back
 * calls with the same scratch safe. */
__device__ __forceinline__ float block_sum(float v, float *scratch)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

/* ---- deterministic column sums (bias and norm parameter gradients) -------
 * Two stages, no atomics.  Stage 1 (elementwise.cu's bias kernel, norms.cu's
 * fused backward) cuts the N rows into chunks of a fixed row count and
 * writes one fp32 partial row per chunk, [ceil(N / rows_per_chunk), C], each
 * summed in an order fixed by the chunk's rows and the thread that owns the
 * column.  Stage 2 below adds the partials of each column in a fixed tree
 * and accumulates into the output.  The tree depends on N and C only, never
 * on scheduling, so the result is bit-identical from run to run. */
const int kBiasChunkRows = 64; /* bias: few flops per byte, long chunks */
const int kNormChunkRows = 16; /* norms: a block per chunk, so short ones */
const int kFinishRows = 8;     /* stage 2: thread rows per column */

__host__ __device__ inline int64_t colsum_chunks(int64_t N, int rows_per_chunk)
{
    return (N + rows_per_chunk - 1) / rows_per_chunk;
}

/* out[c] += sum_r partial[r * C + c] for r < R.  A block of 32 x kFinishRows
 * threads owns 32 columns; thread row y sums chunks y, y + kFinishRows, ...
 * in order, then thread row 0 adds the kFinishRows results in order.  A
 * template only so that translation units that do not launch it do not
 * instantiate it. */
template <int kDummy = 0>
__global__ void colsum_finish_kernel(float *out, const float *partial, int64_t R,
                                     int64_t C)
{
    __shared__ float part[kFinishRows][33];
    const int64_t c = blockIdx.x * (int64_t)32 + threadIdx.x;
    float s = 0.0f;
    if (c < C)
        for (int64_t r = threadIdx.y; r < R; r += kFinishRows)
            s += partial[r * C + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = part[0][threadIdx.x];
        for (int y = 1; y < kFinishRows; y++)
            t += part[y][threadIdx.x];
        out[c] += t;
    }
}

static inline unsigned colsum_finish_blocks(int64_t C) { return (unsigned)((C + 31) / 32); }

} /* namespace st_cuda */

#endif
