/* AdamW for the CUDA backend.
 *
 * adamw_unit_kernel (adamw.h, what the engine's step runs): one launch per
 * FSDP unit over all the segments of its shard, in fp32, writing the bf16
 * copy of the new parameters that the next all-gather sends.  Why fp32 is
 * enough: the master parameters and both moments are stored in fp32, and
 * the moment updates are fp32 on the CPU too (the same operations in the
 * same order here, so with grad_scale 1 the moments are the CPU's bits);
 * what fp64 buys st_adamw is only the rounding of the last few operations
 * of the update, about 2^-24 relative each.  Here the step
 * u = mhat / (sqrt(vhat) + eps) + wd p is within a few fp32 roundings
 * (~2^-21 relative) of the CPU's, and the new parameter p - lr u within
 * one ulp of p plus 2^-20 lr |u|: rounding p to fp32 storage costs the CPU
 * half an ulp already, and lr |u| is at most a few lr, far below a
 * gradient's noise.  PyTorch's fused AdamW computes in fp32 too.
 * Deterministic: each element is a fixed sequence of operations on its own
 * p, g, m, v (no reduction, no atomics, no dependence on the launch
 * geometry), written with explicit round-to-nearest intrinsics so nvcc
 * neither contracts them into FMAs nor reorders them: the same bits run to
 * run, on any GPU, and under the host emulation of tests/gpu/emu/.
 * Memory traffic: 16 bytes read and 14 written per element (p, g, m, v in;
 * p, m, v and the bf16 word out); the segment table rides in the launch's
 * parameter block, so there is no table to copy and no host wait.  Where
 * every segment starts and ends on a multiple of 8 elements and the arrays
 * are 16-byte aligned (the models' tensors are multiples of 8 wide, and
 * so are the shards), a thread takes 8 elements at a time in 128-bit
 * accesses (two per fp32 array, one for the 8 bf16 words); the arithmetic
 * per element is the same, so the bits are too.
 *
 * The gate (src/kernels/step_gate.h): with one, the kernel first reads
 * whether the step applies and its bias corrections from device memory,
 * which the one-thread step_gate_kernel below wrote from the step's agreed
 * verdict, so the host launches the update without knowing whether the
 * step was finite.  A skipped step costs the launch and one read.  The
 * corrections there come from the device's pow in fp64, rounded to fp32:
 * libdevice's pow is within 2 ulp in fp64, so the fp32 value is the
 * host's but in the rare case of a tie at fp32 rounding (under the host
 * emulation it is the host's pow, the same bits).
 */
#include "common.cuh"
#include "adamw.h"
#include "kernels/step_gate.h"

#include <math.h>
#include <string.h>

using namespace st_cuda;

namespace {

const int kThreads = 256;

/* The segments of one launch, by value in the kernel's parameters (about
 * 1 KiB of the 4 KiB a launch may carry).  Segment i covers the flat index
 * range [begin[i], begin[i + 1]) and maps it onto the shard from
 * offset[i]; bit i of decay says whether it decays. */
struct seg_table {
    int n;
    unsigned long long decay;
    int64_t begin[ST_CUDA_ADAMW_MAX_SEGMENTS + 1];
    int64_t offset[ST_CUDA_ADAMW_MAX_SEGMENTS];
};

/* One element's update, in the order of the CPU's fp32 moment updates.
 * (*pi, *mi, *vi) in and out. */
__device__ __forceinline__ void adamw_element(float &pi, float gi, float &mi, float &vi,
                                              float grad_scale, float lr, float b1, float b2,
                                              float one_b1, float one_b2, float c1, float c2,
                                              float eps, float wd)
{
    gi = __fmul_rn(gi, grad_scale);
    mi = __fadd_rn(__fmul_rn(b1, mi), __fmul_rn(one_b1, gi));
    vi = __fadd_rn(__fmul_rn(b2, vi), __fmul_rn(__fmul_rn(one_b2, gi), gi));
    const float mhat = __fdiv_rn(mi, c1), vhat = __fdiv_rn(vi, c2);
    const float u = __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)),
                              __fmul_rn(wd, pi));
    pi = __fadd_rn(pi, -__fmul_rn(lr, u));
}

/* A grid-stride loop over the segments laid end to end, VE elements per
 * item (8 on the 16-byte path, where every segment boundary is a multiple
 * of 8, so no item straddles two).  A thread's flat index only grows, so
 * its segment is found by walking forward from the last one: no search per
 * element.  c1, c2: the bias corrections 1 - beta^t, from the host's pow()
 * in double, rounded once to fp32. */
template <bool kVec>
__global__ void adamw_unit_kernel(seg_table t, float *p, const float *g, float *m, float *v,
                                  uint16_t *p_bf16, float lr, float b1, float b2, float c1,
                                  float c2, float eps, float weight_decay, double scale,
                                  const double *clip_sumsq, double clip, const double *gate)
{
    constexpr int VE = kVec ? 8 : 1;
    if (gate) {
        if (gate[ST_GATE_APPLY] == 0.0)
            return;
        c1 = (float)gate[ST_GATE_C1];
        c2 = (float)gate[ST_GATE_C2];
    }
    /* The clip factor, st_clip_factor's expression in IEEE fp64 (sqrt
     * and division are correctly rounded on the device, no contraction
     * applies), so the scale has the bits the host would have passed. */
    if (clip_sumsq) {
        const double norm = __dsqrt_rn(*clip_sumsq);
        if (clip > 0.0 && norm > clip)
            scale = __dmul_rn(scale, __ddiv_rn(clip, __dadd_rn(norm, 1e-6)));
    }
    const float grad_scale = (float)scale;
    const int64_t total = t.begin[t.n];
    const float one_b1 = 1.0f - b1, one_b2 = 1.0f - b2;
    int sg = 0;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j * VE < total;
         j += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = j * VE;
        while (e >= t.begin[sg + 1])
            sg++;
        const int64_t i = t.offset[sg] + (e - t.begin[sg]);
        const float wd = (t.decay >> sg) & 1ull ? weight_decay : 0.0f;
        float pv[VE], gv[VE], mv[VE], vv[VE];
        load_vec<VE>(p + i, pv);
        load_vec<VE>(g + i, gv);
        load_vec<VE>(m + i, mv);
        load_vec<VE>(v + i, vv);
        for (int k = 0; k < VE; k++)
            adamw_element(pv[k], gv[k], mv[k], vv[k], grad_scale, lr, b1, b2, one_b1, one_b2,
                          c1, c2, eps, wd);
        store_vec<VE>(m + i, mv);
        store_vec<VE>(v + i, vv);
        store_vec<VE>(p + i, pv);
        if (p_bf16) {
            if constexpr (kVec) {
                uint16_t h[8];
                for (int k = 0; k < 8; k++)
                    h[k] = bf16_bits(pv[k]);
                store16_bits(p_bf16 + i, h);
            } else {
                p_bf16[i] = bf16_bits(pv[0]);
            }
        }
    }
}

__global__ void step_verdict_kernel(double *rec, const double *losses, int n_losses,
                                    const double *sumsq, int force_bad)
{
    st_verdict_local(rec, losses, n_losses, sumsq, force_bad);
}

__global__ void step_gate_kernel(double *gate, double *rec, int64_t limit, double beta1,
                                 double beta2)
{
    st_verdict_gate(gate, rec, limit, beta1, beta2);
}

} /* namespace */

extern "C" cudaError_t st_cuda_adamw_unit(const st_cuda_adamw_segment *segs, int n_segs,
                                          float *p, const float *g, float *m, float *v,
                                          uint16_t *p_bf16, double lr, double beta1,
                                          double beta2, double eps, double weight_decay,
                                          double grad_scale, const double *clip_sumsq,
                                          double clip, int64_t t, const double *gate,
                                          cudaStream_t s)
{
    const float c1 = (float)(1.0 - pow(beta1, (double)t));
    const float c2 = (float)(1.0 - pow(beta2, (double)t));
    for (int first = 0; first < n_segs; first += ST_CUDA_ADAMW_MAX_SEGMENTS) {
        seg_table tab;
        memset(&tab, 0, sizeof tab);
        tab.n = n_segs - first < ST_CUDA_ADAMW_MAX_SEGMENTS ? n_segs - first
                                                            : ST_CUDA_ADAMW_MAX_SEGMENTS;
        for (int i = 0; i < tab.n; i++) {
            const st_cuda_adamw_segment *sg = &segs[first + i];
            tab.begin[i + 1] = tab.begin[i] + sg->length;
            tab.offset[i] = sg->offset;
            if (sg->decay)
                tab.decay |= 1ull << i;
        }
        const int64_t total = tab.begin[tab.n];
        /* The 16-byte path: every segment on multiples of 8 elements. */
        bool vec = aligned16(p, g, m, v, p_bf16);
        for (int i = 0; i < tab.n && vec; i++)
            vec = tab.offset[i] % 8 == 0 && (tab.begin[i + 1] - tab.begin[i]) % 8 == 0;
        if (total > 0)
            with_vec_items<bf16>(vec, total, kThreads, [&](auto tag, unsigned grid) {
                constexpr bool kVec = decltype(tag)::value;
                adamw_unit_kernel<kVec><<<grid, kThreads, 0, s>>>(
                    tab, p, g, m, v, p_bf16, (float)lr, (float)beta1, (float)beta2, c1, c2,
                    (float)eps, (float)weight_decay, grad_scale, clip_sumsq, clip, gate);
            });
    }
    return launch_status();
}

extern "C" cudaError_t st_cuda_step_verdict(double *rec, const double *losses, int n_losses,
                                            const double *sumsq, int force_bad, cudaStream_t s)
{
    step_verdict_kernel<<<1, 1, 0, s>>>(rec, losses, n_losses, sumsq, force_bad);
    return launch_status();
}

extern "C" cudaError_t st_cuda_step_gate(double *gate, double *rec, int64_t limit,
                                         double beta1, double beta2, cudaStream_t s)
{
    step_gate_kernel<<<1, 1, 0, s>>>(gate, rec, limit, beta1, beta2);
    return launch_status();
}
