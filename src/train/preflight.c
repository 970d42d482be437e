/* Train's start-up checks (see preflight.h).  Each opens what train would
 * open, the way train opens it (the same functions, so the same error
 * lines), and closes it again: nothing is allocated beyond headers and
 * nothing is written.  Beyond train's own checks, check --inputs weighs
 * the room the run's checkpoints and final weights need against the free
 * space of checkpoint.dir's file system: a warning, since space comes and
 * goes and a full disk at a save loses nothing (the save fails whole). */
#include "train/preflight.h"
#include "base/log.h"
#include "base/test_faults.h"
#include "config/origin.h"
#include "ckpt/checkpoint.h"
#include "data/data.h"
#include "hf/hf_import.h"
#include "tok/tokenizer.h"
#include "model/model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

int st_preflight_batch(const st_config *cfg, int world)
{
    const int64_t B = cfg->train.micro_batch;
    if (world > 0 && cfg->train.global_batch % (B * world) != 0)
        return st_config_error(cfg, "train", "global_batch",
                               "train.global_batch is not a multiple of micro_batch x "
                               "data-parallel ranks (%lld x %d); hint: change global_batch "
                               "or micro_batch", (long long)B, world);
    return 0;
}

int st_preflight_config(const st_config *cfg, int world)
{
    int rc = st_preflight_batch(cfg, world);
    if (rc)
        return rc;
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
 * not foreseen.  p (4096 bytes) is left naming the nearest existing
 * directory. */
static int would_be_writable(const char *dir, int *exists, char *p)
{
    struct stat sb;
    snprintf(p, 4096, "%s", dir);
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
            snprintf(p, 4096, ".");
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
        char found[4096];
        int err = would_be_writable(d[i].dir, &exists, found);
        if (err)
            return st_preflight_output_dir_error(cfg, d[i].sec, d[i].key, d[i].dir, err);
        fprintf(out, "; %s.%s: %s, %s\n", d[i].sec, d[i].key, d[i].dir,
                exists ? "writable" : "made at start");
    }
    int rc = st_preflight_final_dir(cfg);
    return rc ? rc : st_ckpt_refuse_special(cfg->checkpoint.dir);
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

/* The checkpoint train would resume from (ckpt/checkpoint.h's plan), its
 * step in *step (-1: a fresh start). */
static int check_resume(const st_config *cfg, const st_model *m, FILE *out, int64_t *step_out)
{
    char dir[8192];
    int64_t step;
    int rc = st_ckpt_resume_plan(cfg, m, dir, sizeof dir, &step);
    *step_out = step;
    if (!rc && step >= 0)
        fprintf(out, "; resume: from %s at step %lld\n", dir, (long long)step);
    else if (!rc)
        fprintf(out, "; resume: %s (a fresh start)\n",
                strcmp(cfg->checkpoint.resume, "never") ? "no checkpoint saved yet"
                                                         : "never");
    return rc;
}

/* The bytes the run adds to checkpoint.dir at its fullest, walking its
 * saves: each checkpoint is written beside the ones kept (E there now),
 * then the oldest beyond checkpoint.keep are removed, and at the end the
 * final weights are written (staged beside the old ones).  *saves gets
 * the number of saves planned (train/boundary.c: every checkpoint.every
 * steps and at the last; with every = 0, one, as a preemption signal
 * would make). */
static double room_needed(const st_config *cfg, int64_t start, int64_t kept, double ckpt,
                          double final, int64_t *saves)
{
    const int64_t every = cfg->checkpoint.every, end = cfg->train.steps;
    *saves = every > 0 ? end / every - start / every + (end % every != 0 && end > start) : 1;
    int64_t n = kept, most = kept;
    for (int64_t k = 0; k < *saves && k <= cfg->checkpoint.keep + 1; k++) {
        most = n + 1 > most ? n + 1 : most;   /* written beside the kept */
        n = n + 1 < cfg->checkpoint.keep ? n + 1 : cfg->checkpoint.keep;
    }
    const double during = (double)(most - kept) * ckpt, at_end = (double)(n - kept) * ckpt + final;
    return during > at_end ? during : at_end;
}

/* What one checkpoint and the final weights take (ckpt/checkpoint.h: the
 * fp32 master, first and second moment of every trained element, the
 * vocabulary tail included; the final weights are the whole model in
 * fp32, and with LoRA its adapters too), against the free space of
 * checkpoint.dir's file system, asked at its nearest existing directory. */
void st_preflight_room(const st_config *cfg, const st_model *m, int64_t resume_step, FILE *out)
{
    char existing[4096];
    int exists;
    if (would_be_writable(cfg->checkpoint.dir, &exists, existing) != 0)
        return;   /* its error is check_output_dirs's */
    double ckpt = 0, adapters = 0;
    for (int u = 0; u < m->n_units; u++) {
        ckpt += 12.0 * (double)st_model_train_padded(m, u, 1);
        adapters += m->lora.rank ? 4.0 * (double)st_model_train_numel(m, u) : 0;
    }
    const double final = 4.0 * (double)m->n_params + adapters;
    long long *steps;
    const size_t kept = st_ckpt_list_steps(cfg->checkpoint.dir, &steps);
    free(steps);
    int64_t saves;
    const double need = room_needed(cfg, resume_step > 0 ? resume_step : 0, (int64_t)kept, ckpt,
                                    final, &saves);
    uint64_t free_bytes;
    struct statvfs vf;
    if (!st_fault_free_bytes(&free_bytes)) {
        if (statvfs(existing, &vf) != 0)
            return;   /* nothing to weigh against: said nowhere, as before */
        free_bytes = (uint64_t)vf.f_bavail * vf.f_frsize;
    }
    char c[32], fw[32], nd[32], fr[32];
    st_format_bytes(c, sizeof c, ckpt);
    st_format_bytes(fw, sizeof fw, final);
    st_format_bytes(nd, sizeof nd, need);
    st_format_bytes(fr, sizeof fr, (double)free_bytes);
    /* Three lines: an INI line holds 199 bytes. */
    if (out) {
        fprintf(out, "; checkpoint space: %s a checkpoint (%.0f bytes), %s the final weights "
                "(%.0f bytes)\n", c, ckpt, fw, final);
        fprintf(out, "; checkpoint space: %lld save(s) planned, %zu checkpoint(s) there, "
                "checkpoint.keep = %lld\n", (long long)saves, kept,
                (long long)cfg->checkpoint.keep);
        fprintf(out, "; checkpoint space: up to %s more (%.0f bytes), %s free (%llu bytes)\n", nd,
                need, fr, (unsigned long long)free_bytes);
    }
    if ((double)free_bytes < need)
        st_warn("checkpoint.dir = %s: %s free on its file system, and the run needs up to %s "
                "more (%lld checkpoint save(s) of %s with checkpoint.keep = %lld, and the final "
                "weights); hint: free some space, lower checkpoint.keep, or point "
                "checkpoint.dir at a larger file system", cfg->checkpoint.dir, fr, nd,
                (long long)saves, c, (long long)cfg->checkpoint.keep);
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
    int64_t resume_step = -1;
    rc = rc ? rc : check_output_dirs(cfg, out);
    rc = rc ? rc : check_resume(cfg, &m, out, &resume_step);
    if (!rc)
        st_preflight_room(cfg, &m, resume_step, out);
    if (built)
        st_model_free(&m);
    return rc;
}
