/* The step's verdict and AdamW's gate, decided where the shards live.
 *
 * Whether a training step's update applies (its loss and gradient norm
 * finite on every rank, and the run not stopped by train.nonfinite_limit)
 * used to be decided on the host, which made every step wait for the
 * device.  Here it is data in backend memory instead: each step leaves a
 * record (its loss sum, how many ranks found it non-finite, the gradient's
 * sum of squares, whether it applied), the records' first two fields are
 * summed over the ranks by a collective on the backend's own stream, and
 * a gate (AdamW's step counter, the run of skipped steps, the stop, this
 * step's apply flag and its bias corrections) is advanced from the agreed
 * record.  AdamW reads the gate where it runs; the host reads the records
 * only when it logs (engine/step_verdict.c).
 *
 * The arithmetic is inline and host/device, like base/rng.h's hash, so the
 * CPU backend and cuda/adamw.cu's one-thread kernels run this same text:
 * the same doubles on both. */
#ifndef ST_STEP_GATE_H
#define ST_STEP_GATE_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define ST_GATE_HD __host__ __device__
#else
#define ST_GATE_HD
#endif

/* One step's record, ST_VERDICT_N doubles.  LOSS and BAD are summed over
 * every rank (the loss sums of all micro-batches, the count of ranks whose
 * step was not finite); SUMSQ is the gradient's global sum of squares,
 * the same on every rank; APPLIED is 1 when the gate let the update run. */
enum { ST_VERDICT_LOSS, ST_VERDICT_BAD, ST_VERDICT_SUMSQ, ST_VERDICT_APPLIED, ST_VERDICT_N };

/* The gate, ST_GATE_N doubles (integers held exactly below 2^53):
 * T, the 1-based bias-correction step of the update that applies (applied
 * updates so far); RUN, non-finite steps in a row; STOPPED, 1 once RUN
 * reached the limit (no update applies after it, so the state stays the
 * one the stop's checkpoint saves); APPLY, this step's decision; C1 and C2,
 * 1 - beta1^T and 1 - beta2^T rounded to fp32, for a device AdamW that
 * takes its bias corrections from here rather than from the host. */
enum { ST_GATE_T, ST_GATE_RUN, ST_GATE_STOPPED, ST_GATE_APPLY, ST_GATE_C1, ST_GATE_C2,
       ST_GATE_N };

/* This rank's record of the step: the micro-batches' loss sums added in
 * order from 0 (the order the host used to add them in), non-finite when
 * force_bad (a batch with no trained target: nothing to average). */
static inline ST_GATE_HD void st_verdict_local(double *rec, const double *losses, int n_losses,
                                               const double *sumsq, int force_bad)
{
    double loss = 0.0;
    for (int i = 0; i < n_losses; i++)
        loss += losses[i];
    if (force_bad)
        loss = NAN;
    rec[ST_VERDICT_LOSS] = loss;
    rec[ST_VERDICT_BAD] = isfinite(loss) && isfinite(*sumsq) ? 0.0 : 1.0;
    rec[ST_VERDICT_SUMSQ] = *sumsq;
    rec[ST_VERDICT_APPLIED] = 0.0;
}

/* Advance the gate by the agreed record (every rank holds the same record,
 * so every gate takes the same path).  limit: train.nonfinite_limit (0:
 * none). */
static inline ST_GATE_HD void st_verdict_gate(double *gate, double *rec, int64_t limit,
                                              double beta1, double beta2)
{
    const int bad = !(rec[ST_VERDICT_BAD] == 0.0);
    gate[ST_GATE_RUN] = bad ? gate[ST_GATE_RUN] + 1.0 : 0.0;
    if (limit > 0 && gate[ST_GATE_RUN] >= (double)limit)
        gate[ST_GATE_STOPPED] = 1.0;
    const double apply = !bad && gate[ST_GATE_STOPPED] == 0.0 ? 1.0 : 0.0;
    gate[ST_GATE_APPLY] = apply;
    gate[ST_GATE_T] += apply;
    gate[ST_GATE_C1] = (double)(float)(1.0 - pow(beta1, gate[ST_GATE_T]));
    gate[ST_GATE_C2] = (double)(float)(1.0 - pow(beta2, gate[ST_GATE_T]));
    rec[ST_VERDICT_APPLIED] = apply;
}

#endif
