/* Text generation (see sample.h).  Each new token re-runs the forward over
 * the last seq_len tokens: quadratic, but the CPU reference has no KV cache
 * and samples are short.
 *
 * Text in and out goes through the model's tokenizer when there is one
 * (--tokenizer, data.tokenizer, or a tokenizer.json in the Hugging Face
 * directory that model.init names): the prompt is encoded as the library's encode(text)
 * does, BOS included, and the output is decode(all ids), printed as it
 * grows but held back while it ends in an incomplete character.  Without
 * one, ids below 256 are bytes (the byte-level tokenizer of `shardtrain
 * prepare`) and larger ids are printed as <id>. */
#include "train/sample.h"
#include "tok/tokenizer.h"
#include "base/alloc.h"
#include "engine/fsdp.h"
#include "train/engine_setup.h"
#include "base/log.h"
#include "model/model.h"
#include "base/rng.h"
#include "train/train.h"
#include "kernels/kernels_select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* What prints the sequence as it grows. */
typedef struct {
    st_tokenizer *tok; /* NULL: byte level */
    int ids;           /* print ids */
    size_t printed;    /* bytes of the decoded text already printed */
} printer;

/* Print seq[from, n), or with a tokenizer the new part of decode(seq). */
static int print_tokens(printer *p, const int32_t *seq, int64_t from, int64_t n)
{
    if (p->ids) {
        for (int64_t i = from; i < n; i++)
            printf(i ? " %d" : "%d", seq[i]);
        return 0;
    }
    if (!p->tok) {
        for (int64_t i = from; i < n; i++)
            if (seq[i] < 256)
                putchar(seq[i]);
            else
                printf("<%d>", seq[i]);
        return 0;
    }
    char *text;
    size_t len;
    if (st_tokenizer_decode(p->tok, (const uint32_t *)seq, (size_t)n, 1, &text, &len)) {
        st_error(NULL, "out of memory decoding the sample");
        return ST_EXIT_FAILURE;
    }
    /* A byte-level token may end inside a character, which decodes to
     * U+FFFD until the next token completes it: wait for that. */
    int partial = len >= 3 && memcmp(text + len - 3, "\xef\xbf\xbd", 3) == 0;
    if (!partial && len > p->printed) {
        fwrite(text + p->printed, 1, len - p->printed, stdout);
        p->printed = len;
    }
    free(text);
    return 0;
}

/* The tokenizer: --tokenizer, else data.tokenizer, else model.init's
 * directory if it holds a tokenizer.json, else none (byte level). */
static int open_tokenizer(const st_config *cfg, const st_sample_options *opt,
                          st_tokenizer **tok)
{
    *tok = NULL;
    const char *path = opt->tokenizer ? opt->tokenizer
                       : cfg->data.tokenizer[0] ? cfg->data.tokenizer : NULL;
    char buf[4200];
    struct stat st;
    if (!path && cfg->model.init && stat(cfg->model.init, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, sizeof buf, "%s/tokenizer.json", cfg->model.init);
        if (stat(buf, &st) == 0)
            path = buf;
    }
    return path ? st_tokenizer_load(path, tok) : 0;
}

/* The prompt's ids in seq[0, *n). */
static int encode_prompt(const st_sample_options *opt, st_tokenizer *tok, int64_t V,
                         int32_t **seq, int64_t *n)
{
    st_token_list ids = {0};
    size_t plen = strlen(opt->prompt);
    int rc = 0;
    if (tok) {
        rc = st_tokenizer_encode(tok, opt->prompt, plen, 1, &ids);
        /* Nothing to condition on (no BOS, empty prompt): start from a
         * newline, a natural document boundary. */
        if (!rc && ids.n == 0)
            rc = st_tokenizer_encode(tok, "\n", 1, 0, &ids);
    } else {
        for (size_t i = 0; i < plen && !rc; i++)
            rc = st_token_list_push(&ids, (unsigned char)opt->prompt[i]);
        if (!rc && plen == 0)
            rc = st_token_list_push(&ids, '\n' < V ? '\n' : 0);
    }
    if (rc) {
        st_token_list_free(&ids);
        st_error(NULL, "out of memory encoding the prompt");
        return ST_EXIT_FAILURE;
    }
    for (size_t i = 0; i < ids.n; i++)
        if ((int64_t)ids.ids[i] >= V) {
            st_error("command line", "prompt token %u is outside the model's vocabulary "
                     "(%lld); hint: give the tokenizer the model was trained with",
                     ids.ids[i], (long long)V);
            st_token_list_free(&ids);
            return ST_EXIT_USAGE;
        }
    int64_t cap = (int64_t)ids.n + opt->tokens + 1;
    *seq = st_alloc(sizeof(int32_t) * (size_t)cap, ST_MEM_OTHER);
    for (size_t i = 0; i < ids.n; i++)
        (*seq)[i] = (int32_t)ids.ids[i];
    *n = (int64_t)ids.n;
    st_token_list_free(&ids);
    return 0;
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
    printer pr = {.ids = opt->ids};
    if ((rc = open_tokenizer(cfg_in, opt, &pr.tok)))
        return rc;
    int32_t *seq = NULL;
    int64_t n = 0;
    if ((rc = encode_prompt(opt, pr.tok, V, &seq, &n))) {
        st_tokenizer_free(pr.tok);
        return rc;
    }
    st_model model;
    if ((rc = st_model_init(&model, &cfg.model))) {
        st_free(seq);
        st_tokenizer_free(pr.tok);
        return rc;
    }
    st_fsdp eng;
    if ((rc = st_engine_open(&eng, &model, &cfg, NULL, kernels))) {
        st_fsdp_destroy(&eng);
        st_model_free(&model);
        st_free(seq);
        st_tokenizer_free(pr.tok);
        return rc;
    }
    int32_t *inputs = st_alloc(sizeof(int32_t) * (size_t)T, ST_MEM_OTHER);
    int32_t *targets = st_alloc(sizeof(int32_t) * (size_t)T, ST_MEM_OTHER);
    float *logits = st_alloc(sizeof(float) * (size_t)(T * V), ST_MEM_OTHER);
    double *probs = st_alloc(sizeof(double) * (size_t)V, ST_MEM_OTHER);
    /* Byte level prints the prompt as given (an empty one's newline
     * start is not part of it); a tokenizer prints decode(ids). */
    if (pr.tok || pr.ids)
        rc = print_tokens(&pr, seq, 0, n);
    else
        fwrite(opt->prompt, 1, strlen(opt->prompt), stdout);
    if (rc)
        goto out;
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
        if ((rc = print_tokens(&pr, seq, n - 1, n)))
            goto out;
    }
    putchar('\n');
    fflush(stdout);
out:
    st_free(seq);
    st_free(inputs);
    st_free(targets);
    st_free(logits);
    st_free(probs);
    st_fsdp_destroy(&eng);
    st_model_free(&model);
    st_tokenizer_free(pr.tok);
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
