/* Reductions the engine needs over whole shards (see ops.h): the sum of
 * squares behind the gradient norm.  Deterministic by construction: a fixed
 * grid (ST_CUDA_SUMSQ_PARTIALS blocks, whatever n is) writes one partial
 * per block, each summed by a fixed tree over a fixed thread-to-element
 * map, and one block then sums the partials in a fixed tree; no atomics, so
 * the norm, and every clipped update after it, is the same from run to
 * run.  Accumulation is in double throughout, like the CPU's, which sums
 * in element order: the two agree to rounding, not bit for bit. */
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

__global__ void sumsq_partials_kernel(const float *x, int64_t n, double *partials)
{
    __shared__ double buf[kSumsqThreads];
    double s = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)kSumsqThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kSumsqThreads) {
        double v = (double)x[i];
        s += v * v;
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
    sumsq_partials_kernel<<<ST_CUDA_SUMSQ_PARTIALS, kSumsqThreads, 0, s>>>(x, n, partials);
    sumsq_finish_kernel<<<1, kSumsqThreads, 0, s>>>(partials, acc);
    return launch_status();
}
