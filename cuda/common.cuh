/* Shared device helpers of the CUDA kernels in this directory: the two
 * storage types behind one load/store interface (so each kernel is written
 * once as a template and accumulates in fp32 whatever it reads), launch
 * geometry, and the warp/block reductions.  Internal to cuda/; the public
 * C interface is ops.h. */
#ifndef ST_CUDA_COMMON_CUH
#define ST_CUDA_COMMON_CUH

#include <cuda_bf16.h>
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

} /* namespace st_cuda */

#endif
