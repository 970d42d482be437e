/* The training loop (see train.h).  One step = accumulate gradients over
 * global_batch / (micro_batch x data-parallel ranks) micro-batches, clip by
 * the global norm, one AdamW update, unless any rank's loss or norm is not
 * finite: then every rank skips the update (shardtrain(1), FAULTS).
 * Sample j of global step k is the window the dataset picks for (seed, k,
 * j), so the data a step sees does not depend on how the batch is split. */
#include "train/train.h"
#include "base/alloc.h"
#include "io/checkpoint.h"
#include "io/data.h"
#include "comm/comm.h"
#include "runtime/device.h"
#include "engine/fsdp.h"
#include "train/engine_setup.h"
#include "comm/groups.h"
#include "base/log.h"
#include "model/model.h"
#include "engine/lr_schedule.h"
#include "base/files.h"
#include "io/safetensors_write.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void error_at_key(const st_config *cfg, const char *section, const char *key,
                         const char *fmt, const char *detail)
{
    const char *file = NULL;
    int line = 0;
    st_config_origin_of(cfg, section, key, &file, &line);
    st_error_at(file ? file : cfg->path, line, fmt, detail);
}

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

static void format_eta(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
}

/* Windows for micro-batch `micro` of this rank: sample j = (micro x dp +
 * rank) x B + b of the global batch. */
static void fill_train_batch(const st_dataset *ds, const st_config *cfg, int64_t step,
                             int64_t micro, int rank, int dp, int32_t *window,
                             int32_t *inputs, int32_t *targets)
{
    const int64_t B = cfg->train.micro_batch, T = cfg->model.seq_len;
    for (int64_t b = 0; b < B; b++) {
        int64_t j = (micro * dp + rank) * B + b;
        st_dataset_train_window(ds, (uint64_t)cfg->train.seed, step, j, window);
        memcpy(inputs + b * T, window, sizeof(int32_t) * (size_t)T);
        memcpy(targets + b * T, window + 1, sizeof(int32_t) * (size_t)T);
    }
}

/* Mean loss over eval_batches x global_batch sequences of the val set,
 * split evenly over the data-parallel ranks. */
static int evaluate(st_fsdp *f, st_groups *g, const st_dataset *val, const st_config *cfg,
                    int rank, int dp, int32_t *window, int32_t *inputs, int32_t *targets,
                    double *val_loss)
{
    const int64_t B = cfg->train.micro_batch, T = cfg->model.seq_len;
    const int64_t total = cfg->train.eval_batches * cfg->train.global_batch;
    const int64_t per_rank = total / dp; /* global_batch % (B x dp) == 0 */
    double loss = 0.0;
    int rc = 0;
    for (int64_t i0 = 0; i0 < per_rank && !rc; i0 += B) {
        for (int64_t b = 0; b < B; b++) {
            st_dataset_eval_window(val, rank * per_rank + i0 + b, window);
            memcpy(inputs + b * T, window, sizeof(int32_t) * (size_t)T);
            memcpy(targets + b * T, window + 1, sizeof(int32_t) * (size_t)T);
        }
        double l = 0.0;
        rc = st_fsdp_forward(f, inputs, targets, NULL, &l);
        loss += l;
    }
    rc = rc ? rc : st_comm_allreduce_now(g->host_world, &loss, 1, ST_DT_F64,
                                         st_desc("the validation loss", -1));
    *val_loss = loss / (double)(total * T);
    return rc;
}

/* Gather every unit's master parameters and write them (rank 0). */
static int save_final_weights(st_fsdp *f, const st_model *m, const st_config *cfg, int rank)
{
    float **full = st_alloc(sizeof(float *) * (size_t)m->n_units, ST_MEM_OTHER);
    int rc = 0;
    for (int u = 0; u < m->n_units; u++) {
        full[u] = st_alloc(sizeof(float) * (size_t)m->units[u].numel, ST_MEM_OTHER);
        rc = rc ? rc : st_fsdp_gather_master(f, u, full[u]);
    }
    if (!rc && rank == 0) {
        char path[4096], dir[4096];
        snprintf(dir, sizeof dir, "%s/final", cfg->checkpoint.dir);
        rc = st_mkdir_p(dir);
        st_final_weights_path(cfg, path, sizeof path);
        rc = rc ? rc : st_safetensors_save_model(path, m, full);
        if (!rc)
            st_info("shardtrain: wrote %s", path);
    }
    for (int u = 0; u < m->n_units; u++)
        st_free(full[u]);
    st_free(full);
    return rc;
}

static void log_step(FILE *metrics, int64_t step, int64_t steps, double loss, double lr,
                     double gnorm, double tok_s, double mfu, double step_s, double eta_s)
{
    char eta[32], mfu_s[16];
    format_eta(eta, sizeof eta, eta_s);
    if (isnan(mfu))
        snprintf(mfu_s, sizeof mfu_s, "-");
    else
        snprintf(mfu_s, sizeof mfu_s, "%.1f%%", 100.0 * mfu);
    st_info("step %lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | mfu %s | eta %s",
            (long long)step, (long long)steps, loss, lr, gnorm, tok_s, mfu_s, eta);
    fprintf(metrics,
            "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
            "\"tokens_per_s\":%.6g,\"mfu\":",
            (long long)step, loss, lr, gnorm, tok_s);
    if (isnan(mfu))
        fprintf(metrics, "null");
    else
        fprintf(metrics, "%.6g", mfu);
    fprintf(metrics, ",\"time_ms\":%.6g,\"state_bytes\":%zu,\"peak_bytes\":%zu}\n",
            1e3 * step_s, st_mem_state(), st_mem_peak());
    fflush(metrics);
}

/* SHARDTRAIN_TEST_NONFINITE_STEPS=3,4, a testing aid (shardtrain(1),
 * ENVIRONMENT): the gradient of those steps (1-based, as logged) gets a NaN
 * on the last rank only, so the other ranks learn of it only through the
 * agreement. */
#define MAX_POISONED 64

static int parse_poisoned_steps(int64_t *steps, int *n)
{
    static const char var[] = "SHARDTRAIN_TEST_NONFINITE_STEPS";
    const char *s = getenv(var), *p = s;
    *n = 0;
    while (p && *p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || *n == MAX_POISONED || (*end && *end != ',')) {
            st_error(var, "'%s' is not a comma-separated list of at most %d step numbers "
                     ">= 1; hint: e.g. %s=3,4", s, MAX_POISONED, var);
            return ST_EXIT_USAGE;
        }
        steps[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int poisoned(const int64_t *steps, int n, int64_t step1)
{
    for (int i = 0; i < n; i++)
        if (steps[i] == step1)
            return 1;
    return 0;
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

/* The one place a run stops for non-finite steps.  The decision is agreed,
 * so every rank arrives here after the same step; each prints the line. */
static int stop_nonfinite(st_fsdp *f, const st_config *cfg, st_runtime *rt, int64_t step1,
                          int64_t in_a_row)
{
    const int rank = rt->rank;
    /* The skipped steps left parameters and moments untouched, so this
     * checkpoint holds the last good state: nothing is lost, and a rerun
     * with a lower learning rate resumes from it. */
    int saved = st_ckpt_save(f, cfg, rt, step1);
    char where[32];
    snprintf(where, sizeof where, "rank %d", rank);
    st_error(where, "steps %lld-%lld: %lld steps in a row had a non-finite loss or gradient "
             "norm and were skipped (train.nonfinite_limit = %lld); stopping; hint: lower "
             "optim.lr, set train.grad_clip, or check the data and model.init",
             (long long)(step1 - in_a_row + 1), (long long)step1, (long long)in_a_row,
             (long long)cfg->train.nonfinite_limit);
    if (saved)
        st_warn("the checkpoint at step %lld could not be written", (long long)step1);
    return ST_EXIT_NONFINITE;
}

static void log_skipped(FILE *metrics, int64_t step1, double lr, double bad_ranks,
                        int64_t in_a_row, int64_t limit, int world)
{
    st_warn("step %lld: the loss or gradient norm is not finite on %.0f of %d rank(s); "
            "the update is skipped on every rank (%lld in a row, train.nonfinite_limit = %lld)",
            (long long)step1, bad_ranks, world, (long long)in_a_row, (long long)limit);
    fprintf(metrics, "{\"step\":%lld,\"skipped\":\"nonfinite\",\"nonfinite_ranks\":%.0f,"
            "\"in_a_row\":%lld,\"lr\":%.9g}\n",
            (long long)step1, bad_ranks, (long long)in_a_row, lr);
    fflush(metrics);
}

static int open_data(const st_config *cfg, st_dataset *train_ds, st_dataset *val_ds)
{
    const char *file;
    int line;
    const int64_t T = cfg->model.seq_len, V = cfg->model.vocab_size;
    st_config_origin_of(cfg, "data", "train", &file, &line);
    int rc = st_dataset_open(train_ds, cfg->data.train, T, V, file ? file : cfg->path, line);
    if (rc || !cfg->data.val[0])
        return rc;
    st_config_origin_of(cfg, "data", "val", &file, &line);
    rc = st_dataset_open(val_ds, cfg->data.val, T, V, file ? file : cfg->path, line);
    if (rc)
        st_dataset_close(train_ds);
    return rc;
}

/* st_train once the environment is checked, on the kernels instance made
 * for this rank's device. */
static int train_on(const st_config *cfg, st_runtime *rt, st_kernels *kernels)
{
    int rc;
    const int dp = rt->world, rank = rt->rank;
    const int64_t B = cfg->train.micro_batch, T = cfg->model.seq_len;
    if (cfg->train.global_batch % (B * dp) != 0) {
        char detail[160];
        snprintf(detail, sizeof detail, "%lld x %d", (long long)B, dp);
        error_at_key(cfg, "train", "global_batch",
                     "train.global_batch is not a multiple of micro_batch x "
                     "data-parallel ranks (%s); hint: change global_batch or micro_batch",
                     detail);
        return ST_EXIT_USAGE;
    }
    const int64_t accum = cfg->train.global_batch / (B * dp);
    if (!cfg->data.train[0]) {
        error_at_key(cfg, "data", "train",
                     "data.train is empty%s; hint: point it at token shards, "
                     "e.g. made by `shardtrain prepare`", "");
        return ST_EXIT_USAGE;
    }
    if (cfg->train.eval_every > 0 && !cfg->data.val[0]) {
        error_at_key(cfg, "train", "eval_every",
                     "train.eval_every is set but data.val is empty%s; "
                     "hint: set data.val or eval_every = 0", "");
        return ST_EXIT_USAGE;
    }
    int64_t poison[MAX_POISONED];
    int n_poison = 0;
    if ((rc = parse_poisoned_steps(poison, &n_poison)))
        return rc;
    /* Layout errors are found identically on every rank, before any work. */
    st_groups groups;
    if ((rc = st_groups_create(&groups, rt, cfg, kernels->stream)))
        return rc;

    st_dataset train_ds = {0}, val_ds = {0};
    st_model model = {0};
    st_fsdp fsdp = {0};
    FILE *metrics = NULL;
    int32_t *window = NULL, *inputs = NULL, *targets = NULL;
    int data_open = 0;
    rc = open_data(cfg, &train_ds, &val_ds);
    data_open = rc == 0;
    rc = rc ? rc : st_model_init(&model, &cfg->model);
    rc = rc ? rc : st_engine_open(&fsdp, &model, cfg, &groups, kernels);
    if (!rc && rank == 0) {
        if (!(rc = st_mkdir_p(cfg->log.dir))) {
            char path[4096];
            snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->log.dir);
            if (!(metrics = fopen(path, "a"))) {
                st_error(path, "cannot open for appending: %s", strerror(errno));
                rc = ST_EXIT_FAILURE;
            }
        }
    }
    if ((rc = st_runtime_agree(rc)))
        goto out;
    /* Before the first step so that a signal during start-up is not lost;
     * it is acted on at the first step boundary. */
    st_ckpt_install_signals();
    int64_t start = 0;
    if ((rc = st_ckpt_resume(&fsdp, cfg, rt, &start)))
        goto out;
    {
        /* After the checks, so that bad input stays a single error line. */
        char sh[128], rep[128];
        st_groups_describe(&groups, sh, rep, sizeof sh);
        st_runtime_log_identity(rt, sh, rep);
    }
    window = st_alloc(sizeof(int32_t) * (size_t)(T + 1), ST_MEM_OTHER);
    inputs = st_alloc(sizeof(int32_t) * (size_t)(B * T), ST_MEM_ACTS);
    targets = st_alloc(sizeof(int32_t) * (size_t)(B * T), ST_MEM_ACTS);

    const double flops_tok = st_model_flops_per_token(&model);
    st_info("shardtrain: %s, %lld parameters, %d units, %lld tokens in %d train file(s)",
            cfg->model.arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
            (long long)model.n_params, model.n_units, (long long)train_ds.n_tokens,
            train_ds.n_files);
    st_info("shardtrain: %s over %d rank(s) (shard group %d x replicate group %d); global "
            "batch %lld x %lld tokens = %lld micro-batch(es) of %lld per rank; %lld steps",
            st_enum_name("parallel", "strategy", cfg->parallel.strategy), dp,
            groups.layout.shard_size, groups.layout.replicate_size,
            (long long)cfg->train.global_batch, (long long)T, (long long)accum,
            (long long)B, (long long)cfg->train.steps);

    const double t_start = now_s();
    const float grad_scale = (float)(1.0 / (double)(B * T * accum * dp));
    int64_t in_a_row = 0;  /* consecutive skipped steps */
    for (int64_t step = start; step < cfg->train.steps && !rc; step++) {
        const double t0 = now_s();
        set_comm_step(&groups, step + 1);
        st_fsdp_zero_grads(&fsdp);
        double loss_sum = 0.0;
        for (int64_t micro = 0; micro < accum && !rc; micro++) {
            fill_train_batch(&train_ds, cfg, step, micro, rank, dp, window, inputs, targets);
            double l = 0.0;
            rc = st_fsdp_forward_backward(&fsdp, inputs, targets, grad_scale,
                                          micro == accum - 1, &l);
            loss_sum += l;
        }
        if (!rc && rank == dp - 1 && poisoned(poison, n_poison, step + 1)) {
            const float nan = NAN;
            st_fsdp_shard_from_host(&fsdp, 0, ST_FSDP_GRADS, 0, 1, &nan);
        }
        double gnorm = 0.0;
        rc = rc ? rc : st_fsdp_grad_norm(&fsdp, &gnorm);
        /* The loss sum and each rank's verdict travel in one all-reduce, so
         * every rank skips the same steps, even where the norm is local
         * (no_shard) or the replicas are different shard groups. */
        double agreed[2] = {loss_sum, isfinite(loss_sum) && isfinite(gnorm) ? 0.0 : 1.0};
        rc = rc ? rc : st_comm_allreduce_now(groups.host_world, agreed, 2, ST_DT_F64,
                                             st_desc("the loss", -1));
        if (rc)
            break;
        const double loss = agreed[0] / (double)(cfg->train.global_batch * T);
        const int skip = agreed[1] > 0.0;
        /* The schedule follows the step number: a skipped step's learning
         * rate is not reused.  AdamW counts only applied updates. */
        const double lr = st_lr_at(cfg, step);
        const int last = step + 1 == cfg->train.steps;
        if (skip) {
            in_a_row++;
            if (rank == 0)
                log_skipped(metrics, step + 1, lr, agreed[1], in_a_row,
                            cfg->train.nonfinite_limit, dp);
            if (in_a_row >= cfg->train.nonfinite_limit) {
                rc = stop_nonfinite(&fsdp, cfg, rt, step + 1, in_a_row);
                break;
            }
        } else {
            in_a_row = 0;
            const double clip = cfg->train.grad_clip;
            const double scale = clip > 0.0 && gnorm > clip ? clip / (gnorm + 1e-6) : 1.0;
            st_fsdp_optimizer_step(&fsdp, lr, scale);
            const double t1 = now_s();

            const double step_s = t1 - t0;
            const double tok_s = (double)(cfg->train.global_batch * T) / step_s;
            const double peak = cfg->log.peak_tflops * 1e12 * dp;
            const double mfu = peak > 0.0 ? flops_tok * tok_s / peak : NAN;
            if (rank == 0 && (step == 0 || (step + 1) % cfg->log.every == 0 || last))
                log_step(metrics, step + 1, cfg->train.steps, loss, lr, gnorm, tok_s, mfu,
                         step_s, (t1 - t_start) / (double)(step + 1 - start) *
                                     (double)(cfg->train.steps - step - 1));
        }
        if (cfg->train.eval_every > 0 && ((step + 1) % cfg->train.eval_every == 0 || last)) {
            double vl = 0.0;
            rc = evaluate(&fsdp, &groups, &val_ds, cfg, rank, dp, window, inputs, targets, &vl);
            if (!rc && rank == 0) {
                st_info("step %lld/%lld | val_loss %.4f", (long long)step + 1,
                        (long long)cfg->train.steps, vl);
                fprintf(metrics, "{\"step\":%lld,\"val_loss\":%.9g}\n",
                        (long long)step + 1, vl);
                fflush(metrics);
            }
        }
        rc = rc ? rc : st_ckpt_step_boundary(&fsdp, cfg, rt, step + 1);
    }
    rc = rc ? rc : save_final_weights(&fsdp, &model, cfg, rank);
    if (!rc)
        st_info("shardtrain: done in %.1fs", now_s() - t_start);
out:
    if (metrics && fclose(metrics) != 0 && rc == 0) {
        st_error(cfg->log.dir, "error writing metrics.jsonl: %s", strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    st_free(window);
    st_free(inputs);
    st_free(targets);
    st_fsdp_destroy(&fsdp);
    if (model.units)
        st_model_free(&model);
    if (data_open) {
        st_dataset_close(&train_ds);
        if (cfg->data.val[0])
            st_dataset_close(&val_ds);
    }
    st_groups_destroy(&groups);
    return rc;
}

int st_train(const st_config *cfg, st_runtime *rt)
{
    st_kernels *kernels = NULL;
    int rc = st_train_check_environment(cfg, rt, &kernels);
    rc = rc ? rc : train_on(cfg, rt, kernels);
    st_kernels_close(kernels);
    return rc;
}
