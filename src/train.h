/* The training loop: batches, gradient accumulation, clipping, the
 * schedule, evaluation, progress lines and metrics.jsonl. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H

#include "config.h"
#include "kernels.h"
#include "runtime.h"

/* Train as configured.  Returns an exit status (see shardtrain(1)). */
int st_train(const st_config *cfg, st_runtime *rt);

/* Checks shared by train and sample before any work: train.device has a
 * kernels backend in this build, returned in *k.  Returns an exit
 * status. */
int st_train_check_environment(const st_config *cfg, const st_runtime *rt,
                               const st_kernels **k);

/* Where the final weights of a run are written. */
void st_final_weights_path(const st_config *cfg, char *buf, size_t n);

#endif
