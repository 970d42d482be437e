/* LoRA adapters on the CPU backend: the low-rank update a targeted layer
 * adds to its output, y += scale * (dropout(x) A^T) B^T, and its backward
 * (model.h, st_model_lora; kernels.h, st_lora_args).  The block
 * (cpu_model.c) calls these beside each targeted layer; they keep nothing
 * between forward and backward: the backward recomputes x A^T (rank
 * columns, a few percent of the layer's own product) and the dropout mask
 * (a hash), so the saved activations stay what estimate.c sizes. */
#ifndef ST_CPU_LORA_H
#define ST_CPU_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/lora_args.h"
#include "model/model.h"

/* Whether target i of the block has an adapter in this call. */
static inline int st_lora_on(const st_model *m, const st_lora_args *la, int i)
{
    return la && m->lora.a_off[i] >= 0;
}

/* Scratch floats the adapters need for B sequences, beyond the block's. */
size_t st_lora_scratch_floats(const st_model *m, int64_t B);

/* y[N, out] (row stride ldy) += the adapter's update of target i for
 * input x[N, in] (row stride ldx).  p is the block's adapter buffer. */
void st_lora_forward(const st_model *m, const st_lora_args *la, const float *p, int i,
                     int64_t B, const float *x, int64_t ldx, float *y, int64_t ldy,
                     float *scratch);
/* Gradients of A and B into g (accumulated), and dx[N, in] (row stride
 * ldx) += the input's gradient through the adapter, for the output
 * gradient dy (row stride lddy). */
void st_lora_backward(const st_model *m, const st_lora_args *la, const float *p, float *g,
                      int i, int64_t B, const float *x, int64_t ldx, const float *dy,
                      int64_t lddy, float *dx, int64_t lddx, float *scratch);

#endif
