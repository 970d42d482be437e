/* The model's units on the GPU: the CUDA twins of the five unit functions
 * of src/kernels/cpu_model.h (st_embed_forward/backward, st_block_forward/backward,
 * st_head_forward_backward), which stay the numerical reference.  Each
 * takes the same arguments in the same order, with every pointer a device
 * pointer, plus a trailing context (stream, cuBLASLt context, the model's
 * RoPE tables on the device).  They are built from the ops of cuda/ops.h
 * and cuda/attention.h and follow the CPU's sequence of operations step by
 * step, so a difference against the CPU points at one op.
 *
 * Storage modes (the st_cuda_dtype of ops.h), one entry point each:
 *   _f32   parameters, activations and their gradients are float;
 *   _bf16  the gathered unit parameters (p, head_p, embed_p), activations
 *          (in, out, saved activations) and activation gradients (dout,
 *          din) are bf16 words (uint16_t, st_pack_bf16's layout, same flat
 *          layout and element offsets as the fp32 unit buffer); parameter
 *          gradients (g, head_g, embed_g) stay float and are accumulated in
 *          fp32; row statistics (norm mean/rstd, attention lse) stay float.
 *          Matrix products go through st_cuda_gemm with bf16 inputs and
 *          fp32 compute; the head's logits are fp32.
 *
 * Memory the engine provides, opaquely, from the size functions below:
 * saved activations of one block (st_cuda_block_acts_bytes, carved up by
 * st_cuda_block_acts_bind) and one scratch buffer shared by every backward
 * and the head (st_cuda_model_scratch_bytes).  Both must be 256-byte
 * aligned (cudaMalloc's alignment).  The scratch may be reused once the
 * stream has passed the call that used it.
 *
 * Nothing here synchronises the host: work is queued on ctx->stream and
 * the functions return cudaSuccess or the first error of a launch (a
 * refused attention shape reads as cudaErrorInvalidValue); faults inside
 * kernels surface at the next synchronisation.  The head leaves its loss in
 * device memory.  Every result is deterministic (no floating-point
 * atomics in any op used).
 *
 * Limits inherited from the ops: head dims 64 and 128 only (the attention
 * kernels).  NOTHING HERE HAS RUN ON A GPU YET: see cuda/README. */
#ifndef ST_CUDA_MODEL_H
#define ST_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "model/model.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    cudaStream_t stream;       /* where every call of this context queues work */
    st_cuda_gemm_ctx *gemm;    /* owned; cuBLASLt is stream-ordered, one per stream */
    float *rope_cos, *rope_sin; /* device copies of m->rope_cos/sin [T, hd/2]; llama */
    void *embed_ws;            /* owned: the embedding backward's sort workspace, */
    size_t embed_ws_bytes;     /* allocated on first use, grown for a larger B */
} st_cuda_model_ctx;

/* Creates the context for model m on stream (0 = the legacy default
 * stream): a cuBLASLt context (gemm_workspace_bytes, 0 = ops.h's default)
 * and, for Llama, the CPU's RoPE tables copied to the device, so both
 * backends rotate by bit-identical angles.  This is set-up, not a training
 * step: the table copy may wait for the host.  On failure *ctx is NULL.
 * The embedding backward allocates its sort workspace here on first use
 * (and again for a larger batch): that one call may wait for the device. */
cudaError_t st_cuda_model_ctx_create(st_cuda_model_ctx **ctx, const st_model *m,
                                     cudaStream_t stream, size_t gemm_workspace_bytes);
void st_cuda_model_ctx_destroy(st_cuda_model_ctx *ctx);

/* Saved activations of one block for B sequences (N = B x T rows), as
 * st_block_acts.  Fields marked S are in the storage type of the mode
 * (float or bf16 words); the others are float in both modes. */
typedef struct {
    void *ln1;                 /* S [N, C] */
    float *ln1_mean, *ln1_rstd; /* [N] (mean: gpt2 only, bound in both) */
    void *qkv;                 /* S [N, (H + 2 KV) hd]: q | k | v, after RoPE */
    void *att;                 /* S [N, C] attention output before projection */
    float *lse;                /* [B, H, T] */
    void *res_mid;             /* S [N, C] residual after attention */
    void *ln2;                 /* S [N, C] */
    float *ln2_mean, *ln2_rstd; /* [N] */
    void *fc;                  /* S gpt2 [N, F] pre-GELU; llama [N, 2F] gate | up */
    void *act;                 /* S [N, F] GELU or SwiGLU output */
} st_cuda_block_acts;

/* LoRA adapters of one block call (model.h's st_model_lora; kernels/lora_args.h's
 * st_lora_args, whose meanings these are): NULL when the model has none.
 * p is the block's gathered adapter buffer in the mode's storage type, g
 * its fp32 gradient (backward; accumulated).  Dropout applies when
 * dropout > 0, element by element as st_lora_keep_at decides. */
typedef struct {
    const void *p;
    float *g;
    int64_t layer;
    double dropout;
    uint64_t seed, step;
    int64_t first_seq;
} st_cuda_lora;

/* dtype: ST_CUDA_F32 or ST_CUDA_BF16.  Sizes include the padding that
 * keeps every field 256-byte aligned. */
size_t st_cuda_block_acts_bytes(const st_model *m, int64_t B, int dtype);
void st_cuda_block_acts_bind(st_cuda_block_acts *a, const st_model *m, int64_t B,
                             int dtype, void *mem);
/* Scratch any backward or the head needs for B sequences in mode dtype
 * (with LoRA, the adapters' buffers after the block's: model_units.cuh,
 * layout_lora_scratch).  The block forward uses the same scratch for its
 * adapters. */
size_t st_cuda_model_scratch_bytes(const st_model *m, int64_t B, int dtype);

/* The head's logits chunk.  Its rows are st_cuda_head_ld(m) = the stored
 * vocabulary Vp (model.h) rounded up to a multiple of
 * ST_CUDA_HEAD_LD_ALIGN elements apart, so that every product touching the
 * logits has 16-byte row strides and pointers (the fast path of
 * cuda/gemm_check.h) whatever V is: GPT-2's 50257 becomes 50304.  The
 * products run over the Vp stored rows of the output weight, whose rows
 * past V are zero: with model.vocab_padding 128 (the default) Vp is 50304
 * and the products' vocabulary dimension is whole 128-wide tiles.  The
 * cross-entropy reads columns below V only and writes zero gradient into
 * the columns from V to the row's end, so the padding rows' weight
 * gradient stays zero and they never enter a loss.  The logits are in the storage type (bf16 in bf16 mode)
 * and their gradient overwrites them in place.  The head takes as many
 * rows at once as keep one chunk's logits within the budget
 * (ST_CUDA_HEAD_CHUNK_BYTES unless st_cuda_set_head_chunk_bytes changed
 * it), at least 1 and at most B*T, in chunks of equal size: the fewer
 * chunks, the fewer times the fp32 gradient of the output weight [V, C]
 * is read and written by the weight-gradient product (beta 1), which is
 * the whole reason for a large budget.  1 GiB takes gpt2-124m's 65,536
 * rows in 7 chunks and llama-1b's 16,384 in 4 (bf16), where 256 MiB of
 * fp32 logits took 49 and 32.  The chunking moves only the order in which
 * the head's double loss sum adds its rows, not any value. */
#define ST_CUDA_HEAD_LD_ALIGN 128
#define ST_CUDA_HEAD_CHUNK_BYTES ((size_t)1 << 30)
static inline int64_t st_cuda_head_ld(const st_model *m)
{
    return st_model_round_up(m->Vp, ST_CUDA_HEAD_LD_ALIGN);
}
/* dtype: ST_CUDA_F32 or ST_CUDA_BF16, the logits' element type. */
int64_t st_cuda_head_chunk_rows(const st_model *m, int64_t B, int dtype);
/* Sets the budget (0: back to ST_CUDA_HEAD_CHUNK_BYTES) and returns the old
 * one.  Process-wide, for tests that need several chunks from a small
 * model; set it before sizing the scratch that the head is given. */
size_t st_cuda_set_head_chunk_bytes(size_t bytes);

/* ---- fp32 storage ---------------------------------------------------------- */

cudaError_t st_cuda_model_embed_forward_f32(const st_model *m, const float *p,
                                            const int32_t *tokens, int64_t B, float *out,
                                            st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_embed_backward_f32(const st_model *m, float *g,
                                             const int32_t *tokens, int64_t B,
                                             const float *dout, st_cuda_model_ctx *ctx);
/* Block units: lora NULL without adapters; g NULL for frozen base weights
 * (LoRA), whose gradients (weights, biases, norms) are then not computed. */
cudaError_t st_cuda_model_block_forward_f32(const st_model *m, const float *p,
                                            const st_cuda_lora *lora, int64_t B,
                                            const float *in, float *out,
                                            const st_cuda_block_acts *a, void *scratch,
                                            st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_block_backward_f32(const st_model *m, const float *p, float *g,
                                             const st_cuda_lora *lora, int64_t B,
                                             const float *in,
                                             const st_cuda_block_acts *a,
                                             const float *dout, float *din, void *scratch,
                                             st_cuda_model_ctx *ctx);
/* As st_head_forward_backward (head_g, embed_g NULL: frozen weights, no
 * parameter gradient), except that the loss is not returned: the
 * sum of the B*T losses is ADDED to the device double *loss_sum (each
 * chunk's sum in order, in double, like the CPU's accumulation), so a
 * caller sums micro-batches without synchronising.  logits_out, when not
 * NULL, is a device float [B*T, V] array (tests only; float in both modes,
 * rows V apart, unpadded). */
cudaError_t st_cuda_model_head_forward_backward_f32(
    const st_model *m, const float *head_p, const float *embed_p, float *head_g,
    float *embed_g, int64_t B, const float *in, const int32_t *targets, float grad_scale,
    float *din, float *logits_out, void *scratch, double *loss_sum,
    st_cuda_model_ctx *ctx);

/* ---- bf16 storage ----------------------------------------------------------- */

cudaError_t st_cuda_model_embed_forward_bf16(const st_model *m, const uint16_t *p,
                                             const int32_t *tokens, int64_t B,
                                             uint16_t *out, st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_embed_backward_bf16(const st_model *m, float *g,
                                              const int32_t *tokens, int64_t B,
                                              const uint16_t *dout,
                                              st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_block_forward_bf16(const st_model *m, const uint16_t *p,
                                             const st_cuda_lora *lora, int64_t B,
                                             const uint16_t *in, uint16_t *out,
                                             const st_cuda_block_acts *a, void *scratch,
                                             st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_block_backward_bf16(const st_model *m, const uint16_t *p,
                                              float *g, const st_cuda_lora *lora,
                                              int64_t B, const uint16_t *in,
                                              const st_cuda_block_acts *a,
                                              const uint16_t *dout, uint16_t *din,
                                              void *scratch, st_cuda_model_ctx *ctx);
cudaError_t st_cuda_model_head_forward_backward_bf16(
    const st_model *m, const uint16_t *head_p, const uint16_t *embed_p, float *head_g,
    float *embed_g, int64_t B, const uint16_t *in, const int32_t *targets,
    float grad_scale, uint16_t *din, float *logits_out, void *scratch, double *loss_sum,
    st_cuda_model_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
