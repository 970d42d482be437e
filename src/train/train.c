/* The training loop (see train.h).  One step = accumulate gradients over
 * global_batch / (micro_batch x data-parallel ranks) micro-batches, clip by
 * the global norm, one AdamW update, unless any rank's loss or norm is not
 * finite: then every rank skips the update (shardtrain(1), FAULTS).
 * Sample j of global step k is the window the dataset picks for (seed, k,
 * j), so the data a step sees does not depend on how the batch is split.
 *
 * st_train reads as its phases: train_check (input errors, before any
 * work), train_setup, train_step for each step (which logs, evaluates and
 * asks train/boundary.c whether to checkpoint or stop), the final weights
 * and train_teardown.  The phases share one train_run. */
#include "train/train.h"
#include "kernels/kernels_select.h"
#include "train/preflight.h"
#include "base/alloc.h"
#include "base/test_faults.h"
#include "ckpt/checkpoint.h"
#include "data/data.h"
#include "hf/hf_export.h"
#include "hf/lora_files.h"
#include "comm/comm.h"
#include "runtime/device.h"
#include "engine/fsdp.h"
#include "train/engine_setup.h"
#include "comm/groups.h"
#include "base/log.h"
#include "model/model.h"
#include "engine/lr_schedule.h"
#include "base/files.h"
#include "base/stage_dir.h"
#include "hf/safetensors_write.h"
#include "runtime/signals.h"
#include "train/boundary.h"
#include "config/origin.h"
#include "report/runlog.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int st_train_check_environment(const st_config *cfg, st_runtime *rt, st_kernels **k)
{
    const int shared_ok = cfg->parallel.backend == ST_BACKEND_MPI;
    int rc = st_runtime_agree(st_device_bind(rt, cfg, shared_ok));
    return rc ? rc : st_runtime_agree(st_kernels_for_device(cfg, rt->device, k));
}

void st_final_weights_path(const st_config *cfg, char *buf, size_t n)
{
    snprintf(buf, n, "%s/final/model.safetensors", cfg->checkpoint.dir);
}

/* What the phases of one run share.  Zero-initialised, so that the
 * teardown releases exactly what the setup got as far as making. */
typedef struct {
    const st_config *cfg;
    st_runtime *rt;
    st_kernels *kernels;
    int rank, dp;           /* dp: data-parallel ranks, the whole world */
    int64_t B, T, accum;    /* micro-batch, sequence length, micro-batches a step */
    st_groups groups;
    st_dataset train_ds, val_ds;
    int data_open;
    st_model model;
    st_fsdp fsdp;
    st_runlog *log;         /* rank 0 only */
    int32_t *window, *inputs, *targets;
    uint8_t *counts;        /* the window's loss mask (data/data.h) */
    int64_t start;          /* steps done before this run (resumed) */
    double t_begin, t_start, flops_tok; /* t_begin: st_train's start */
    float grad_scale;       /* of plain text; instruction data's is per step */
    int64_t in_a_row;       /* consecutive skipped steps */
    /* Steps whose verdict the device holds and the host has not read
     * (st_fsdp_step_verdict): what their records need besides it. */
    struct pending_step {
        int64_t step, targets;
        double lr, t0;
    } *pending;
    int n_pending, pending_cap;
} train_run;

/* Steps the device may hold unread: a bound on the verdict buffer for
 * runs that log rarely (one host wait per this many steps costs nothing). */
#define ST_TRAIN_MAX_PENDING 1024

/* ---- before any work -------------------------------------------------- */

/* Bad input, found identically on every rank, is one error line and exit
 * status 2 before anything is allocated (the rules are preflight.c's,
 * which `shardtrain check --inputs` applies too). */
static int train_check(train_run *r)
{
    const st_config *cfg = r->cfg;
    int rc = st_train_check_environment(cfg, r->rt, &r->kernels);
    if (rc)
        return rc;
    r->dp = r->rt->world;
    r->rank = r->rt->rank;
    r->B = cfg->train.micro_batch;
    r->T = cfg->model.seq_len;
    r->accum = cfg->train.global_batch / (r->B * r->dp);
    rc = st_preflight_config(cfg, r->dp);
    return rc ? rc : st_fault_load_poisoned_steps();
}

/* ---- setup and teardown ----------------------------------------------- */

static int open_data(const st_config *cfg, st_dataset *train_ds, st_dataset *val_ds)
{
    const char *file;
    int line;
    const int64_t T = cfg->model.seq_len, V = cfg->model.vocab_size;
    st_config_origin_of(cfg, "data", "train", &file, &line);
    int rc = st_dataset_open(train_ds, cfg->data.train, T, V, file, line);
    if (rc || !cfg->data.val[0])
        return rc;
    st_config_origin_of(cfg, "data", "val", &file, &line);
    rc = st_dataset_open(val_ds, cfg->data.val, T, V, file, line);
    if (rc)
        st_dataset_close(train_ds);
    return rc;
}

static void log_run_summary(const train_run *r)
{
    const st_config *cfg = r->cfg;
    st_info("shardtrain: %s, %lld parameters, %d units, %lld tokens in %d train file(s)",
            cfg->model.arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
            (long long)r->model.n_params, r->model.n_units, (long long)r->train_ds.n_tokens,
            r->train_ds.n_files);
    st_info("shardtrain: %s over %d rank(s) (shard group %d x replicate group %d); global "
            "batch %lld x %lld tokens = %lld micro-batch(es) of %lld per rank; %lld steps",
            st_enum_name("parallel", "strategy", cfg->parallel.strategy), r->dp,
            r->groups.layout.shard_size, r->groups.layout.replicate_size,
            (long long)cfg->train.global_batch, (long long)r->T, (long long)r->accum,
            (long long)r->B, (long long)cfg->train.steps);
}

/* The output directories are made and written to before any work, so an
 * unwritable one is one error at its configuration line, not a failure at
 * the first checkpoint after hours of training; so is a special file
 * where a checkpoint would go (before the resume, whose walk would try it
 * as a checkpoint). */
static int check_output_dirs(const st_config *cfg)
{
    const struct { const char *sec, *key, *dir; } d[2] = {
        {"log", "dir", cfg->log.dir}, {"checkpoint", "dir", cfg->checkpoint.dir}};
    for (int i = 0; i < 2; i++) {
        int err = st_dir_writable(d[i].dir);
        if (err)
            return st_preflight_output_dir_error(cfg, d[i].sec, d[i].key, d[i].dir, err);
    }
    int rc = st_preflight_final_dir(cfg);
    return rc ? rc : st_ckpt_refuse_special(cfg->checkpoint.dir);
}

/* After st_groups_create: data, model, engine, run log, signals and
 * the resumed state.  Every rank returns the same status. */
static int train_setup(train_run *r)
{
    const st_config *cfg = r->cfg;
    int rc = open_data(cfg, &r->train_ds, &r->val_ds);
    r->data_open = rc == 0;
    rc = rc ? rc : st_model_init(&r->model, &cfg->model);
    rc = rc ? rc : st_model_add_lora(&r->model, &cfg->lora);
    rc = rc ? rc : st_engine_open(&r->fsdp, &r->model, cfg, &r->groups, r->kernels);
    if (!rc && r->rank == 0)
        rc = check_output_dirs(cfg);
    if ((rc = st_runtime_agree(rc)))
        return rc;
    if ((rc = st_ckpt_resume(&r->fsdp, cfg, r->rt, &r->start)))
        return rc;
    if (r->rank == 0) {
        st_preflight_room(cfg, &r->model, r->start, NULL);   /* a warning at most */
        rc = st_runlog_open(&r->log, cfg, r->dp, r->start, r->t_begin);
    }
    if ((rc = st_runtime_agree(rc)))
        return rc;
    /* After the checks, so that bad input stays a single error line. */
    char sh[128], rep[128];
    st_groups_describe(&r->groups, sh, rep, sizeof sh);
    st_runtime_log_identity(r->rt, sh, rep);
    r->window = st_alloc(sizeof(int32_t) * (size_t)(r->T + 1), ST_MEM_OTHER);
    r->counts = st_alloc((size_t)(r->T + 1), ST_MEM_OTHER);
    r->inputs = st_alloc(sizeof(int32_t) * (size_t)(r->B * r->T), ST_MEM_ACTS);
    r->targets = st_alloc(sizeof(int32_t) * (size_t)(r->B * r->T), ST_MEM_ACTS);
    r->flops_tok = st_model_flops_per_token(&r->model);
    log_run_summary(r);
    r->t_start = st_runlog_now();
    r->grad_scale = (float)(1.0 / (double)(r->B * r->T * r->accum * r->dp));
    st_fault_pause("setup");
    /* Until here a signal ended the process at once (runtime/signals.h);
     * from here the step boundary checkpoints and stops. */
    st_signals_defer();
    st_fault_pause("deferred");
    return 0;
}

/* Every rank's peak memory to rank 0's run log.  Only when every rank
 * agreed on how the run ends (completed or preempted): after a failure a
 * rank may be gone, and the gather would wait for it. */
static void report_rank_peaks(train_run *r, int rc)
{
    if (rc != ST_EXIT_OK && rc != ST_EXIT_PREEMPTED)
        return;
    unsigned long long mine = st_mem_peak();
    unsigned long long *all = r->rank == 0 ? st_alloc(sizeof *all * (size_t)r->dp,
                                                      ST_MEM_OTHER) : NULL;
    if (st_runtime_gather_u64(&mine, all, 1) == 0 && r->log) {
        uint64_t *peaks = st_alloc(sizeof *peaks * (size_t)r->dp, ST_MEM_OTHER);
        for (int i = 0; i < r->dp; i++)
            peaks[i] = all[i];
        st_runlog_rank_peaks(r->log, peaks, r->dp);
        st_free(peaks);
    }
    st_free(all);
}

/* Releases what train_setup made; the run log's summary records how the
 * run ended, and a failure to finish its files becomes the status of a
 * run that otherwise succeeded. */
static int train_teardown(train_run *r, int rc)
{
    report_rank_peaks(r, rc);
    rc = st_runlog_close(r->log, rc);
    st_free(r->window);
    st_free(r->pending);
    st_free(r->counts);
    st_free(r->inputs);
    st_free(r->targets);
    st_fsdp_destroy(&r->fsdp);
    if (r->model.units)
        st_model_free(&r->model);
    if (r->data_open) {
        st_dataset_close(&r->train_ds);
        if (r->cfg->data.val[0])
            st_dataset_close(&r->val_ds);
    }
    st_groups_destroy(&r->groups);
    st_kernels_close(r->kernels);
    return rc;
}

/* ---- one step --------------------------------------------------------- */

/* Row b of the batch from r->window and r->counts: a target that does not
 * count (a prompt token, padding) is -1, which the loss ignores. */
static void set_batch_row(train_run *r, int64_t b)
{
    const int64_t T = r->T;
    memcpy(r->inputs + b * T, r->window, sizeof(int32_t) * (size_t)T);
    for (int64_t t = 0; t < T; t++)
        r->targets[b * T + t] = r->counts[t + 1] ? r->window[t + 1] : -1;
}

/* Windows for micro-batch `micro` of this rank: sample j = (micro x dp +
 * rank) x B + b of the global batch. */
static void fill_train_batch(train_run *r, int64_t step, int64_t micro)
{
    for (int64_t b = 0; b < r->B; b++) {
        int64_t j = (micro * r->dp + r->rank) * r->B + b;
        st_dataset_train_sample(&r->train_ds, (uint64_t)r->cfg->train.seed, step, j,
                                r->window, r->counts);
        set_batch_row(r, b);
    }
}

/* The targets that count in step's global batch: all of plain text; of
 * instruction data, the completions', which every rank counts from the
 * data alone (no collective), so the loss and the gradient are means over
 * the same positions whatever the world size or micro-batching. */
static int64_t step_targets(const train_run *r, int64_t step)
{
    const int64_t batch = r->cfg->train.global_batch;
    if (!r->train_ds.masked)
        return batch * r->T;
    int64_t n = 0;
    for (int64_t j = 0; j < batch; j++)
        n += st_dataset_train_targets(&r->train_ds, (uint64_t)r->cfg->train.seed, step, j);
    return n;
}

/* The step every collective of this rank names if it never completes. */
static void set_comm_step(st_groups *g, int64_t step1)
{
    st_comm *cs[4] = {g->host_world, g->world, g->shard, g->replicate};
    for (int i = 0; i < 4; i++)
        if (cs[i])
            cs[i]->step = step1;
    st_runtime_set_step(step1);
}

/* Forward and backward over this rank's micro-batches of step (0-based);
 * *loss_sum is the summed token loss over `targets` positions that count
 * in the global batch. */
static int accumulate_gradients(train_run *r, int64_t step, int64_t targets)
{
    set_comm_step(&r->groups, step + 1);
    st_fsdp_zero_grads(&r->fsdp);
    int rc = 0;
    /* A step of instruction data whose batch holds no completion token
     * has no mean: train_step makes its loss NaN, so it is skipped. */
    const float scale = !r->train_ds.masked ? r->grad_scale
                        : targets > 0 ? (float)(1.0 / (double)targets) : 0.0f;
    for (int64_t micro = 0; micro < r->accum && !rc; micro++) {
        fill_train_batch(r, step, micro);
        /* LoRA's dropout mask follows the samples (fill_train_batch's j). */
        st_fsdp_set_sample(&r->fsdp, (uint64_t)r->cfg->train.seed, (uint64_t)step,
                           (micro * r->dp + r->rank) * r->B);
        /* The loss stays on the device, for the step verdict. */
        rc = st_fsdp_forward_backward(&r->fsdp, r->inputs, r->targets, scale,
                                      micro == r->accum - 1, NULL);
    }
    /* Testing aid (base/test_faults.h): the last rank only, so the others
     * learn of the NaN only through the agreement. */
    if (!rc && r->rank == r->dp - 1 && st_fault_poisoned_step(step + 1)) {
        const float nan = NAN;
        /* The first unit that trains (with LoRA, the first block). */
        int u = 0;
        while (!r->fsdp.units[u].shard)
            u++;
        st_fsdp_shard_from_host(&r->fsdp, u, ST_FSDP_GRADS, 0, 1, &nan);
    }
    return rc;
}

/* The run log's record of an applied step (rank 0); step_s is its time. */
static void train_log_step(const train_run *r, int64_t step, double loss, double lr,
                           double gnorm, double step_s)
{
    const st_config *cfg = r->cfg;
    const int64_t tokens_step = cfg->train.global_batch * r->T;
    const double tok_s = (double)tokens_step / step_s;
    const double peak = cfg->log.peak_tflops * 1e12 * r->dp;
    const int last = step + 1 == cfg->train.steps;
    const st_step_record rec = {
        .step = step + 1, .tokens = (step + 1) * tokens_step, .loss = loss, .lr = lr,
        .grad_norm = gnorm, .tokens_per_s = tok_s,
        .mfu = peak > 0.0 ? r->flops_tok * tok_s / peak : NAN, .time_ms = 1e3 * step_s,
        .state_bytes = st_mem_state(), .peak_bytes = st_mem_peak()};
    st_runlog_step(r->log, &rec, step == 0 || (step + 1) % cfg->log.every == 0 || last);
}

/* An applied step, as read back: the run of skipped steps ends. */
static void applied_update(train_run *r, int64_t step, double loss, double lr, double gnorm,
                           double step_s)
{
    r->in_a_row = 0;
    if (r->log)
        train_log_step(r, step, loss, lr, gnorm, step_s);
}

/* A skipped step, as read back (no rank updated); at
 * train.nonfinite_limit skipped steps in a row, the stop
 * (ST_EXIT_NONFINITE), whose checkpoint holds the last good state: the
 * device's gate let no update apply after that step either. */
static int skip_update(train_run *r, int64_t step, double lr, double bad_ranks)
{
    const st_config *cfg = r->cfg;
    r->in_a_row++;
    if (r->log)
        st_runlog_skipped(r->log, step + 1, lr, bad_ranks, r->in_a_row);
    if (r->in_a_row >= cfg->train.nonfinite_limit)
        return st_train_stop_nonfinite(&r->fsdp, cfg, r->rt, step + 1, r->in_a_row, r->log);
    return 0;
}

/* Mean loss over the targets that count in eval_batches x global_batch
 * sequences of the val set, split evenly over the data-parallel ranks. */
static int validation_loss(train_run *r, double *val_loss)
{
    const st_config *cfg = r->cfg;
    const int64_t B = r->B;
    const int64_t total = cfg->train.eval_batches * cfg->train.global_batch;
    const int64_t per_rank = total / r->dp; /* global_batch % (B x dp) == 0 */
    double sums[2] = {0.0, 0.0}; /* loss, targets counted */
    int rc = 0;
    for (int64_t i0 = 0; i0 < per_rank && !rc; i0 += B) {
        for (int64_t b = 0; b < B; b++) {
            sums[1] += (double)st_dataset_eval_sample(&r->val_ds, r->rank * per_rank + i0 + b,
                                                      r->window, r->counts);
            set_batch_row(r, b);
        }
        double l = 0.0;
        rc = st_fsdp_forward(&r->fsdp, r->inputs, r->targets, NULL, &l);
        sums[0] += l;
    }
    st_fault_at("eval", r->rank);
    rc = rc ? rc : st_comm_allreduce_now(r->groups.host_world, sums, 2, ST_DT_F64,
                                         st_desc("the validation loss", -1));
    *val_loss = sums[0] / sums[1];
    return rc;
}

/* Every train.eval_every steps and at the last step, when eval_every > 0. */
static int train_evaluate(train_run *r, int64_t step)
{
    const st_config *cfg = r->cfg;
    const int last = step + 1 == cfg->train.steps;
    if (cfg->train.eval_every <= 0 || ((step + 1) % cfg->train.eval_every != 0 && !last))
        return 0;
    double vl = 0.0;
    const double t0 = st_runlog_now();
    int rc = validation_loss(r, &vl);
    if (!rc && r->log)
        st_runlog_eval(r->log, step + 1, vl, st_runlog_now() - t0);
    return rc;
}

/* Read the verdicts of the steps since the last read (the one host wait
 * for all of them) and log each step as it went: applied, or skipped and
 * perhaps the stop.  The device ran the steps back to back, so a step's
 * own time is not known without a wait per step: each is given the mean
 * of the interval, from the first pending step's start to the read.
 * Returns 0, or the exit status that ends the run. */
static int read_verdicts(train_run *r)
{
    if (r->n_pending == 0)
        return 0;
    const st_fsdp_verdict *v;
    const int n = st_fsdp_read_verdicts(&r->fsdp, &v);
    if (n != r->n_pending)
        st_bug("%d step verdicts read for %d steps", n, r->n_pending);
    const double step_s = (st_runlog_now() - r->pending[0].t0) / n;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const struct pending_step *p = &r->pending[i];
        /* The gate is what happened to the weights.  It shuts a finite
         * step only after the stop, which ends this loop first (or where
         * nothing ran: the emulation's record-only walk reads zeros);
         * opening for a non-finite one would be a backend bug. */
        if (v[i].applied && v[i].bad_ranks != 0.0)
            st_bug("step %lld: the gate applied a step with %g non-finite ranks",
                   (long long)p->step + 1, v[i].bad_ranks);
        if (v[i].applied)
            applied_update(r, p->step, v[i].loss_sum / (double)p->targets, p->lr,
                           sqrt(v[i].sumsq), step_s);
        else
            rc = skip_update(r, p->step, p->lr, v[i].bad_ranks);
    }
    r->n_pending = 0;
    return rc;
}

static int read_verdicts_cb(void *ctx) { return read_verdicts(ctx); }

/* Whether the host reads the verdicts after step (0-based): where it logs
 * (the first, every log.every-th and the last step), evaluates, or when
 * the device holds ST_TRAIN_MAX_PENDING steps; a checkpoint reads them
 * through st_train_boundary's callback. */
static int reads_after(const train_run *r, int64_t step)
{
    const st_config *cfg = r->cfg;
    const int64_t done = step + 1;
    const int64_t ev = cfg->train.eval_every;
    return step == 0 || done % cfg->log.every == 0 || done == cfg->train.steps ||
           (ev > 0 && done % ev == 0) || r->n_pending >= ST_TRAIN_MAX_PENDING;
}

/* Step `step` (0-based): gradients, the verdict on whether it is finite
 * (every rank's, agreed on the device), the update that the verdict gates,
 * the log of the steps since the last read where this step logs,
 * evaluation, then the step boundary.  Returns 0 to go on, or the exit
 * status that ends the run. */
static int train_step(train_run *r, int64_t step)
{
    const st_config *cfg = r->cfg;
    st_fault_at("step", r->rank);
    const double t0 = st_runlog_now();
    const int64_t targets = step_targets(r, step);
    int rc = accumulate_gradients(r, step, targets);
    /* A batch with no trained target has nothing to average: skipped, as
     * a non-finite step is.  The loss sum and each rank's verdict are
     * summed over every rank, so every rank skips the same steps, even
     * where the norm is local (no_shard) or the replicas are different
     * shard groups. */
    rc = rc ? rc : st_fsdp_step_verdict(&r->fsdp, targets == 0, cfg->train.nonfinite_limit);
    if (rc)
        return rc;
    /* The schedule follows the step number: a skipped step's learning
     * rate is not reused.  AdamW counts only applied updates (the gate).
     * The clip factor is computed on the device from the norm there. */
    const double lr = st_lr_at(cfg, step);
    st_fsdp_optimizer_step(&r->fsdp, lr, cfg->train.grad_clip);
    if (r->n_pending == r->pending_cap) {
        const int cap = r->pending_cap ? 2 * r->pending_cap : 16;
        struct pending_step *p = st_alloc(sizeof *p * (size_t)cap, ST_MEM_OTHER);
        if (r->n_pending)
            memcpy(p, r->pending, sizeof *p * (size_t)r->n_pending);
        st_free(r->pending);
        r->pending = p;
        r->pending_cap = cap;
    }
    r->pending[r->n_pending++] = (struct pending_step){step, targets, lr, t0};
    if (reads_after(r, step))
        rc = read_verdicts(r);
    rc = rc ? rc : train_evaluate(r, step);
    return rc ? rc : st_train_boundary(&r->fsdp, cfg, r->rt, step + 1, r->log,
                                       read_verdicts_cb, r);
}

/* ---- the run ---------------------------------------------------------- */

/* The final weights stream out unit by unit: the writer asks for unit u
 * when the file reaches it, and rank 0 makes it in one buffer the size of
 * the largest unit, so no rank ever holds the whole model (in fp32, 32 GB
 * of host memory for Llama 3 8B).  A full run's unit u is gathered then
 * from the shards, every rank of the shard group taking part (a
 * collective; the others keep nothing).  A LoRA run's is the base read
 * again from model.init in fp32 (not the compute-dtype copy training kept:
 * a bf16 run's merge then equals peft's) with unit u's adapters, gathered
 * beforehand to rank 0, merged in: no collective while writing. */
typedef struct {
    st_fsdp *f;
    const st_model *m;
    const st_config *cfg;
    float *buf;         /* rank 0's, the largest unit's size; NULL elsewhere */
    float **adapters;   /* LoRA, rank 0: each unit's gathered adapters */
    st_lora_base *base; /* LoRA, rank 0: model.init, opened once */
    int next;           /* full run: the next unit to gather */
    int rc;
} final_source;

static const float *final_unit(int u, void *ctx)
{
    final_source *g = ctx;
    if (g->adapters) {
        g->rc = st_lora_merged_unit(g->base, u, g->adapters[u], g->buf);
        return g->rc ? NULL : g->buf;
    }
    /* The writer asks in order; gather up to u, keeping u. */
    for (; g->next <= u && !g->rc; g->next++)
        g->rc = st_fsdp_gather_master(g->f, g->next, g->buf);
    return g->rc ? NULL : g->buf;
}

/* Rank 0 writes DIR/final (model.safetensors, the model files beside it,
 * and for LoRA the adapters alone in final/adapter, the directory PEFT
 * loads onto the base model).  Every rank takes part in every gather, the
 * adapters' first, then (full run) each unit's, even when rank 0's write
 * fails early: its peers would otherwise wait in a gather for ever. */
static int save_final_weights(st_fsdp *f, const st_model *m, const st_config *cfg, int rank)
{
    st_fault_at("final", rank);
    const int lora = m->lora.rank > 0, keep = rank == 0;
    final_source g = {.f = f, .m = m, .cfg = cfg};
    int rc = 0;
    if (lora && keep)
        g.adapters = st_alloc(sizeof(float *) * (size_t)m->n_units, ST_MEM_OTHER);
    for (int u = 0; lora && u < m->n_units; u++) {
        if (keep)
            g.adapters[u] = st_alloc(sizeof(float) * (size_t)(m->units[u].lora_numel + 1),
                                     ST_MEM_OTHER);
        if (m->units[u].lora_numel)
            rc = rc ? rc : st_fsdp_gather_master(f, u, keep ? g.adapters[u] : NULL);
    }
    if (!rc && keep) {
        g.buf = st_alloc(sizeof(float) * (size_t)st_model_largest_unit(m), ST_MEM_OTHER);
        /* Written into a stage and moved into DIR/final together, so a
         * failure part-way (a full disk) leaves an earlier run's final
         * weights whole, never new weights beside an old config.json. */
        char path[8400], dir[4096], adir[4300], final[4096];
        st_stage stage;
        snprintf(dir, sizeof dir, "%s/final", cfg->checkpoint.dir);
        st_final_weights_path(cfg, final, sizeof final);
        const int staged = !(rc = st_stage_begin(&stage, dir));
        if (rc == ST_EXIT_USAGE)   /* found after the training: a failed write */
            rc = ST_EXIT_FAILURE;
        snprintf(adir, sizeof adir, "%s/adapter", stage.dir);
        snprintf(path, sizeof path, "%s/model.safetensors", stage.dir);
        if (!rc && lora) {
            rc = st_lora_write_adapter(adir, m, g.adapters, cfg->model.init);
            rc = rc ? rc : st_lora_base_open(cfg->model.init, m, &cfg->model,
                                             (uint64_t)cfg->train.seed, &g.base);
        }
        rc = rc ? rc : st_safetensors_stream_model(path, m, final_unit, &g);
        /* config.json beside them makes DIR/final a model directory that
         * transformers and `shardtrain export` read without a checkpoint. */
        rc = rc ? rc : st_hf_write_model_files(stage.dir, m, &cfg->model,
                                               cfg->data.tokenizer[0] ? cfg->data.tokenizer
                                                                      : NULL);
        rc = g.rc ? g.rc : rc;
        if (staged)
            rc = st_stage_finish(&stage, rc);
        if (!rc && lora)
            st_info("shardtrain: wrote %s/adapter/adapter_model.safetensors", dir);
        if (!rc)
            st_info("shardtrain: wrote %s%s", final, lora ? " (the adapters merged)" : "");
    }
    if (!lora)
        final_unit(m->n_units - 1, &g);   /* the gathers the write did not reach */
    for (int u = 0; g.adapters && u < m->n_units; u++)
        st_free(g.adapters[u]);
    st_free(g.adapters);
    st_free(g.buf);
    st_lora_base_close(g.base);
    return g.rc ? g.rc : rc;   /* the source's status says why the write stopped */
}

int st_train(const st_config *cfg, st_runtime *rt)
{
    train_run r = {.cfg = cfg, .rt = rt, .t_begin = st_runlog_now()};
    int rc = train_check(&r);
    /* Layout errors are found identically on every rank, before any work. */
    rc = rc ? rc : st_groups_create(&r.groups, rt, cfg, r.kernels->stream);
    if (rc) {
        st_kernels_close(r.kernels);
        return rc;
    }
    rc = train_setup(&r);
    for (int64_t step = r.start; step < cfg->train.steps && !rc; step++)
        rc = train_step(&r, step);
    /* Only rank 0 writes, so only rank 0 sees a write fail (a full disk):
     * agree, or the others would wait for it in the teardown's gather of
     * the memory peaks. */
    rc = rc ? rc : st_runtime_agree(save_final_weights(&r.fsdp, &r.model, cfg, r.rank));
    if (!rc)
        st_runlog_final_weights(r.log);
    if (!rc)
        st_info("shardtrain: done in %.1fs", st_runlog_now() - r.t_start);
    return train_teardown(&r, rc);
}
