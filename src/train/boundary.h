/* The train loop's step boundary: when a checkpoint is written (every
 * checkpoint.every steps, at the last step, on a preemption signal, before
 * a stop for non-finite steps) and which exit status ends the run.  ckpt/
 * only writes and reads checkpoints; the decisions are here. */
#ifndef ST_BOUNDARY_H
#define ST_BOUNDARY_H

#include <stdint.h>

#include "config/config.h"
#include "engine/fsdp.h"
#include "report/runlog.h"
#include "runtime/runtime.h"

/* After `done` completed steps: the periodic save (every checkpoint.every
 * steps and at the last step, when checkpoint.every > 0), then the
 * preemption check, one all-reduce of the signal flag so that every rank
 * decides the same; when a signal came, a checkpoint of this step, the
 * Slurm requeue (rank 0, checkpoint.requeue) and ST_EXIT_PREEMPTED.
 * Collective.  Checkpoints are reported to lg (rank 0's run log; NULL on
 * the other ranks).  before_save(ctx) runs before either save (the train
 * loop reads the steps' verdicts there, so the checkpoint's optimizer step
 * count and the run log are current); its non-zero status is returned
 * instead of saving.  Returns 0 to go on, or an exit status. */
int st_train_boundary(st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t done,
                      st_runlog *lg, int (*before_save)(void *ctx), void *ctx);

/* The one place a run stops for non-finite steps: after step1, the
 * in_a_row-th skipped step in a row, writes a checkpoint of the last good
 * state and prints the error line.  The decision is agreed, so every rank
 * calls it after the same step.  Collective; returns ST_EXIT_NONFINITE. */
int st_train_stop_nonfinite(st_fsdp *f, const st_config *cfg, const st_runtime *rt,
                            int64_t step1, int64_t in_a_row, st_runlog *lg);

#endif
