/* Reading a run's LOG_DIR/metrics.jsonl back (for the plot; anything that
 * looks at a finished or running job can use it).  Three kinds of record
 * are kept - applied steps, evaluations and skipped non-finite steps - and
 * any other JSON object is passed over, so newer logs still read.
 *
 * A run resumed after a crash appends to the same file and logs again the
 * steps after its checkpoint, so TensorBoard's rule applies to each kind
 * on its own: a record whose step is not greater than the previous
 * record's of its kind makes every earlier record of that kind with a step
 * at or after it an orphan, dropped.  What is left is in increasing step
 * order, each step once. */
#ifndef ST_METRICS_READ_H
#define ST_METRICS_READ_H

#include <stdint.h>

typedef struct {
    int64_t step;         /* 1-based */
    int64_t tokens;       /* cumulative tokens trained; -1 when the log predates them */
    double loss, lr, tokens_per_s; /* NaN when not known (null) */
    double mfu;
} st_metrics_step;

typedef struct {
    int64_t step;
    double val_loss;
} st_metrics_eval;

typedef struct {
    st_metrics_step *steps;
    int64_t n_steps;
    st_metrics_eval *evals;
    int64_t n_evals;
    int64_t *skipped;     /* steps skipped as non-finite */
    int64_t n_skipped;
    int64_t n_orphans;    /* records dropped by the rule above */
} st_metrics;

/* Read path into *m (zeroed first).  Returns 0; or, after one error line,
 * ST_EXIT_USAGE for a file that is missing or not metrics (naming
 * PATH:LINE for a bad line) and ST_EXIT_FAILURE for a read error or no
 * memory.  *m is empty after a failure. */
int st_metrics_read(const char *path, st_metrics *m);

void st_metrics_free(st_metrics *m);

#endif
