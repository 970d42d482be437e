/* The training loop: batches, gradient accumulation, clipping, the
 * schedule, evaluation, progress lines and metrics.jsonl. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H

#include "config/config.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"

/* Train as configured.  Returns an exit status (see shardtrain(1)). */
int st_train(const st_config *cfg, st_runtime *rt);

/* Shared by train and sample before any work: binds this rank's device
 * from train.device (rt->device; every rank agrees on the outcome) and
 * returns the kernels backend for it in *k, which the caller ends with
 * st_kernels_close.  Several ranks may share one
 * GPU only with parallel.backend = mpi, whose collectives stage through
 * host memory.  Returns an exit status. */
int st_train_check_environment(const st_config *cfg, st_runtime *rt, st_kernels **k);

/* Where the final weights of a run are written. */
void st_final_weights_path(const st_config *cfg, char *buf, size_t n);

#endif
