/* The CPU kernels backend: forward and backward of every op the two
 * architectures use, in plain C with fp32 accumulation and OpenMP over
 * independent rows.  This backend is the numerical reference that every
 * other backend is checked against, so each kernel favours an obvious,
 * deterministic summation order over speed: every output element is summed
 * by one thread in a fixed order, so results do not depend on the number of
 * threads.
 *
 * Shapes: N = rows (batch x time), C = channels.  Row-major throughout.
 * The matrix product is cpu_gemm.h. */
#ifndef ST_CPU_OPS_H
#define ST_CPU_OPS_H

#include <stdint.h>

#include "base/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[n,:] += bias; dbias[:] += sum_n dout[n,:] */
void st_add_bias(float *out, const float *bias, int64_t N, int64_t C);
void st_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C);

/* LayerNorm with biased variance; saves mean and rstd per row. */
void st_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int64_t N, int64_t C,
                          float eps);
/* dx += ...; dw += ...; db += ... */
void st_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                           const float *x, const float *w, const float *mean,
                           const float *rstd, int64_t N, int64_t C);

void st_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w,
                        int64_t N, int64_t C, float eps);
void st_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                         const float *w, const float *rstd, int64_t N, int64_t C);

/* GELU, tanh approximation. dx = gelu'(x) * dout (overwrites dx). */
void st_gelu_forward(float *out, const float *x, int64_t n);
void st_gelu_backward(float *dx, const float *x, const float *dout, int64_t n);

/* SwiGLU over rows laid out as gate | up (width 2F):
 * out[n, i] = silu(gate[n, i]) * up[n, i].  d_gate_up is overwritten. */
void st_swiglu_forward(float *out, const float *gate_up, int64_t N, int64_t F);
void st_swiglu_backward(float *d_gate_up, const float *gate_up,
                        const float *dout, int64_t N, int64_t F);

/* RoPE (Hugging Face Llama's rotate_half pairing: i with i + hd/2) applied
 * in place to n_heads heads of hd channels at the start of each row of x
 * (row stride ld), positions t = row % T.  cos/sin tables are [T, hd/2].
 * inverse = 1 rotates by -angle (the backward of the forward rotation).
 * The tables come from st_rope_tables (model/model.h). */
void st_rope_apply(float *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                   int64_t hd, const float *cos_t, const float *sin_t, int inverse);

/* Causal scaled-dot-product attention with grouped-query heads.
 * q: [B*T rows, H*hd] at row stride ldq; k, v: [B*T, KV*hd] at ldk/ldv;
 * out: [B*T, H*hd] at stride ldo; lse: [B, H, T] log-sum-exp of each
 * score row, saved so backward can rebuild the probabilities without ever
 * storing the T x T matrix. */
void st_attention_forward(float *out, int64_t ldo, float *lse,
                          const float *q, int64_t ldq, const float *k, int64_t ldk,
                          const float *v, int64_t ldv,
                          int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd);
/* dq, dk, dv overwritten. */
void st_attention_backward(float *dq, int64_t lddq, float *dk, int64_t lddk,
                           float *dv, int64_t lddv, const float *dout, int64_t lddo,
                           const float *out, int64_t ldo, const float *lse,
                           const float *q, int64_t ldq, const float *k, int64_t ldk,
                           const float *v, int64_t ldv,
                           int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd);

/* Softmax cross-entropy over rows of logits [N, V], in place: returns the
 * sum of the N losses (in double) and, when grad_scale != 0, overwrites
 * logits with (softmax - onehot) * grad_scale.  A negative target marks a
 * position that does not count (PyTorch's ignore_index): its loss is 0 and
 * its row of the gradient is 0. */
double st_softmax_xent(float *logits, const int32_t *targets, int64_t N,
                       int64_t V, float grad_scale);

/* y[i] += x[i] */
void st_add_inplace(float *y, const float *x, int64_t n);
/* The bf16 conversions (st_round_bf16, st_pack_bf16, st_unpack_bf16) are
 * base/dtype.h's, included here for the kernels that use them. */

#ifdef __cplusplus
}
#endif

#endif
