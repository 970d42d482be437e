/* Memory estimate per rank for each FSDP strategy, computed from the same
 * layout, padding, buffer sizes and unit schedule the engine uses (fsdp.c,
 * engine/schedule.h), so it can be checked against the engine's measured
 * peak_bytes. */
#ifndef ST_ESTIMATE_H
#define ST_ESTIMATE_H

#include <stdint.h>

#include "config/config.h"
#include "engine/schedule.h"
#include "model/model.h"

typedef struct {
    double params, grads, optim;  /* this rank's shards */
    double gathered;              /* peak of gathered units and their staging */
    double grad_buffers;          /* full-size gradient buffers at that peak */
    double activations;           /* one micro-batch, as allocated */
    double other;                 /* tables, token buffers */
    double peak;                  /* the high-water mark of all of the above */
} st_mem_estimate;

/* Bytes per rank for strategy on `world` ranks with shard group size S
 * (ignored unless hybrid_shard), activation_checkpointing ckpt (enum
 * st_act_ckpt) and micro-batch B; everything else from cfg. */
void st_estimate_memory(const st_model *m, const st_config *cfg, int strategy, int world,
                        int S, int ckpt, int64_t B, st_mem_estimate *out);

/* The same, with each schedule event the estimate walks appended to trace
 * (tests compare it with the events the engine executes). */
void st_estimate_memory_traced(const st_model *m, const st_config *cfg, int strategy,
                               int world, int S, int ckpt, int64_t B, st_mem_estimate *out,
                               st_sched_trace *trace);

/* Largest micro-batch whose estimated peak fits in device_bytes (0 if
 * none). */
int64_t st_estimate_max_micro_batch(const st_model *m, const st_config *cfg, int strategy,
                                    int world, int S, int ckpt, double device_bytes);

#endif
