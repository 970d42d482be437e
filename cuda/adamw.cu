/* Fused AdamW over a flat fp32 shard for the CUDA backend: the moment
 * updates, bias correction, decoupled weight decay and parameter update of
 * st_adamw (src/kernels/cpu_adamw.c) in one pass over p, g, m, v, plus an optional bf16
 * copy of the new parameters for the forward pass.  The shard is whatever
 * contiguous slice a rank owns, so the kernel is a plain elementwise loop.
 *
 * Every operation is written with explicit round-to-nearest intrinsics in
 * the CPU's order and precision (fp32 moments, fp64 update), because nvcc
 * otherwise fuses a*b + c into one FMA with a single rounding while the
 * CPU build (ISO C, no -ffp-contract) rounds twice: with the intrinsics the
 * update should match st_adamw bit for bit. */
#include "common.cuh"

#include <math.h>

using namespace st_cuda;

namespace {

const int kThreads = 256;

__device__ __forceinline__ uint16_t bf16_bits(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* c1, c2: the bias corrections 1 - beta^t, computed once on the host with
 * the same pow() as the CPU. */
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, int64_t n,
                             double lr, float b1, float b2, double c1, double c2,
                             double eps, double weight_decay, double grad_scale,
                             uint16_t *p_bf16)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float gi = (float)__dmul_rn((double)g[i], grad_scale);
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, gi));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        double mhat = (double)mi / c1, vhat = (double)vi / c2;
        double pi = p[i];
        double step = __dadd_rn(mhat / __dadd_rn(sqrt(vhat), eps),
                                __dmul_rn(weight_decay, pi));
        float pn = (float)__dadd_rn(pi, -__dmul_rn(lr, step));
        p[i] = pn;
        if (p_bf16)
            p_bf16[i] = bf16_bits(pn);
    }
}

} /* namespace */

extern "C" cudaError_t st_cuda_adamw(float *p, const float *g, float *m, float *v,
                                     int64_t n, double lr, double beta1, double beta2,
                                     double eps, double weight_decay, double grad_scale,
                                     int64_t t, uint16_t *p_bf16, cudaStream_t s)
{
    const double c1 = 1.0 - pow(beta1, (double)t);
    const double c2 = 1.0 - pow(beta2, (double)t);
    if (n > 0)
        adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(
            p, g, m, v, n, lr, (float)beta1, (float)beta2, c1, c2, eps, weight_decay,
            grad_scale, p_bf16);
    return launch_status();
}
