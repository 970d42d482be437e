/* Bounds on products of configuration keys (see limits.h). */
#include "config/limits.h"
#include "base/log.h"
#include "config/origin.h"

#include <stdint.h>
#include <string.h>

/* a x b, or ST_SIZE_LIMIT + 1 when it would pass the limit (a, b >= 0). */
static int64_t mul(int64_t a, int64_t b)
{
    if (a != 0 && b > ST_SIZE_LIMIT / a)
        return ST_SIZE_LIMIT + 1;
    return a * b;
}

static int64_t add(int64_t a, int64_t b)
{
    return a > ST_SIZE_LIMIT - b ? ST_SIZE_LIMIT + 1 : a + b;
}

/* Path keys: a path longer than ST_PATH_LIMIT would be cut by the
 * fixed-size buffers that add a file name to it; an empty output directory
 * would name the current directory's root by accident. */
static int check_paths(const st_config *cfg)
{
    static const struct { const char *sec, *key; int nonempty; } keys[] = {
        {"model", "init", 0},     {"data", "train", 0},       {"data", "val", 0},
        {"checkpoint", "dir", 1}, {"checkpoint", "resume", 0}, {"log", "dir", 1},
    };
    const char *values[] = {cfg->model.init, cfg->data.train, cfg->data.val,
                            cfg->checkpoint.dir, cfg->checkpoint.resume, cfg->log.dir};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = values[i] ? values[i] : "";
        if (strlen(v) > ST_PATH_LIMIT)
            return st_config_error(cfg, keys[i].sec, keys[i].key,
                                   "%s.%s is %zu bytes long, over the %d this build "
                                   "accepts for a path; hint: use a shorter path or a "
                                   "symbolic link", keys[i].sec, keys[i].key, strlen(v),
                                   ST_PATH_LIMIT);
        if (keys[i].nonempty && !*v)
            return st_config_error(cfg, keys[i].sec, keys[i].key,
                                   "%s.%s is empty; hint: name a directory, e.g. %s",
                                   keys[i].sec, keys[i].key,
                                   !strcmp(keys[i].sec, "log") ? "logs" : "checkpoints");
    }
    return 0;
}

int st_config_check_sizes(const st_config *cfg)
{
    int rc = check_paths(cfg);
    if (rc)
        return rc;
    const st_model_config *m = &cfg->model;
    const st_train_config *t = &cfg->train;
    /* Parameters need no check here: with the schema's bounds the largest
     * model, 2^10 blocks of 4 d_model^2 + 3 d_model d_ff (d_model 2^20,
     * d_ff 2^22) plus (vocab_size + seq_len) x d_model embeddings, is under
     * 2^55 parameters. */
    const int64_t width = m->d_model > m->d_ff ? m->d_model : m->d_ff;
    /* Activations of one micro-batch: the widest row (the feed-forward
     * layer or the logits) and the attention scores, per token. */
    const int64_t tokens_micro = mul(t->micro_batch, m->seq_len);
    const int64_t row = width > m->vocab_size ? width : m->vocab_size;
    const int64_t acts = add(mul(mul(tokens_micro, row), m->n_layer),
                             mul(mul(tokens_micro, m->seq_len), m->n_head));
    if (acts > ST_SIZE_LIMIT)
        return st_config_error(cfg, "train", "micro_batch",
                               "one micro-batch's activations pass 2^59 values (micro_batch "
                               "%lld x seq_len %lld with this model); hint: lower "
                               "train.micro_batch or model.seq_len",
                               (long long)t->micro_batch, (long long)m->seq_len);
    /* Tokens of the whole run and of one evaluation, counted in int64. */
    const int64_t tokens_step = mul(t->global_batch, m->seq_len);
    if (mul(tokens_step, t->steps) > ST_SIZE_LIMIT)
        return st_config_error(cfg, "train", "steps",
                               "the run's tokens (steps %lld x global_batch %lld x seq_len "
                               "%lld) pass 2^59; hint: fewer steps or a smaller batch",
                               (long long)t->steps, (long long)t->global_batch,
                               (long long)m->seq_len);
    if (mul(tokens_step, t->eval_batches) > ST_SIZE_LIMIT)
        return st_config_error(cfg, "train", "eval_batches",
                               "one evaluation's tokens (eval_batches %lld x global_batch %lld "
                               "x seq_len %lld) pass 2^59; hint: fewer eval_batches",
                               (long long)t->eval_batches, (long long)t->global_batch,
                               (long long)m->seq_len);
    return 0;
}
