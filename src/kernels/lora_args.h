/* What a block op is told about its LoRA adapters (kernels.h's
 * block_forward / block_backward): an interface of its own, so that the
 * adapter kernels (cpu_lora.c, the CUDA units) need nothing else of the
 * kernels table. */
#ifndef ST_LORA_ARGS_H
#define ST_LORA_ARGS_H

#include <stdint.h>

#include "model/model.h"

/* LoRA for one block call (model.h, st_model_lora); NULL when the model
 * has no adapters.  Dropout applies only when `dropout` is above 0 (the
 * engine passes 0 outside training): element (row, col) of target i's
 * input is kept as st_lora_keep says, from the run's seed, the optimizer
 * step and the row's global sample, so the mask does not depend on the
 * world size or the micro-batching. */
typedef struct {
    const void *p;           /* the block's gathered adapter buffer, of dtype pdt */
    float *g;                /* its gradient (backward), accumulated */
    int64_t layer;
    double dropout;
    uint64_t seed, step;
    int64_t first_seq;       /* global index of the micro-batch's first sequence */
} st_lora_args;

/* Whether LoRA dropout keeps input element col of row n (sequence
 * first_seq + n / T, position n % T) of target i in block `layer`. */
static inline int st_lora_keep(const st_lora_args *la, int64_t T, int target, int64_t n,
                               int64_t col, int64_t width)
{
    return st_lora_keep_at(la->seed, la->layer, target, la->step, la->first_seq, T, n, col,
                           width, la->dropout);
}

#endif
