/* Reductions the engine needs over whole shards (see ops.h): the sum of
 * squares behind the gradient norm.  Deterministic by construction: a fixed
 * grid (ST_CUDA_SUMSQ_PARTIALS blocks, whatever n is) writes one partial
 * per block, each summed by a fixed tree over a fixed thread-to-element
 * map, and one block then sums the partials in a fixed tree; no atomics, so
 * the norm, and every clipped update after it, is the same from run to
 * run.  Accumulation is in double throughout, like the CPU's, which sums
 * in element order: the two agree to rounding, not bit for bit.  The first
 * pass reads 16 bytes at a time where x is aligned (cuda/README, "16-byte
 * paths"), with the same sums as its scalar path. */
#include "common.cuh"

using namespace st_cuda;

namespace {

constexpr int kSumsqThreads = 256;

/* In-place tree sum of buf[0..kSumsqThreads) into buf[0]. */
__device__ void block_tree_sum(double *buf)
{
    for (int half = kSumsqThreads / 2; half > 0; half >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < half)
            buf[threadIdx.x] += buf[threadIdx.x + half];
    }
    __syncthreads();
}

/* Thread t of the grid takes groups of 4 adjacent elements, g = t, t +
 * threads, ...; the vector path (x 16-byte aligned) reads a whole group in
 * one 128-bit load, the scalar path element by element, and both add the
 * four squares in element order, the missing elements of a short last
 * group as zeros: the same sums, so the same bits, from either path.  One
 * 4-byte load per thread in flight was too few to keep the memory bus
 * busy over a shard of 10^8 elements. */
template <bool kVec>
__global__ void sumsq_partials_kernel(const float *x, int64_t n, double *partials)
{
    __shared__ double buf[kSumsqThreads];
    double s = 0.0;
    const int64_t groups = (n + 3) / 4;
    for (int64_t g = blockIdx.x * (int64_t)kSumsqThreads + threadIdx.x; g < groups;
         g += (int64_t)gridDim.x * kSumsqThreads) {
        const int64_t i = 4 * g;
        float v[4];
        if (kVec && i + 4 <= n) {
            load16(x + i, v);
        } else {
            for (int k = 0; k < 4; k++)
                v[k] = i + k < n ? x[i + k] : 0.0f;
        }
        for (int k = 0; k < 4; k++)
            s += (double)v[k] * v[k];
    }
    buf[threadIdx.x] = s;
    block_tree_sum(buf);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = buf[0];
}

__global__ void sumsq_finish_kernel(const double *partials, double *acc)
{
    __shared__ double buf[kSumsqThreads];
    double s = 0.0;
    for (int i = threadIdx.x; i < ST_CUDA_SUMSQ_PARTIALS; i += kSumsqThreads)
        s += partials[i];
    buf[threadIdx.x] = s;
    block_tree_sum(buf);
    if (threadIdx.x == 0)
        *acc += buf[0];
}

} // namespace

extern "C" cudaError_t st_cuda_sumsq(const float *x, int64_t n, double *acc,
                                     double *partials, cudaStream_t s)
{
    if (n <= 0)
        return cudaSuccess;
    with_vec(aligned16(x), [&](auto tag) {
        constexpr bool kVec = decltype(tag)::value;
        sumsq_partials_kernel<kVec><<<ST_CUDA_SUMSQ_PARTIALS, kSumsqThreads, 0, s>>>(x, n, partials);
    });
    sumsq_finish_kernel<<<1, kSumsqThreads, 0, s>>>(partials, acc);
    return launch_status();
}
