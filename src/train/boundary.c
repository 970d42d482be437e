/* The step-boundary policy (see boundary.h): the loop asks here after
 * every step whether to save and whether to stop. */
#include "train/boundary.h"
#include "base/log.h"
#include "base/test_faults.h"
#include "ckpt/checkpoint.h"
#include "report/runlog.h"
#include "runtime/requeue.h"
#include "runtime/signals.h"

#include <stdio.h>

/* st_ckpt_save, timed and reported to the run log (rank 0's; NULL on the
 * other ranks). */
static int save_checkpoint(st_fsdp *f, const st_config *cfg, const st_runtime *rt,
                           int64_t done, st_runlog *lg)
{
    if (lg)
        st_runlog_checkpoint_begin(lg);
    const double t0 = st_runlog_now();
    int rc = st_ckpt_save(f, cfg, rt, done);
    if (!rc)
        st_fault_at("ckpt_done", rt->rank);
    if (!rc && lg) {
        char dir[4200];
        st_ckpt_step_dir(cfg->checkpoint.dir, done, dir, sizeof dir);
        st_runlog_checkpoint(lg, done, dir, st_runlog_now() - t0);
    }
    return rc;
}

int st_train_boundary(st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t done,
                      st_runlog *lg, int (*before_save)(void *ctx), void *ctx)
{
    const int last = done >= cfg->train.steps;
    const int64_t every = cfg->checkpoint.every;
    int saved = 0, rc = 0;
    if (every > 0 && (done % every == 0 || last)) {
        if ((rc = before_save(ctx)) || (rc = save_checkpoint(f, cfg, rt, done, lg)))
            return rc;
        saved = 1;
    }
    /* At the last step the run is finishing anyway. */
    if (last)
        return 0;
    int sig = st_runtime_agree(st_signals_pending());
    if (!sig)
        return 0;
    st_signals_stopping();
    if (!saved && ((rc = before_save(ctx)) || (rc = save_checkpoint(f, cfg, rt, done, lg))))
        return rc;
    st_warn("rank %d: %s received; checkpoint of step %lld written, exiting with status %d "
            "(resume with checkpoint.resume = auto)", rt->rank, st_signal_name(sig),
            (long long)done, ST_EXIT_PREEMPTED);
    if (cfg->checkpoint.requeue && rt->rank == 0)
        st_slurm_requeue();
    return ST_EXIT_PREEMPTED;
}

int st_train_stop_nonfinite(st_fsdp *f, const st_config *cfg, const st_runtime *rt,
                            int64_t step1, int64_t in_a_row, st_runlog *lg)
{
    /* The skipped steps left parameters and moments untouched, so this
     * checkpoint holds the last good state: nothing is lost, and a rerun
     * with a lower learning rate resumes from it. */
    int saved = save_checkpoint(f, cfg, rt, step1, lg);
    char where[32];
    snprintf(where, sizeof where, "rank %d", rt->rank);
    st_error(where, "steps %lld-%lld: %lld steps in a row had a non-finite loss or gradient "
             "norm and were skipped (train.nonfinite_limit = %lld); stopping; hint: lower "
             "optim.lr, set train.grad_clip, or check the data and model.init",
             (long long)(step1 - in_a_row + 1), (long long)step1, (long long)in_a_row,
             (long long)cfg->train.nonfinite_limit);
    if (saved)
        st_warn("the checkpoint at step %lld could not be written", (long long)step1);
    return ST_EXIT_NONFINITE;
}
