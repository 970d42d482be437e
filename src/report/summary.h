/* The run summary: what a user wants to know after a batch job, in
 * LOG_DIR/summary.json and the last lines a run prints.
 *
 * A run that is preempted, requeued or resumed is several processes (its
 * segments) writing to one log directory.  Each segment reads the
 * summary.json the previous one left, carries its totals forward, and
 * rewrites the file at every checkpoint and at its end, so the file always
 * describes the whole run up to its last checkpoint or exit.  A segment
 * that died without a word (SIGKILL, a node failure) leaves
 * "status": "running"; the next segment counts it as a restart. */
#ifndef ST_SUMMARY_H
#define ST_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    /* Whole-run totals, carried across segments. */
    int segments;                  /* processes that ran this log directory */
    double wall_s;                 /* wall time of all segments */
    double ckpt_s, eval_s;         /* of which writing checkpoints, evaluating */
    double restart_s;              /* lost to restarts: start-up and redone steps */
    double train_s;                /* in training steps (the tokens/s mean) */
    int64_t train_tokens;          /* tokens those steps trained, redone ones included */
    int have_val;
    double best_val, final_val;
    int64_t best_val_step, final_val_step;
    char last_ckpt[4096];          /* "" when none was written */
    /* As of the latest step. */
    int64_t steps_done, steps_total, tokens_done;
    int have_step;
    double final_tok_s, final_mfu; /* final_mfu NaN when unknown */
    double mfu_per_tok_s;          /* MFU of 1 token/s; NaN when unknown */
    /* This segment's. */
    int world;
    uint64_t *rank_peaks;          /* [world], or NULL: rank 0's only */
    uint64_t rank0_peak;
} st_run_summary;

/* Start s for a segment that resumes after `resumed_from_step` steps
 * (0: a fresh run), carrying the totals of the summary.json at path when
 * there is one.  A summary of another run (more steps done than the
 * checkpoint resumed from, none at all, a fresh start) is not carried:
 * only what is still true of this run is. */
void st_summary_begin(st_run_summary *s, const char *path, int64_t resumed_from_step,
                      int64_t steps_total);
/* Write s to path atomically, with status "running", "completed",
 * "preempted" or "failed" and the exit status.  Returns 0, or -1 with
 * errno after one error line. */
int st_summary_write(const st_run_summary *s, const char *path, const char *status,
                     int exit_status, int requeue);
/* The closing lines on stdout (rank 0). */
void st_summary_print(const st_run_summary *s, const char *status, int exit_status);
/* "completed", "preempted" or "failed" for an exit status. */
const char *st_summary_status(int exit_status);

#endif
