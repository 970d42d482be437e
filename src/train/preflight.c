/* Train's start-up checks (see preflight.h).  Each opens what train would
 * open, the way train opens it (the same functions, so the same error
 * lines), and closes it again: nothing is allocated beyond headers and
 * nothing is written. */
#include "train/preflight.h"
#include "base/log.h"
#include "config/origin.h"
#include "io/checkpoint.h"
#include "io/data.h"
#include "io/hf_import.h"
#include "io/tokenizer.h"
#include "model/model.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* data.tokenizer must load and fit the model's vocabulary, so the final
 * weights are never written beside a tokenizer that cannot drive them. */
static int check_tokenizer(const st_config *cfg)
{
    if (!cfg->data.tokenizer[0])
        return 0;
    st_tokenizer *t;
    int rc = st_tokenizer_load(cfg->data.tokenizer, &t);
    if (rc)
        return rc;
    const int64_t n = st_tokenizer_vocab_size(t);
    st_tokenizer_free(t);
    if (n > cfg->model.vocab_size)
        return st_config_error(cfg, "data", "tokenizer",
                               "data.tokenizer has %lld ids but model.vocab_size is %lld; "
                               "hint: set model.vocab_size to at least %lld", (long long)n,
                               (long long)cfg->model.vocab_size, (long long)n);
    return 0;
}

int st_preflight_config(const st_config *cfg, int world)
{
    const int64_t B = cfg->train.micro_batch;
    if (world > 0 && cfg->train.global_batch % (B * world) != 0)
        return st_config_error(cfg, "train", "global_batch",
                               "train.global_batch is not a multiple of micro_batch x "
                               "data-parallel ranks (%lld x %d); hint: change global_batch "
                               "or micro_batch", (long long)B, world);
    if (!cfg->data.train[0])
        return st_config_error(cfg, "data", "train",
                               "data.train is empty; hint: point it at token shards, "
                               "e.g. made by `shardtrain prepare`");
    if (cfg->train.eval_every > 0 && !cfg->data.val[0])
        return st_config_error(cfg, "train", "eval_every",
                               "train.eval_every is set but data.val is empty; "
                               "hint: set data.val or eval_every = 0");
    return check_tokenizer(cfg);
}

/* data.KEY's shards opened as train opens them, then closed. */
static int check_data(const st_config *cfg, const char *key, const char *pattern, FILE *out)
{
    if (!pattern[0]) {
        fprintf(out, "; data.%s: none\n", key);
        return 0;
    }
    const char *file;
    int line;
    st_config_origin_of(cfg, "data", key, &file, &line);
    st_dataset ds;
    int rc = st_dataset_open(&ds, pattern, cfg->model.seq_len, cfg->model.vocab_size, file,
                             line);
    if (rc)
        return rc;
    fprintf(out, "; data.%s: %d file(s), %lld tokens\n", key, ds.n_files,
            (long long)ds.n_tokens);
    st_dataset_close(&ds);
    return 0;
}

int st_preflight_output_dir_error(const st_config *cfg, const char *section, const char *key,
                                  const char *dir, int err)
{
    return st_config_error(cfg, section, key,
                           "%s.%s = %s: cannot create or write to this directory: %s; hint: "
                           "point it at a directory you can write", section, key, dir,
                           strerror(err));
}

/* Whether train's mkdir -p of dir and a file made in it would work,
 * without making anything: 0, or the errno it would meet (ENOTDIR where
 * dir or a directory on its path is a file; EACCES where the nearest
 * existing one is not writable).  Another user's quota or a full disk are
 * not foreseen. */
static int would_be_writable(const char *dir, int *exists)
{
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s", dir);
    *exists = 0;
    for (int first = 1;; first = 0) {
        if (stat(p, &sb) == 0) {
            *exists = first;
            if (!S_ISDIR(sb.st_mode))
                return ENOTDIR;
            return access(p, W_OK | X_OK) == 0 ? 0 : errno;
        }
        if (errno != ENOENT || !strcmp(p, ".") || !strcmp(p, "/"))
            return errno;   /* (a working directory removed: ENOENT) */
        /* its parent, "." for a relative name without one */
        char *slash = strrchr(p, '/');
        while (slash && slash > p && slash[1] == '\0') {   /* trailing slashes */
            *slash = '\0';
            slash = strrchr(p, '/');
        }
        if (!slash)
            snprintf(p, sizeof p, ".");
        else if (slash == p)
            p[1] = '\0';
        else
            *slash = '\0';
    }
}

static int check_output_dirs(const st_config *cfg, FILE *out)
{
    const struct { const char *sec, *key, *dir; } d[2] = {
        {"log", "dir", cfg->log.dir}, {"checkpoint", "dir", cfg->checkpoint.dir}};
    for (int i = 0; i < 2; i++) {
        int exists;
        int err = would_be_writable(d[i].dir, &exists);
        if (err)
            return st_preflight_output_dir_error(cfg, d[i].sec, d[i].key, d[i].dir, err);
        fprintf(out, "; %s.%s: %s, %s\n", d[i].sec, d[i].key, d[i].dir,
                exists ? "writable" : "made at start");
    }
    return st_preflight_final_dir(cfg);
}

int st_preflight_final_dir(const st_config *cfg)
{
    char final[4200];
    struct stat sb;
    snprintf(final, sizeof final, "%s/final", cfg->checkpoint.dir);
    if (lstat(final, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return st_config_error(cfg, "checkpoint", "dir",
                               "checkpoint.dir = %s: %s is a file where the final weights "
                               "go (a directory); hint: move it away, or point "
                               "checkpoint.dir elsewhere", cfg->checkpoint.dir, final);
    return 0;
}

/* The checkpoint train would resume from (io/checkpoint.h's plan). */
static int check_resume(const st_config *cfg, const st_model *m, FILE *out)
{
    char dir[8192];
    int64_t step;
    int rc = st_ckpt_resume_plan(cfg, m, dir, sizeof dir, &step);
    if (!rc && step >= 0)
        fprintf(out, "; resume: from %s at step %lld\n", dir, (long long)step);
    else if (!rc)
        fprintf(out, "; resume: %s (a fresh start)\n",
                strcmp(cfg->checkpoint.resume, "never") ? "no checkpoint saved yet"
                                                         : "never");
    return rc;
}

int st_preflight_inputs(const st_config *cfg, FILE *out)
{
    int rc = check_data(cfg, "train", cfg->data.train, out);
    rc = rc ? rc : check_data(cfg, "val", cfg->data.val, out);
    st_model m = {0};
    st_model_config mc = cfg->model;
    st_lora_config lc = cfg->lora;
    int built = 0;
    if (!rc) {
        rc = st_model_init(&m, &mc);
        built = !rc;
        rc = rc ? rc : st_model_add_lora(&m, &lc);
    }
    if (!rc && strcmp(cfg->model.init, "random") == 0) {
        fprintf(out, "; model.init: random, %lld parameters\n", (long long)m.n_params);
    } else if (!rc) {
        st_hf_weights *w;
        rc = st_hf_open(cfg->model.init, &m, &cfg->model, &w);
        st_hf_close(w, NULL);
        if (!rc)
            fprintf(out, "; model.init: %s matches the configured shape, %lld parameters\n",
                    cfg->model.init, (long long)m.n_params);
    }
    rc = rc ? rc : check_output_dirs(cfg, out);
    rc = rc ? rc : check_resume(cfg, &m, out);
    if (built)
        st_model_free(&m);
    return rc;
}
