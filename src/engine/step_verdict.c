/* The step verdict (fsdp.h, kernels/step_gate.h): whether a step's update
 * applies, decided in backend memory so that a training step never waits
 * for its device.
 *
 * Every rank must skip the same steps, so the decision needs every rank's
 * view (a replica's loss can be NaN alone).  Agreeing on the host meant
 * reading the loss and norm back at every step, a wait that empties the
 * device's queue.  Here each rank writes its record of the step next to
 * the others not yet read, a collective sums the records over the world on
 * the backend's stream, and a gate advanced from the agreed record tells
 * AdamW (fsdp.c) whether to run and at which bias-correction step.  The
 * host reads the records, the gate with them, when it logs: one read for
 * all the steps since the last.  The records stay in order, and the gate
 * holds the run of non-finite steps and the stop at the limit, so what
 * the host concludes late is what it would have concluded at once, and no
 * update applies after the stop it has not yet seen. */
#include "engine/fsdp.h"
#include "engine/fsdp_impl.h"
#include "base/alloc.h"
#include "base/log.h"

#include <string.h>

static double *record(st_fsdp *f, int i)
{
    return f->verdicts + ST_GATE_N + (size_t)i * ST_VERDICT_N;
}

/* Room for one more record: the gate and the unread records move to a
 * buffer twice the size, on the backend's queue (no wait). */
static void make_room(st_fsdp *f)
{
    if (f->verdicts && f->n_verdicts < f->verdict_cap)
        return;
    st_kernels *k = f->k;
    const int cap = f->verdict_cap ? 2 * f->verdict_cap : 16;
    double *v = k->ops->alloc(k, sizeof(double) * (size_t)(ST_GATE_N + cap * ST_VERDICT_N),
                              ST_MEM_OTHER);
    if (f->verdicts) {
        k->ops->copy(k, v, f->verdicts,
                     sizeof(double) * (size_t)(ST_GATE_N + f->n_verdicts * ST_VERDICT_N));
        k->ops->free(k, f->verdicts);
    }
    f->verdicts = v;
    f->verdict_cap = cap;
}

int st_fsdp_step_verdict(st_fsdp *f, int force_bad, int64_t limit)
{
    st_kernels *k = f->k;
    int rc = 0;
    /* A test hook wrote this rank's gradients from the host after the
     * norm was queued: the norm is mended through the host (a wait, in
     * that test only). */
    if (f->grads_from_host) {
        double norm;
        rc = st_fsdp_grad_norm(f, &norm);
    }
    if (f->norm_fresh == ST_NORM_STALE)
        st_bug("step verdict without the step's gradient norm");
    make_room(f);
    if (!f->gate_live) {
        /* Resumed runs start from the checkpoint's count, with no run of
         * skipped steps (the host's in_a_row starts at 0 too). */
        double g[ST_GATE_N] = {0};
        g[ST_GATE_T] = (double)f->opt_steps;
        k->ops->from_host(k, f->verdicts, g, sizeof g);
        f->gate_live = 1;
    }
    double *rec = record(f, f->n_verdicts);
    k->ops->step_verdict(k, rec, &f->sums[ST_FSDP_LOSS], f->n_losses, &f->sums[0], force_bad);
    f->n_losses = 0;
    /* Loss and verdict summed over every rank: each replica's micro-batches
     * are its own, and one rank's NaN must stop every rank's update. */
    if (!rc && f->groups && f->groups->world->size > 1)
        rc = st_comm_allreduce_now(f->groups->world, rec, 2, ST_DT_F64,
                                   st_desc("the step's loss and verdict", -1));
    k->ops->step_gate(k, f->verdicts, rec, limit, f->opt.adamw.beta1, f->opt.adamw.beta2);
    f->n_verdicts++;
    f->gate_open = 1;
    return rc;
}

int st_fsdp_verdicts_pending(const st_fsdp *f)
{
    return f->n_verdicts;
}

int st_fsdp_read_verdicts(st_fsdp *f, const st_fsdp_verdict **out)
{
    const int n = f->n_verdicts;
    *out = NULL;
    if (n == 0)
        return 0;
    const size_t count = ST_GATE_N + (size_t)n * ST_VERDICT_N;
    double *all = st_alloc(sizeof(double) * count, ST_MEM_OTHER);
    f->k->ops->to_host(f->k, all, f->verdicts, sizeof(double) * count);
    st_free(f->verdicts_host);
    f->verdicts_host = st_alloc(sizeof(st_fsdp_verdict) * (size_t)n, ST_MEM_OTHER);
    for (int i = 0; i < n; i++) {
        const double *r = all + ST_GATE_N + (size_t)i * ST_VERDICT_N;
        f->verdicts_host[i] = (st_fsdp_verdict){r[ST_VERDICT_LOSS], r[ST_VERDICT_BAD],
                                                r[ST_VERDICT_SUMSQ],
                                                r[ST_VERDICT_APPLIED] != 0.0};
    }
    f->opt_steps = (int64_t)all[ST_GATE_T];
    st_free(all);
    f->n_verdicts = 0;
    *out = f->verdicts_host;
    return n;
}
