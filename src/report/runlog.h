/* What a training run leaves for people, as it goes: the progress line,
 * LOG_DIR/metrics.jsonl, and (report/summary.h) LOG_DIR/summary.json and
 * the closing lines.  The train loop decides when something happened and
 * hands the numbers here; this file decides how they are written, so the
 * loop never formats a record and every output sees the same numbers.
 *
 * Only rank 0 opens a run log.  metrics.jsonl is appended to, so a resumed
 * run continues it; after a crash (not a signal) a resumed run re-logs the
 * steps after its checkpoint, and readers drop the orphans (shardtrain(1),
 * FILES). */
#ifndef ST_RUNLOG_H
#define ST_RUNLOG_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

typedef struct st_runlog st_runlog;

/* One applied optimizer step. */
typedef struct {
    int64_t step;          /* 1-based global step just applied */
    int64_t tokens;        /* tokens trained after this step: step x global_batch x seq_len */
    double loss, lr, grad_norm, tokens_per_s;
    double mfu;            /* NaN when log.peak_tflops is 0 */
    double time_ms;        /* this step's wall time */
    size_t state_bytes, peak_bytes;
} st_step_record;

/* Open LOG_DIR's files for appending, for a run of `world` ranks.
 * resumed_from_step is the number of
 * steps a resumed run starts after (0 when fresh); t_begin is when the
 * process began its work (CLOCK_MONOTONIC seconds, st_runlog_now), so that
 * start-up counts in the wall time.  Returns 0 or an exit status after one
 * error line. */
int st_runlog_open(st_runlog **out, const st_config *cfg, int world,
                   int64_t resumed_from_step, double t_begin);

/* The training-step record; the progress line too when `print` is set
 * (the first, every log.every-th and the last step). */
void st_runlog_step(st_runlog *lg, const st_step_record *s, int print);
/* A step whose update every rank skipped (non-finite loss or norm). */
void st_runlog_skipped(st_runlog *lg, int64_t step, double lr, double bad_ranks,
                       int64_t in_a_row);
/* A validation loss and the seconds its evaluation took. */
void st_runlog_eval(st_runlog *lg, int64_t step, double val_loss, double seconds);
/* A checkpoint is about to be written: summary.json is brought up to the
 * steps it will hold, so a kill during the save leaves no older summary. */
void st_runlog_checkpoint_begin(st_runlog *lg);
/* A checkpoint of `step` completed steps written to dir, in seconds. */
void st_runlog_checkpoint(st_runlog *lg, int64_t step, const char *dir, double seconds);
/* Peak tracked memory of every rank (world entries), for the summary. */
void st_runlog_rank_peaks(st_runlog *lg, const uint64_t *peaks, int world);

/* The final weights are written and in place: the closing line names
 * them (it says they were not written otherwise). */
void st_runlog_final_weights(st_runlog *lg);

/* Finish the run's files with how it ended (its exit status), print the
 * summary lines and free lg.  Returns exit_status, or ST_EXIT_FAILURE when
 * a run that otherwise succeeded could not finish its files. */
int st_runlog_close(st_runlog *lg, int exit_status);

/* The progress line's ETA after `done` of `total` steps: the remaining
 * steps at step_s each, plus the evaluations (every eval_every steps and at
 * the last) and checkpoints (every ckpt_every steps and at the last) still
 * to come at eval_s and ckpt_s each; an interval of 0 means none. */
double st_eta_seconds(int64_t done, int64_t total, double step_s, int64_t eval_every,
                      double eval_s, int64_t ckpt_every, double ckpt_s);

/* CLOCK_MONOTONIC seconds, the clock every time above is measured on. */
double st_runlog_now(void);

#endif
