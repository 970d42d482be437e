/* The kernels backend: where the engine's parameters, gradients, moments
 * and activations live, and what computes on them, behind one table of
 * operations (st_kernels_ops) that each receive the backend instance they
 * run on, as comm.h's receive their communicator.  The selector
 * (kernels_select.h) makes the instance; there is a backend per kind of
 * memory:
 *   cpu  - host memory; the model.h ops, cpu_ops.h's helpers and st_adamw
 *          (kernels_cpu.c), the numerical reference;
 *   cuda - device memory; cuda/model_cuda.h's units and cuda/ops.h
 *          (kernels_cuda.c), never yet run on a GPU.
 * The engine (fsdp.c) touches that memory only through this table, so a
 * backend whose memory the host cannot address drops in without the engine
 * knowing which one runs.  Host code elsewhere (checkpoints, final weights,
 * sampling) goes through fsdp.h's copies, which stage through to_host and
 * from_host.
 *
 * The comm backend moves the same pointers the kernels compute on, so the
 * two pair by memory: mpi with cpu, nccl with cuda.  That is also why the
 * loss and the gradient's sum of squares accumulate in a backend-resident
 * double: they can be all-reduced where they are and cross to the host once
 * (per micro-step, per step), instead of every op returning a value a GPU
 * would have to synchronise for.
 *
 * A device backend may queue work and return early, in call order; to_host
 * and sync are the calls that wait for the work before them, so a host
 * value read through to_host is always complete.
 *
 * Activation memory is opaque to the engine: it asks the backend how many
 * bytes one block's saved activations and the shared scratch need, and
 * hands the blocks back unopened, so a backend may lay them out (or save
 * less) as its kernels prefer.  Sizes stay what estimate.c assumes.
 *
 * params_bf16: in bf16 compute mode the gathered unit travels as bf16
 * words.  The CPU ops read fp32, so the engine unpacks (the bf16 values
 * stored as rounded floats); a backend with native bf16 kernels sets
 * params_bf16 and the engine keeps the words as they arrived, which halves
 * the gathered units' memory and skips a pass over them.  The ops are then
 * told the dtype (pdt) of the parameters they read; gradients, activations
 * and master parameters stay fp32 either way. */
#ifndef ST_KERNELS_H
#define ST_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "kernels/lora_args.h"
#include "kernels/step_gate.h"
#include "model/model.h"

typedef struct st_kernels st_kernels;

/* AdamW over one FSDP unit's shard in one call (adamw_unit).  The engine
 * describes the shard once, at set-up, as segments: each is the part of one
 * tensor (or of adjacent tensors with the same decay) inside the shard, with
 * whether it decays.  Elements of no segment (the padding of the last
 * shard) are left alone. */
typedef struct {
    int64_t offset;          /* first element, from the start of the shard */
    int64_t length;
    int decay;               /* apply weight_decay (else 0) */
} st_adamw_segment;

/* One step's hyperparameters, st_adamw's meanings (cpu_adamw.h).  With
 * clip_sumsq (backend memory: the gradient's global sum of squares) and
 * clip > 0, the gradient is clipped by its norm without the norm crossing
 * to the host: grad_scale is multiplied by st_clip_factor(*clip_sumsq,
 * clip), computed where the update runs.  With gate (backend memory,
 * step_gate.h's ST_GATE_N doubles), the update runs only when
 * gate[ST_GATE_APPLY] is 1 (else nothing is written) and its bias
 * correction step is gate[ST_GATE_T], not t: the host need not know
 * whether the step applies. */
typedef struct {
    double lr, beta1, beta2, eps, weight_decay, grad_scale;
    int64_t t;               /* 1-based step of the bias correction (no gate) */
    const double *clip_sumsq;  /* NULL: no clipping */
    double clip;
    const double *gate;      /* NULL: the update always runs, at step t */
} st_adamw_args;

/* The factor that brings a gradient of norm sqrt(sumsq) down to clip: 1
 * unless the norm exceeds clip (so also 1 for a NaN norm, a step the train
 * loop skips anyway).  cuda/adamw.cu computes the same in IEEE fp64 on
 * the device, bit for bit. */
static inline double st_clip_factor(double sumsq, double clip)
{
    const double norm = sqrt(sumsq);
    return clip > 0.0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
}

/* Backend operations; each backend fills one table (kernels_cpu.c,
 * kernels_cuda.c).  Every op receives the backend instance it runs on, as
 * comm ops receive their communicator. */
typedef struct {
    /* Memory, counted by alloc.c's categories so that peak_bytes and
     * `shardtrain estimate` see the same numbers on every backend.  alloc
     * returns zeroed memory (as st_alloc); free(NULL) does nothing. */
    void *(*alloc)(st_kernels *k, size_t bytes, st_mem_cat cat);
    /* As alloc, counted alike, but the contents are undefined (a device
     * backend skips the zeroing pass): for buffers written whole before
     * anything reads them, such as a collective's receive buffer. */
    void *(*alloc_raw)(st_kernels *k, size_t bytes, st_mem_cat cat);
    void (*free)(st_kernels *k, void *p);
    void (*zero)(st_kernels *k, void *p, size_t bytes);
    void (*to_host)(st_kernels *k, void *dst, const void *src, size_t bytes);
    void (*from_host)(st_kernels *k, void *dst, const void *src, size_t bytes);
    void (*copy)(st_kernels *k, void *dst, const void *src, size_t bytes);
    /* Wait for all the work queued so far (timing a device). */
    void (*sync)(st_kernels *k);

    size_t (*block_acts_bytes)(st_kernels *k, const st_model *m, int64_t B);
    size_t (*scratch_bytes)(st_kernels *k, const st_model *m, int64_t B);

    /* The model ops, with model.h's meanings.  Every pointer is backend
     * memory (tokens and targets included); p is the gathered unit, of
     * dtype pdt (ST_DT_F32, or ST_DT_BF16 only when params_bf16).  The
     * activations between units (in, out: the residual stream; dout, din:
     * its gradient) are [B*T, C] elements of act_bytes each (st_kernels):
     * fp32, or bf16 words where the backend keeps them so. */
    void (*embed_forward)(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                          const int32_t *tokens, int64_t B, void *out);
    void (*embed_backward)(st_kernels *k, const st_model *m, float *g,
                           const int32_t *tokens, int64_t B, const void *dout);
    /* g is NULL when the base weights are frozen (LoRA): no parameter
     * gradient is computed for them.  lora is NULL without adapters.  The
     * forward may use the scratch while it runs. */
    void (*block_forward)(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                          const st_lora_args *lora, int64_t B, const void *in, void *out,
                          void *acts, void *scratch);
    void (*block_backward)(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                           float *g, const st_lora_args *lora, int64_t B, const void *in,
                           const void *acts, const void *dout, void *din, void *scratch);
    /* Adds the summed loss into *loss_sum (backend memory).  head_g and
     * embed_g are NULL for frozen weights (LoRA); din is still computed
     * when grad_scale is not 0.  logits_out is fp32 in every mode. */
    void (*head_forward_backward)(st_kernels *k, const st_model *m, const void *head_p,
                                  const void *embed_p, st_dtype pdt, float *head_g,
                                  float *embed_g, int64_t B, const void *in,
                                  const int32_t *targets, float grad_scale, void *din,
                                  float *logits_out, void *scratch, double *loss_sum);

    /* Engine helpers, cpu_ops.h's and cpu_adamw.h's meanings. */
    void (*pack_bf16)(st_kernels *k, uint16_t *dst, const float *src, int64_t n);
    void (*unpack_bf16)(st_kernels *k, float *dst, const uint16_t *src, int64_t n);
    void (*round_bf16)(st_kernels *k, float *dst, const float *src, int64_t n);
    void (*add_inplace)(st_kernels *k, float *y, const float *x, int64_t n);
    /* *acc += sum of x[i]^2, in double, acc in backend memory. */
    void (*sumsq)(st_kernels *k, const float *x, int64_t n, double *acc);
    /* AdamW on the segments of one unit's shard (p, g, m, v: [shard]), as
     * st_adamw on each.  When p_bf16 is not NULL it also writes st_pack_bf16
     * of each updated parameter there (the engine's bf16 copy of the shard,
     * which the next gather sends), and leaves the words of elements outside
     * the segments alone.  A device backend makes it one launch. */
    void (*adamw_unit)(st_kernels *k, const st_adamw_segment *segs, int n_segs, float *p,
                       const float *g, float *m, float *v, uint16_t *p_bf16,
                       const st_adamw_args *a);
    /* step_gate.h's st_verdict_local into rec and st_verdict_gate, where
     * the backend's memory is (a one-thread launch on a device), so that
     * no step waits for the device to decide whether it applies.  Every
     * pointer is backend memory. */
    void (*step_verdict)(st_kernels *k, double *rec, const double *losses, int n_losses,
                         const double *sumsq, int force_bad);
    void (*step_gate)(st_kernels *k, double *gate, double *rec, int64_t limit, double beta1,
                      double beta2);

    /* Releases what the instance holds; NULL for a backend that holds
     * nothing (its instances are static). */
    void (*destroy)(st_kernels *k);
} st_kernels_ops;

struct st_kernels {
    const st_kernels_ops *ops;
    const char *name;        /* "cpu", "cuda"; "cpu-bf16params" (tests) */
    int on_device;           /* memory is not host-addressable: host code must copy */
    int params_bf16;         /* bf16 mode: ops read gathered params as bf16 words */
    /* Bytes of one element of the activations the model ops take and give
     * (the engine's residual stream and its gradient): 4 for fp32; 2 where
     * a bf16 mode keeps them as bf16 words between units (cuda), so that
     * no unit call converts them. */
    int act_bytes;
    /* The queue the ops run on, which collectives on the same memory must
     * follow (comm_backends.h): the cuda backend's compute stream (a
     * cudaStream_t); NULL for the host. */
    void *stream;
    void *impl;              /* backend state */
};

#endif
