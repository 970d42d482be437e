/* Text generation (see sample.h).  Each new token re-runs the forward over
 * the last seq_len tokens: quadratic, but the CPU reference has no KV cache
 * and samples are short.  Token ids below 256 are bytes (the byte-level
 * tokenizer of `shardtrain prepare`); larger ids are printed as <id>. */
#include "train/sample.h"
#include "base/alloc.h"
#include "engine/fsdp.h"
#include "train/engine_setup.h"
#include "base/log.h"
#include "model/model.h"
#include "base/rng.h"
#include "train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pick_token(const float *logits, int64_t V, const st_sample_options *opt,
                      int64_t draw, double *probs)
{
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best])
            best = i;
    if (opt->temperature <= 0.0)
        return (int)best;
    /* Top-k: the k-th largest logit is the threshold (ties kept). */
    double threshold = -INFINITY;
    if (opt->top_k > 0 && opt->top_k < V) {
        for (int64_t i = 0; i < V; i++)
            probs[i] = logits[i];
        for (int64_t k = 0; k < opt->top_k; k++) {
            int64_t arg = -1;
            for (int64_t i = 0; i < V; i++)
                if (probs[i] != -INFINITY && (arg < 0 || probs[i] > probs[arg]))
                    arg = i;
            threshold = probs[arg];
            probs[arg] = -INFINITY;
        }
    }
    double sum = 0.0;
    for (int64_t i = 0; i < V; i++) {
        probs[i] = logits[i] >= threshold
                       ? exp(((double)logits[i] - logits[best]) / opt->temperature)
                       : 0.0;
        sum += probs[i];
    }
    double u = st_uniform3(opt->seed, ST_RNG_SAMPLE, (uint64_t)draw) * sum;
    for (int64_t i = 0; i < V; i++) {
        u -= probs[i];
        if (u < 0.0)
            return (int)i;
    }
    return (int)best;
}

static void emit_token(int tok)
{
    if (tok < 256)
        putchar(tok);
    else
        printf("<%d>", tok);
}

/* st_sample once the environment is checked. */
static int sample_on(const st_config *cfg_in, st_runtime *rt, const st_sample_options *opt,
                     st_kernels *kernels)
{
    int rc;
    if (rt->world > 1) {
        st_error(NULL, "sample runs on one rank, launched with %d; hint: run it without "
                 "mpirun or srun", rt->world);
        return ST_EXIT_USAGE;
    }
    /* The command line's path as given (no copy to cut it); the default
     * fits: checkpoint.dir is bounded by ST_PATH_LIMIT (config/limits.h). */
    char final_path[4096];
    const char *weights = opt->weights;
    if (!weights) {
        st_final_weights_path(cfg_in, final_path, sizeof final_path);
        weights = final_path;
    }

    /* One sequence at a time, no recomputation, weights from the file. */
    st_config cfg = *cfg_in;
    cfg.train.micro_batch = 1;
    cfg.train.activation_checkpointing = ST_ACKPT_NONE;
    cfg.model.init = (char *)weights;

    const int64_t T = cfg.model.seq_len, V = cfg.model.vocab_size;
    size_t plen = strlen(opt->prompt);
    st_model model;
    if ((rc = st_model_init(&model, &cfg.model)))
        return rc;
    st_fsdp eng;
    if ((rc = st_engine_open(&eng, &model, &cfg, NULL, kernels))) {
        st_fsdp_destroy(&eng);
        st_model_free(&model);
        return rc;
    }
    int64_t cap = (int64_t)plen + opt->tokens + 1;
    int32_t *seq = st_alloc(sizeof(int32_t) * (size_t)cap, ST_MEM_OTHER);
    int32_t *inputs = st_alloc(sizeof(int32_t) * (size_t)T, ST_MEM_OTHER);
    int32_t *targets = st_alloc(sizeof(int32_t) * (size_t)T, ST_MEM_OTHER);
    float *logits = st_alloc(sizeof(float) * (size_t)(T * V), ST_MEM_OTHER);
    double *probs = st_alloc(sizeof(double) * (size_t)V, ST_MEM_OTHER);
    int64_t n = 0;
    /* An empty prompt starts from a newline, a natural document boundary. */
    if (plen == 0)
        seq[n++] = '\n' < V ? '\n' : 0;
    for (size_t i = 0; i < plen; i++) {
        int tok = (unsigned char)opt->prompt[i];
        if (tok >= V) {
            st_error("command line", "prompt byte %d is outside the vocabulary (%lld)",
                     tok, (long long)V);
            rc = ST_EXIT_USAGE;
            goto out;
        }
        seq[n++] = tok;
    }
    if (rt->rank == 0)
        fwrite(opt->prompt, 1, plen, stdout);
    for (int64_t i = 0; i < opt->tokens; i++) {
        int64_t start = n > T ? n - T : 0, len = n - start;
        memset(inputs, 0, sizeof(int32_t) * (size_t)T);
        memcpy(inputs, seq + start, sizeof(int32_t) * (size_t)len);
        /* Causal attention: positions after len-1 do not affect its logits. */
        double unused;
        if ((rc = st_fsdp_forward(&eng, inputs, targets, logits, &unused)))
            goto out;
        int tok = pick_token(logits + (len - 1) * V, V, opt, i, probs);
        seq[n++] = tok;
        if (rt->rank == 0)
            emit_token(tok);
    }
    if (rt->rank == 0) {
        putchar('\n');
        fflush(stdout);
    }
out:
    st_free(seq);
    st_free(inputs);
    st_free(targets);
    st_free(logits);
    st_free(probs);
    st_fsdp_destroy(&eng);
    st_model_free(&model);
    return rc;
}

int st_sample(const st_config *cfg_in, st_runtime *rt, const st_sample_options *opt)
{
    st_kernels *kernels = NULL;
    int rc = st_train_check_environment(cfg_in, rt, &kernels);
    rc = rc ? rc : sample_on(cfg_in, rt, opt, kernels);
    st_kernels_close(kernels);
    return rc;
}
