/* The CUDA backend's non-attention kernels: the GPU twin of src/kernels/cpu_ops.h
 * (plus the embedding of src/kernels/cpu_model.c and the AdamW of src/kernels/cpu_adamw.c), which
 * stays the numerical reference.  Every argument means what it means there,
 * except that pointers are device pointers and every call is asynchronous on
 * the given stream.
 *
 * Storage modes.  Each op has two entry points:
 *   ..._f32   activations stored as float;
 *   ..._bf16  activations (inputs, outputs, layer weights read by the op)
 *             stored as bfloat16, passed as uint16_t words with the bit
 *             layout of st_pack_bf16 (C has no portable bf16 type).
 * In both modes every sum, mean and transcendental is computed in fp32 (the
 * AdamW update in fp64, like the CPU), and per-row statistics (mean, rstd,
 * losses) and parameter-gradient accumulators (dw, db, dbias, dwte, dwpe)
 * are float in both modes: they are summed over many rows and must not lose
 * bits to bf16.  The implementation is one C++ template per op instantiated
 * for the two storage types; the C entry points are thin wrappers.
 *
 * Every function returns cudaSuccess or the error of the launch
 * (cudaGetLastError); kernel faults surface at the next synchronisation.
 * Shapes: N = rows (batch x time), C = channels, row-major throughout.
 * Determinism: no kernel here uses floating-point atomics, so every result
 * is bit-identical from run to run on the same GPU and binary. */
#ifndef ST_CUDA_OPS_H
#define ST_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise (cuda/elementwise.cu) ---------------------------------- */

/* A GPT-2 layer's bias add and GELU have no kernels of their own: they are
 * epilogues of the products (st_cuda_gemm_ex below; cuda/model_gpt2.cu, cuda/model_llama.cu). */

/* dbias[c] += sum_n dout[n,c]  (dbias is float in both modes).  A two-stage
 * column sum (fixed row chunks, then a fixed tree over the chunks), so ws
 * must hold st_cuda_bias_backward_workspace_bytes(N, C) bytes of device
 * memory, 16-byte aligned (NULL: cudaErrorInvalidValue); it may be reused
 * once the stream has passed the call. */
size_t st_cuda_bias_backward_workspace_bytes(int64_t N, int64_t C);
cudaError_t st_cuda_bias_backward_f32(float *dbias, const float *dout, int64_t N,
                                      int64_t C, void *ws, cudaStream_t s);
cudaError_t st_cuda_bias_backward_bf16(float *dbias, const uint16_t *dout, int64_t N,
                                       int64_t C, void *ws, cudaStream_t s);

/* SwiGLU over rows gate | up of width 2F: out[n,i] = silu(gate)*up.
 * Backward overwrites d_gate_up. */
cudaError_t st_cuda_swiglu_forward_f32(float *out, const float *gate_up, int64_t N,
                                       int64_t F, cudaStream_t s);
cudaError_t st_cuda_swiglu_forward_bf16(uint16_t *out, const uint16_t *gate_up,
                                        int64_t N, int64_t F, cudaStream_t s);
cudaError_t st_cuda_swiglu_backward_f32(float *d_gate_up, const float *gate_up,
                                        const float *dout, int64_t N, int64_t F,
                                        cudaStream_t s);
cudaError_t st_cuda_swiglu_backward_bf16(uint16_t *d_gate_up, const uint16_t *gate_up,
                                         const uint16_t *dout, int64_t N, int64_t F,
                                         cudaStream_t s);

/* RoPE tables [T, hd/2] (float in both modes, computed in double like the
 * CPU) and the in-place rotation of n_heads heads at the start of each row
 * of x (row stride ld, position t = row % T); inverse = 1 rotates back. */
cudaError_t st_cuda_rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hd,
                                double theta, cudaStream_t s);
cudaError_t st_cuda_rope_apply_f32(float *x, int64_t ld, int64_t B, int64_t T,
                                   int64_t n_heads, int64_t hd, const float *cos_t,
                                   const float *sin_t, int inverse, cudaStream_t s);
cudaError_t st_cuda_rope_apply_bf16(uint16_t *x, int64_t ld, int64_t B, int64_t T,
                                    int64_t n_heads, int64_t hd, const float *cos_t,
                                    const float *sin_t, int inverse, cudaStream_t s);

/* Token (+ position, GPT-2: wpe != NULL) embedding, as st_embed_forward:
 * out[r,:] = wte[tokens[r],:] (+ wpe[r % T,:]) for r < B*T. */
cudaError_t st_cuda_embed_forward_f32(float *out, const float *wte, const float *wpe,
                                      const int32_t *tokens, int64_t B, int64_t T,
                                      int64_t C, cudaStream_t s);
cudaError_t st_cuda_embed_forward_bf16(uint16_t *out, const uint16_t *wte,
                                       const uint16_t *wpe, const int32_t *tokens,
                                       int64_t B, int64_t T, int64_t C, cudaStream_t s);
/* dwte[tokens[r],:] += dout[r,:]; dwpe[r % T,:] += dout[r,:] when dwpe != NULL.
 * Deterministic scatter-add (no atomics): the rows are sorted by token on
 * the device and each token's rows added in ascending row order, as on the
 * CPU.  ws: st_cuda_embed_backward_workspace_bytes(B * T) bytes of device
 * memory, 16-byte aligned (NULL: cudaErrorInvalidValue). */
size_t st_cuda_embed_backward_workspace_bytes(int64_t N);
cudaError_t st_cuda_embed_backward_f32(float *dwte, float *dwpe, const int32_t *tokens,
                                       const float *dout, int64_t B, int64_t T,
                                       int64_t C, void *ws, cudaStream_t s);
cudaError_t st_cuda_embed_backward_bf16(float *dwte, float *dwpe, const int32_t *tokens,
                                        const uint16_t *dout, int64_t B, int64_t T,
                                        int64_t C, void *ws, cudaStream_t s);

/* y[i] += x[i] */
cudaError_t st_cuda_add_inplace_f32(float *y, const float *x, int64_t n, cudaStream_t s);
cudaError_t st_cuda_add_inplace_bf16(uint16_t *y, const uint16_t *x, int64_t n,
                                     cudaStream_t s);

/* Casts, bit-identical to st_round_bf16 / st_pack_bf16 / st_unpack_bf16
 * (round to nearest even, inf and NaN passed through by truncation). */
cudaError_t st_cuda_round_bf16(float *dst, const float *src, int64_t n, cudaStream_t s);
cudaError_t st_cuda_pack_bf16(uint16_t *dst, const float *src, int64_t n, cudaStream_t s);
cudaError_t st_cuda_unpack_bf16(float *dst, const uint16_t *src, int64_t n,
                                cudaStream_t s);
/* rows x cols bf16 elements, rows lds elements apart, unpacked into fp32
 * rows ldd apart (the LM head's padded logits copied out). */
cudaError_t st_cuda_unpack_bf16_rows(float *dst, int64_t ldd, const uint16_t *src,
                                     int64_t lds, int64_t rows, int64_t cols,
                                     cudaStream_t s);

/* ---- normalisations (cuda/norms.cu) -------------------------------------- */

/* LayerNorm, biased variance; mean and rstd [N] are float in both modes. */
cudaError_t st_cuda_layernorm_forward_f32(float *out, float *mean, float *rstd,
                                          const float *x, const float *w, const float *b,
                                          int64_t N, int64_t C, float eps, cudaStream_t s);
cudaError_t st_cuda_layernorm_forward_bf16(uint16_t *out, float *mean, float *rstd,
                                           const uint16_t *x, const uint16_t *w,
                                           const uint16_t *b, int64_t N, int64_t C,
                                           float eps, cudaStream_t s);
/* dx = dres + ...; dw += ...; db += ... (dw, db float in both modes).
 * dres NULL means dx itself (dx += ...); another buffer is the residual's
 * gradient, added here so that the caller need not copy it into dx first
 * (dx and dres both [N, C]; they may not overlap unless equal).  One
 * kernel does dx and each chunk of rows' share of dw and db (partials in
 * ws), a second adds the partials in a fixed order: ws must hold
 * st_cuda_norm_backward_workspace_bytes(N, C) bytes of device memory
 * (NULL: cudaErrorInvalidValue).  Rows wider than 8192 take an unfused
 * path (dx and the partials in two kernels), same partials, same stage 2.
 * dw (db) NULL: that gradient is not added (frozen weights; stage 1 still
 * writes its partials to ws, beside dx). */
size_t st_cuda_norm_backward_workspace_bytes(int64_t N, int64_t C);
cudaError_t st_cuda_layernorm_backward_f32(float *dx, const float *dres, float *dw,
                                           float *db, const float *dout, const float *x,
                                           const float *w, const float *mean,
                                           const float *rstd, int64_t N, int64_t C,
                                           void *ws, cudaStream_t s);
cudaError_t st_cuda_layernorm_backward_bf16(uint16_t *dx, const uint16_t *dres, float *dw,
                                            float *db, const uint16_t *dout, const uint16_t *x,
                                            const uint16_t *w, const float *mean,
                                            const float *rstd, int64_t N, int64_t C,
                                            void *ws, cudaStream_t s);
cudaError_t st_cuda_rmsnorm_forward_f32(float *out, float *rstd, const float *x,
                                        const float *w, int64_t N, int64_t C, float eps,
                                        cudaStream_t s);
cudaError_t st_cuda_rmsnorm_forward_bf16(uint16_t *out, float *rstd, const uint16_t *x,
                                         const uint16_t *w, int64_t N, int64_t C,
                                         float eps, cudaStream_t s);
cudaError_t st_cuda_rmsnorm_backward_f32(float *dx, const float *dres, float *dw,
                                         const float *dout, const float *x, const float *w,
                                         const float *rstd, int64_t N, int64_t C, void *ws,
                                         cudaStream_t s);
cudaError_t st_cuda_rmsnorm_backward_bf16(uint16_t *dx, const uint16_t *dres, float *dw,
                                          const uint16_t *dout, const uint16_t *x,
                                          const uint16_t *w,
                                          const float *rstd, int64_t N, int64_t C,
                                          void *ws, cudaStream_t s);

/* ---- loss (cuda/xent.cu) -------------------------------------------------- */

/* Softmax cross-entropy over rows of logits [N, V] with row stride ld >= V
 * (elements; the columns V..ld-1 are neither read nor written), in place,
 * as st_softmax_xent: row_loss[n] (device, float, N entries) gets each row's
 * loss, *loss_sum (device, one double) the sum of the N losses in row order,
 * and when grad_scale != 0 the logits are overwritten with
 * (softmax - onehot) * grad_scale.  A negative target is an ignored row:
 * loss 0 and a zero gradient row.  Nothing is copied to the host, so the
 * call does not synchronise. */
cudaError_t st_cuda_softmax_xent_f32(float *logits, const int32_t *targets, int64_t N,
                                     int64_t V, int64_t ld, float grad_scale,
                                     float *row_loss, double *loss_sum, cudaStream_t s);
cudaError_t st_cuda_softmax_xent_bf16(uint16_t *logits, const int32_t *targets,
                                      int64_t N, int64_t V, int64_t ld, float grad_scale,
                                      float *row_loss, double *loss_sum, cudaStream_t s);

/* ---- reductions (cuda/reduce.cu) ------------------------------------------ */

/* Blocks of the first pass of st_cuda_sumsq: its partials workspace holds
 * this many doubles (device memory, reusable once the stream passed). */
#define ST_CUDA_SUMSQ_PARTIALS 264

/* *acc (device double) += sum of x[i]^2 over n floats, accumulated in
 * double; deterministic (fixed grid and summation trees, no atomics). */
cudaError_t st_cuda_sumsq(const float *x, int64_t n, double *acc, double *partials,
                          cudaStream_t s);

/* The optimiser, st_cuda_adamw_unit, is declared in cuda/adamw.h. */

/* ---- matrix products (cuda/gemm_lt.cu) ------------------------------------ */

/* Storage type of a matrix operand. */
enum st_cuda_dtype { ST_CUDA_F32 = 0, ST_CUDA_BF16 = 1 };

/* A cuBLASLt handle plus its workspace; one per stream that runs products. */
typedef struct st_cuda_gemm_ctx st_cuda_gemm_ctx;

/* workspace_bytes = 0 picks ST_CUDA_GEMM_WORKSPACE (what Hopper kernels
 * like to have). */
#define ST_CUDA_GEMM_WORKSPACE ((size_t)32 << 20)
cudaError_t st_cuda_gemm_create(st_cuda_gemm_ctx **ctx, size_t workspace_bytes);
void st_cuda_gemm_destroy(st_cuda_gemm_ctx *ctx);

/* st_cuda_gemm, the plain product, is defined below st_cuda_gemm_ex. */

/* Epilogues of st_cuda_gemm_ex, applied to P = op(A) op(B) + beta*C, all
 * in fp32 before D is rounded to its type.  "Row" and "column" are ours
 * (row-major D of M rows and N columns); cuda/gemm_lt.cu explains how they
 * map onto cuBLASLt's column-major m, n.
 *   NONE           D = P
 *   BIAS           D = P + bias[j]                (bias: N entries, D's type)
 *   GELU_AUX_BIAS  aux = P + bias[j]; D = gelu(aux)   (tanh approximation;
 *                  aux: M x N at row stride aux_ld, D's type, written)
 *   DGELU          D = P * gelu'(aux)             (aux read, as written by
 *                  GELU_AUX_BIAS: the backward of a fused linear + GELU)
 *   BGRADB         D = P; bias[i] = sum_k op(A)[i,k]  (bias: M entries,
 *                  D's type, overwritten, not accumulated): the bias
 *                  gradient of a Linear layer when op(A) = dy^T, i.e. the
 *                  weight-gradient product dW[out,in] = dy^T x. */
enum st_cuda_epilogue {
    ST_CUDA_EPI_NONE = 0,
    ST_CUDA_EPI_BIAS = 1,
    ST_CUDA_EPI_GELU_AUX_BIAS = 2,
    ST_CUDA_EPI_DGELU = 3,
    ST_CUDA_EPI_BGRADB = 4
};

/* One product D[M,N] = epilogue(op(A) op(B) + beta*C), row-major, every
 * ld a row stride in elements.  C is only read (and may be NULL) when beta
 * is 0; beta must be 0 or 1.  D is either C itself (in_place = 1: D == C
 * with ldd == ldc and d_type == c_type) or memory disjoint from A, B and
 * C (in_place = 0).  cuda/gemm_check.h lists every rule a call must meet;
 * both the cuBLASLt path and the host emulation refuse a call that breaks
 * one. */
typedef struct st_cuda_gemm_desc {
    int ab_type; /* st_cuda_dtype of A and B */
    int trans_a, trans_b;
    int64_t M, N, K;
    const void *A;
    int64_t lda;
    const void *B;
    int64_t ldb;
    float beta;
    const void *C;
    int64_t ldc;
    int c_type;
    void *D;
    int64_t ldd;
    int d_type;
    int in_place;       /* D is C (same pointer, ld and type) */
    int epilogue;       /* st_cuda_epilogue */
    void *bias;         /* BIAS, GELU_AUX_BIAS: read; BGRADB: written */
    int bias_type;      /* must be d_type (what cuBLASLt assumes) */
    int64_t bias_len;   /* N for BIAS and GELU_AUX_BIAS, M for BGRADB */
    void *aux;          /* GELU_AUX_BIAS: written; DGELU: read; type d_type */
    int64_t aux_ld;     /* row stride of aux, >= N, a multiple of 8 */
} st_cuda_gemm_desc;

/* Runs *d on stream s.  Returns cudaErrorInvalidValue with the reason on
 * stderr when the call breaks a rule of cuda/gemm_check.h, cudaErrorUnknown
 * when cuBLASLt refuses. */
cudaError_t st_cuda_gemm_ex(st_cuda_gemm_ctx *ctx, const st_cuda_gemm_desc *d,
                            cudaStream_t s);

/* C[M,N] = beta*C + op(A)[M,K] op(B)[K,N], row-major, exactly st_gemm's
 * meaning (trans flags, row strides lda/ldb/ldc, beta 0 or 1).  ab_type
 * is the type of A and B, c_type that of C; compute is always fp32
 * (CUBLAS_COMPUTE_32F: no TF32 down-conversion of fp32 inputs).  A thin
 * wrapper of st_cuda_gemm_ex with D = C in place and no epilogue, so it
 * returns what that returns (M or N of 0, once a silent no-op, now breaks
 * a rule of cuda/gemm_check.h).  Inline here, in C and C++ alike, so the
 * cuBLASLt path (gemm_lt.cu) and the host emulation
 * (tests/gpu/emu/gemm_host.cpp) share it and only implement
 * st_cuda_gemm_ex. */
static inline cudaError_t st_cuda_gemm(st_cuda_gemm_ctx *ctx, int ab_type, int c_type,
                                       int trans_a, int trans_b, int64_t M, int64_t N,
                                       int64_t K, const void *A, int64_t lda, const void *B,
                                       int64_t ldb, float beta, void *C, int64_t ldc,
                                       cudaStream_t s)
{
    st_cuda_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.ab_type = ab_type;
    d.trans_a = trans_a;
    d.trans_b = trans_b;
    d.M = M;
    d.N = N;
    d.K = K;
    d.A = A;
    d.lda = lda;
    d.B = B;
    d.ldb = ldb;
    d.beta = beta;
    d.C = C;
    d.ldc = ldc;
    d.c_type = c_type;
    d.D = C;
    d.ldd = ldc;
    d.d_type = c_type;
    d.in_place = 1;
    d.epilogue = ST_CUDA_EPI_NONE;
    return st_cuda_gemm_ex(ctx, &d, s);
}

#ifdef __cplusplus
}
#endif

#endif
