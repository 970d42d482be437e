/* The CUDA backend's optimizer step: AdamW over all the tensors of one FSDP
 * unit's shard in one launch (cuda/adamw.cu), with the bf16 copy of the new
 * parameters that the next all-gather sends.  The engine describes a
 * unit's shard once, at set-up, as segments (src/kernels/kernels.h's
 * st_adamw_segment, copied into this C struct by kernels_cuda.c), so a
 * step is one launch per unit instead of one per tensor slice.
 *
 * The arithmetic is fp32 (st_adamw, the CPU reference, uses fp64 for the
 * bias correction and the update): why that is enough, and the error
 * bound, are in adamw.cu; tests/gpu/test_cuda_adamw.cu checks both.  The
 * per-slice fp64 kernel, st_cuda_adamw, stays in ops.h. */
#ifndef ST_CUDA_ADAMW_H
#define ST_CUDA_ADAMW_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements [offset, offset + length) of the shard, with or without weight
 * decay. */
typedef struct {
    int64_t offset, length;
    int decay;
} st_cuda_adamw_segment;

/* Segments one launch carries in its parameter block; a unit with more
 * (no model here comes close: a block has at most 12 tensors) takes one
 * launch per this many. */
#define ST_CUDA_ADAMW_MAX_SEGMENTS 64

/* One AdamW step on the segments (host memory, read before the call
 * returns) of the device arrays p, g, m, v, st_adamw's meaning per segment
 * (weight_decay where decay is set, else 0).  When p_bf16 != NULL it also
 * writes st_pack_bf16 of each new parameter there.  When clip_sumsq != NULL
 * (device memory: the gradient's global sum of squares, written by work
 * enqueued before on s) the kernel reads it and multiplies grad_scale by
 * st_clip_factor(*clip_sumsq, clip) (src/kernels/kernels.h), in IEEE fp64
 * as the host would: clipping with no host read of the norm.  Elements
 * outside the segments are not touched.  When gate != NULL (device
 * memory, src/kernels/step_gate.h's ST_GATE_N doubles, written by work
 * enqueued before on s) the kernel writes nothing unless
 * gate[ST_GATE_APPLY] is 1, and takes its bias corrections from
 * gate[ST_GATE_C1] and gate[ST_GATE_C2] in place of t's: whether the step
 * applies is never known on the host.  Asynchronous on s; returns the
 * launch status. */
cudaError_t st_cuda_adamw_unit(const st_cuda_adamw_segment *segs, int n_segs, float *p,
                               const float *g, float *m, float *v, uint16_t *p_bf16,
                               double lr, double beta1, double beta2, double eps,
                               double weight_decay, double grad_scale,
                               const double *clip_sumsq, double clip, int64_t t,
                               const double *gate, cudaStream_t s);

/* step_gate.h's st_verdict_local(rec, losses, n_losses, sumsq, force_bad)
 * and st_verdict_gate(gate, rec, limit, beta1, beta2), each one thread of
 * one launch on s (a few doubles: the launch is the cost).  Device
 * pointers; asynchronous; return the launch status. */
cudaError_t st_cuda_step_verdict(double *rec, const double *losses, int n_losses,
                                 const double *sumsq, int force_bad, cudaStream_t s);
cudaError_t st_cuda_step_gate(double *gate, double *rec, int64_t limit, double beta1,
                              double beta2, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
