/* Shared device helpers of the CUDA kernels in this directory: the two
 * storage types behind one load/store interface (so each kernel is written
 * once as a template and accumulates in fp32 whatever it reads), launch
 * geometry, and the warp/block reductions.  Internal to cuda/; the public
 * C interface is ops.h. */
#ifndef ST_CUDA_COMMON_CUH
#define ST_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <string.h>
#include <cuda_runtime.h>
#include <stdint.h>

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

/* 16 bytes of storage elements as fp32, in one 128-bit access: p must be
 * 16-byte aligned (the callers check their layout before choosing this
 * path).  bf16 -> fp32 is exact: the word is the top half of the float;
 * fp32 -> bf16 rounds as store_f does. */
__device__ __forceinline__ void load16(const float *p, float (&v)[4])
{
    const float4 q = *reinterpret_cast<const float4 *>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load16(const bf16 *p, float (&v)[8])
{
    const uint4 q = *reinterpret_cast<const uint4 *>(p);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}
__device__ __forceinline__ void store16(float *p, const float (&v)[4])
{
    float4 q;
    q.x = v[0], q.y = v[1], q.z = v[2], q.w = v[3];
    *reinterpret_cast<float4 *>(p) = q;
}
__device__ __forceinline__ void store16(bf16 *p, const float (&v)[8])
{
    bf16 h[8];
    for (int i = 0; i < 8; i++)
        store_f(&h[i], v[i]);
    uint4 q;
    memcpy(&q, h, sizeof q);
    *reinterpret_cast<uint4 *>(p) = q;
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
