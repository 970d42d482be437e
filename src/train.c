/* The training loop (see train.h).  One step = accumulate gradients over
 * global_batch / (micro_batch x data-parallel ranks) micro-batches, clip by
 * the global norm, one AdamW update.  Sample j of global step k is the
 * window the dataset picks for (seed, k, j), so the data a step sees does
 * not depend on how the batch is split. */
#include "train.h"
#include "alloc.h"
#include "data.h"
#include "engine.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "paths.h"
#include "safetensors.h"

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

int st_train_check_environment(const st_config *cfg, const st_runtime *rt)
{
    if (cfg->train.device == ST_DEVICE_CUDA) {
        error_at_key(cfg, "train", "device",
                     "train.device = cuda, but this build has no CUDA backend%s; "
                     "hint: set train.device = cpu or auto", "");
        return ST_EXIT_USAGE;
    }
    if (rt->world > 1) {
        st_error(NULL, "launched with %d ranks, but this release trains on one rank "
                 "only; hint: run without mpirun/srun, or with one task", rt->world);
        return ST_EXIT_USAGE;
    }
    return 0;
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

/* Mean loss over eval_batches x global_batch sequences of the val set. */
static double evaluate(st_engine *e, const st_dataset *val, const st_config *cfg,
                       int32_t *window, int32_t *inputs, int32_t *targets)
{
    const int64_t B = cfg->train.micro_batch, T = cfg->model.seq_len;
    const int64_t total = cfg->train.eval_batches * cfg->train.global_batch;
    double loss = 0.0;
    for (int64_t i0 = 0; i0 < total; i0 += B) {
        for (int64_t b = 0; b < B; b++) {
            st_dataset_eval_window(val, i0 + b, window);
            memcpy(inputs + b * T, window, sizeof(int32_t) * (size_t)T);
            memcpy(targets + b * T, window + 1, sizeof(int32_t) * (size_t)T);
        }
        loss += st_engine_forward(e, inputs, targets, NULL);
    }
    return loss / (double)(total * T);
}

int st_train(const st_config *cfg, const st_runtime *rt)
{
    int rc = st_train_check_environment(cfg, rt);
    if (rc)
        return rc;
    const int dp = rt->world;
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

    const char *file;
    int line;
    st_dataset train_ds = {0}, val_ds = {0};
    st_config_origin_of(cfg, "data", "train", &file, &line);
    rc = st_dataset_open(&train_ds, cfg->data.train, T, cfg->model.vocab_size,
                         file ? file : cfg->path, line);
    if (rc)
        return rc;
    if (cfg->data.val[0]) {
        st_config_origin_of(cfg, "data", "val", &file, &line);
        rc = st_dataset_open(&val_ds, cfg->data.val, T, cfg->model.vocab_size,
                             file ? file : cfg->path, line);
        if (rc) {
            st_dataset_close(&train_ds);
            return rc;
        }
    }

    st_model model;
    st_engine eng = {0};
    FILE *metrics = NULL;
    int32_t *window = NULL, *inputs = NULL, *targets = NULL;
    rc = st_model_init(&model, &cfg->model);
    if (rc)
        goto out_data;
    rc = st_engine_create(&eng, &model, cfg);
    if (rc)
        goto out;
    window = st_alloc(sizeof(int32_t) * (size_t)(T + 1), ST_MEM_OTHER);
    inputs = st_alloc(sizeof(int32_t) * (size_t)(B * T), ST_MEM_ACTS);
    targets = st_alloc(sizeof(int32_t) * (size_t)(B * T), ST_MEM_ACTS);

    if (rt->rank == 0) {
        if ((rc = st_mkdir_p(cfg->log.dir)))
            goto out;
        char path[4096];
        snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->log.dir);
        metrics = fopen(path, "a");
        if (!metrics) {
            st_error(path, "cannot open for appending: %s", strerror(errno));
            rc = ST_EXIT_FAILURE;
            goto out;
        }
    }

    const double flops_tok = st_model_flops_per_token(&model);
    st_info("shardtrain: %s, %lld parameters, %d units, %lld tokens in %d train file(s)",
            cfg->model.arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
            (long long)model.n_params, model.n_units, (long long)train_ds.n_tokens,
            train_ds.n_files);
    st_info("shardtrain: global batch %lld x %lld tokens = %lld micro-batches of %lld "
            "per rank x %d rank(s); %lld steps",
            (long long)cfg->train.global_batch, (long long)T, (long long)accum,
            (long long)B, dp, (long long)cfg->train.steps);

    const double t_start = now_s();
    const float grad_scale = (float)(1.0 / (double)(B * T * accum * dp));
    for (int64_t step = 0; step < cfg->train.steps; step++) {
        const double t0 = now_s();
        st_engine_zero_grads(&eng);
        double loss_sum = 0.0;
        for (int64_t micro = 0; micro < accum; micro++) {
            fill_train_batch(&train_ds, cfg, step, micro, rt->rank, dp, window,
                             inputs, targets);
            loss_sum += st_engine_forward_backward(&eng, inputs, targets, grad_scale);
        }
        const double loss = loss_sum / (double)(cfg->train.global_batch * T);
        const double gnorm = st_engine_grad_norm(&eng);
        if (!isfinite(loss) || !isfinite(gnorm)) {
            st_error(NULL, "loss %g / gradient norm %g is not finite at step %lld; "
                     "hint: lower optim.lr or set train.grad_clip",
                     loss, gnorm, (long long)step + 1);
            rc = ST_EXIT_FAILURE;
            goto out;
        }
        const double clip = cfg->train.grad_clip;
        const double scale = clip > 0.0 && gnorm > clip ? clip / (gnorm + 1e-6) : 1.0;
        const double lr = st_lr_at(cfg, step);
        st_engine_optimizer_step(&eng, lr, scale);
        const double t1 = now_s();

        const double step_s = t1 - t0;
        const double tok_s = (double)(cfg->train.global_batch * T) / step_s;
        const double peak = cfg->log.peak_tflops * 1e12 * dp;
        const double mfu = peak > 0.0 ? flops_tok * tok_s / peak : NAN;
        const int last = step + 1 == cfg->train.steps;
        if (rt->rank == 0 && (step == 0 || (step + 1) % cfg->log.every == 0 || last)) {
            char eta[32], mfu_s[16];
            format_eta(eta, sizeof eta,
                       (t1 - t_start) / (double)(step + 1) *
                           (double)(cfg->train.steps - step - 1));
            if (isnan(mfu))
                snprintf(mfu_s, sizeof mfu_s, "-");
            else
                snprintf(mfu_s, sizeof mfu_s, "%.1f%%", 100.0 * mfu);
            st_info("step %lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | "
                    "mfu %s | eta %s",
                    (long long)step + 1, (long long)cfg->train.steps, loss, lr, gnorm,
                    tok_s, mfu_s, eta);
            fprintf(metrics,
                    "{\"step\":%lld,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
                    "\"tokens_per_s\":%.6g,\"mfu\":",
                    (long long)step + 1, loss, lr, gnorm, tok_s);
            if (isnan(mfu))
                fprintf(metrics, "null");
            else
                fprintf(metrics, "%.6g", mfu);
            fprintf(metrics, ",\"time_ms\":%.6g,\"state_bytes\":%zu,\"peak_bytes\":%zu}\n",
                    1e3 * step_s, st_mem_state(), st_mem_peak());
            fflush(metrics);
        }
        if (cfg->train.eval_every > 0 &&
            ((step + 1) % cfg->train.eval_every == 0 || last)) {
            double vl = evaluate(&eng, &val_ds, cfg, window, inputs, targets);
            if (rt->rank == 0) {
                st_info("step %lld/%lld | val_loss %.4f", (long long)step + 1,
                        (long long)cfg->train.steps, vl);
                fprintf(metrics, "{\"step\":%lld,\"val_loss\":%.9g}\n",
                        (long long)step + 1, vl);
                fflush(metrics);
            }
        }
    }

    if (rt->rank == 0) {
        char path[4096], dir[4096];
        snprintf(dir, sizeof dir, "%s/final", cfg->checkpoint.dir);
        if ((rc = st_mkdir_p(dir)))
            goto out;
        st_final_weights_path(cfg, path, sizeof path);
        if ((rc = st_safetensors_save_model(path, &model, eng.params)))
            goto out;
        st_info("shardtrain: wrote %s (%.1fs)", path, now_s() - t_start);
    }
    rc = 0;
out:
    if (metrics && fclose(metrics) != 0 && rc == 0) {
        st_error(cfg->log.dir, "error writing metrics.jsonl: %s", strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    st_free(window);
    st_free(inputs);
    st_free(targets);
    st_engine_destroy(&eng);
    st_model_free(&model);
out_data:
    st_dataset_close(&train_ds);
    if (cfg->data.val[0])
        st_dataset_close(&val_ds);
    return rc;
}
