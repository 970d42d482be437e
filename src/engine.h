/* The training engine: owns parameters, gradients, optimizer state and
 * activations, and drives the model unit by unit.
 *
 * It is written around units so that the FSDP engine (distributed issue)
 * can put a gather before and a reduce-scatter after each unit without
 * changing the model or the train loop.  In this release it runs one rank,
 * where every strategy degenerates to the same thing: a shard group of one
 * holds the whole flat buffer of every unit. */
#ifndef ST_ENGINE_H
#define ST_ENGINE_H

#include <stdint.h>

#include "config.h"
#include "model.h"

typedef struct {
    const st_model *model;
    const st_config *cfg;
    int64_t B;               /* sequences per micro-batch */
    int n_units;
    float **params;          /* fp32 master parameters, per unit */
    float **work;            /* what the kernels read: params, or their bf16 rounding */
    float **grads;
    float **adam_m, **adam_v;
    float *res;              /* residual stream: n_layer + 1 buffers of [B*T, C] */
    float *acts;             /* block activations: n_layer sets, or one when recomputing */
    float *scratch;
    float *dres_a, *dres_b;  /* gradient of the residual stream, ping-pong */
    int64_t opt_steps;       /* optimizer steps taken (AdamW's t) */
} st_engine;

/* Allocate everything and initialise the parameters (random from the seed,
 * or from model.init's weights file).  Returns an exit status. */
int st_engine_create(st_engine *e, const st_model *m, const st_config *cfg);
void st_engine_destroy(st_engine *e);

void st_engine_zero_grads(st_engine *e);
/* Forward and backward of one micro-batch of e->B sequences; gradients
 * are accumulated with grad_scale applied to dLoss/dlogits.  Returns the
 * summed loss over the B*T tokens. */
double st_engine_forward_backward(st_engine *e, const int32_t *inputs,
                                  const int32_t *targets, float grad_scale);
/* Forward only: summed loss; logits_out [B*T, V] when not NULL. */
double st_engine_forward(st_engine *e, const int32_t *inputs,
                         const int32_t *targets, float *logits_out);
/* L2 norm of all gradients, each parameter counted once. */
double st_engine_grad_norm(const st_engine *e);
/* AdamW on every parameter with the gradients multiplied by grad_scale. */
void st_engine_optimizer_step(st_engine *e, double lr, double grad_scale);
/* Re-derive the compute copy from the master parameters (after loading). */
void st_engine_refresh_work(st_engine *e);

#endif
