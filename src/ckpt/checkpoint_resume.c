/* Resuming a run (st_ckpt_resume, checkpoint.h): which checkpoint to load
 * (checkpoint.resume: never, auto, or a path), loading it into the FSDP
 * engine's shards on every rank through checkpoint_read.c's verified reads,
 * agreeing on the outcome across the world, and falling back to an older
 * step directory when auto finds a damaged one.  Kept apart from the
 * reader so that the manifest parser (fuzzed on its own,
 * tests/fuzz_manifest.c) reaches neither MPI nor the engine. */
#include "ckpt/checkpoint.h"
#include "base/log.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int latest_exists(const char *dir)
{
    char p[8192];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, ST_CKPT_LATEST);
    return lstat(p, &sb) == 0;
}

/* Keys that change which data a step sees or what the schedule does: a
 * changed value is allowed (fine-tuning on, a longer run) but is not the
 * continuation of the same run, so say so. */
static void warn_changed(const st_ckpt *c, const st_config *cfg)
{
    /* The frozen base is read again from model.init: another one would
     * not be the run the adapters were trained on. */
    if (c->lora.rank && strcmp(c->lora_base, cfg->model.init))
        st_warn("%s: the adapters were trained on model.init = %s, this run has %s; the "
                "run continues on the new base weights", c->manifest_path, c->lora_base,
                cfg->model.init);
    json_t *train = json_object_get(json_object_get((json_t *)c->root, "config"), "train");
    const struct { const char *key; int64_t now; } keys[] = {
        {"seed", cfg->train.seed}, {"global_batch", cfg->train.global_batch},
        {"steps", cfg->train.steps}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(train, keys[i].key);
        if (json_is_integer(v) && json_integer_value(v) != keys[i].now)
            st_warn("%s: saved with train.%s = %lld, this run has %lld; the run continues "
                    "with the new value", c->manifest_path, keys[i].key,
                    (long long)json_integer_value(v), (long long)keys[i].now);
    }
}

/* A checkpoint past the configured end would "finish" at once without
 * training a step: say so instead (ST_EXIT_USAGE, err filled). */
static int past_the_end(const st_ckpt *c, const st_config *cfg, char *err, size_t n)
{
    if (c->step <= cfg->train.steps)
        return 0;
    /* A long path is cut to fit err, as checkpoint_read.c's messages are. */
    if (snprintf(err, n, "%s: field step (%lld) is past train.steps (%lld); hint: raise "
                 "train.steps to continue this run, or resume another checkpoint",
                 c->manifest_path, (long long)c->step, (long long)cfg->train.steps) < 0)
        err[0] = 0;
    return ST_EXIT_USAGE;
}

static int load_into(st_fsdp *f, const st_config *cfg, const char *dir, char *err, size_t n,
                     int64_t *step)
{
    st_ckpt c;
    int rc = st_ckpt_open(&c, dir, f->model, err, n);
    /* The shards are backend memory: each array crosses from the host in
     * pieces through a bounded staging buffer (uncounted I/O space, like
     * read_bytes' block buffer). */
    static const st_fsdp_array arr[3] = {ST_FSDP_PARAMS, ST_FSDP_ADAM_M, ST_FSDP_ADAM_V};
    float *stage = rc ? NULL : malloc(sizeof(float) * (size_t)ST_FSDP_STAGE);
    if (!rc && !stage) {
        /* Printed here, not left in err: it is this rank's failure, not the
         * checkpoint's, and the only one with ST_EXIT_FAILURE. */
        st_error(NULL, "out of memory allocating a host staging buffer");
        rc = ST_EXIT_FAILURE;
    }
    for (int u = 0; u < f->n_units && !rc; u++) {
        const st_fsdp_unit *x = &f->units[u];
        for (int k = 0; k < 3 && !rc; k++) {
            for (int64_t a = 0; a < x->shard && !rc; a += ST_FSDP_STAGE) {
                int64_t len = x->shard - a < ST_FSDP_STAGE ? x->shard - a : ST_FSDP_STAGE;
                rc = st_ckpt_read_range(&c, u, k, x->lo + a, x->lo + a + len, stage, err, n);
                if (!rc)
                    st_fsdp_shard_from_host(f, u, arr[k], a, len, stage);
            }
        }
    }
    free(stage);
    rc = rc ? rc : past_the_end(&c, cfg, err, n);
    if (!rc) {
        f->opt_steps = c.opt_steps;
        *step = c.step;
        if (st_log_rank() == 0)
            warn_changed(&c, cfg);
    }
    st_ckpt_close(&c);
    return rc;
}

/* Load on every rank; a failure anywhere fails everywhere, reported once
 * (by the lowest failing rank) as an error, or as a warning when falling
 * back. */
static int load_agreed(st_fsdp *f, const st_config *cfg, const st_runtime *rt, const char *dir,
                       int as_warning, int64_t *step)
{
    char err[1024] = "";
    int rc = load_into(f, cfg, dir, err, sizeof err, step);
    int first_bad = st_runtime_agree(rc ? rt->world - rt->rank : 0);
    if (!first_bad)
        return 0;
    /* Out of memory says nothing about the checkpoint: stop rather than
     * fall back to an older one. */
    if (st_runtime_agree(rc == ST_EXIT_FAILURE ? rc : 0))
        return ST_EXIT_FAILURE;
    if (rt->rank == rt->world - first_bad) {
        if (as_warning)
            st_warn("%s; falling back to an older checkpoint", err);
        else
            st_error(NULL, "%s", err);
    }
    return ST_EXIT_USAGE;
}

static int cmp_desc(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t st_ckpt_list_steps(const char *dir, long long **out)
{
    DIR *d = opendir(dir);
    size_t n = 0, cap = 0;
    *out = NULL;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long s;
        int nc = 0;
        if (sscanf(e->d_name, "step_%8lld%n", &s, &nc) == 1 && nc == 13 && !e->d_name[nc]) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                *out = realloc(*out, cap * sizeof **out);
            }
            (*out)[n++] = s;
        }
    }
    closedir(d);
    if (n > 1)   /* qsort(NULL, 0, ...) is undefined (UBSan, tests/manifest.sh) */
        qsort(*out, n, sizeof **out, cmp_desc);
    return n;
}

/* Tries the checkpoint in dir: 0 with *step set, or an exit status with
 * the reason printed (a warning when as_warning, the walk then falling
 * back to an older one; ST_EXIT_FAILURE stops the walk). */
typedef int (*resume_try)(void *ctx, const char *dir, int as_warning, int64_t *step);

/* Which checkpoint checkpoint.resume names, tried with `try`: never, a
 * path, or auto (`latest` first, then every older step directory, newest
 * first).  Shared by the resume and its plan, so that `check --inputs`
 * looks exactly where train looks.  Returns 0 with dir (n bytes) the one
 * that worked, or "" for a fresh start; or an exit status, its error
 * printed when speak is set. */
static int resume_walk(const st_config *cfg, int speak, resume_try try, void *ctx, char *dir,
                       size_t n, int64_t *step)
{
    const char *r = cfg->checkpoint.resume;
    char err[1024], latest[8192] = "";
    dir[0] = '\0';
    if (!strcmp(r, "never"))
        return 0;
    if (strcmp(r, "auto")) {
        int rc = st_ckpt_resolve(r, dir, n, err, sizeof err);
        if (rc && speak)
            st_error(NULL, "%s", err);
        rc = rc ? rc : try(ctx, dir, 0, step);
        if (rc)
            dir[0] = '\0';
        return rc;
    }
    long long *steps;
    size_t ns = st_ckpt_list_steps(cfg->checkpoint.dir, &steps);
    int rc = st_ckpt_resolve(cfg->checkpoint.dir, dir, n, err, sizeof err);
    int tried = 0;
    if (!rc) {
        tried = 1;
        snprintf(latest, sizeof latest, "%s", dir);
        rc = try(ctx, dir, 1, step);
    } else if (ns > 0) {
        if (speak)
            st_warn("%s; trying the step directories", err);
    } else if (latest_exists(cfg->checkpoint.dir)) {
        /* A `latest` that names nothing usable, and no step directory to
         * fall back to: starting afresh would silently throw the run away. */
        if (speak)
            st_error(NULL, "%s", err);
        free(steps);
        dir[0] = '\0';
        return ST_EXIT_USAGE;
    }
    for (size_t i = 0; i < ns && rc != ST_EXIT_FAILURE && (rc || !tried); i++) {
        st_ckpt_step_dir(cfg->checkpoint.dir, steps[i], dir, n);
        if (tried && !strcmp(dir, latest))
            continue;
        tried = 1;
        rc = try(ctx, dir, 1, step);
    }
    free(steps);
    if (!tried || rc)
        dir[0] = '\0';
    if (!tried)
        return 0;  /* nothing saved yet: a fresh start */
    if (rc == ST_EXIT_FAILURE)
        return rc; /* reported where it happened */
    if (rc) {
        if (speak)
            st_error(cfg->checkpoint.dir, "checkpoint.resume = auto found no loadable "
                     "checkpoint (see the warnings above); hint: fix or remove them, or set "
                     "checkpoint.resume = never to start afresh");
        return ST_EXIT_USAGE;
    }
    return 0;
}

typedef struct {
    st_fsdp *f;
    const st_config *cfg;
    const st_runtime *rt;
} load_ctx;

static int try_load(void *ctx, const char *dir, int as_warning, int64_t *step)
{
    const load_ctx *x = ctx;
    return load_agreed(x->f, x->cfg, x->rt, dir, as_warning, step);
}

int st_ckpt_resume(st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t *start)
{
    *start = 0;
    char dir[8192];
    load_ctx x = {f, cfg, rt};
    int rc = resume_walk(cfg, rt->rank == 0, try_load, &x, dir, sizeof dir, start);
    if (!rc && dir[0])
        st_info("shardtrain: resumed from %s at step %lld", dir, (long long)*start);
    return rc;
}

/* Every block a resume reads, verified: a resume at any world size reads,
 * over all its ranks, each unit's three arrays whole (load_into), so a
 * corrupt block anywhere in them fails some rank, and the plan must fail
 * there too (falling back, with auto, as the resume would).  Padding past
 * a unit's elements is never read, by either. */
static int plan_verify(st_ckpt *c, char *err, size_t n)
{
    float *buf = malloc(sizeof(float) * (size_t)ST_FSDP_STAGE);
    if (!buf) {
        st_error(NULL, "out of memory allocating a host staging buffer");
        return ST_EXIT_FAILURE;
    }
    int rc = 0;
    for (int u = 0; u < c->n_units && !rc; u++)
        for (int k = 0; k < 3 && !rc; k++)
            for (int64_t a = 0; a < c->numel[u] && !rc; a += ST_FSDP_STAGE) {
                const int64_t len = c->numel[u] - a < ST_FSDP_STAGE ? c->numel[u] - a
                                                                    : ST_FSDP_STAGE;
                rc = st_ckpt_read_range(c, u, k, a, a + len, buf, err, n);
            }
    free(buf);
    return rc;
}

/* The manifest of dir opened and checked as load_into checks it, and the
 * blocks it would read verified, nothing loaded. */
static int plan_open(const st_config *cfg, const st_model *m, const char *dir, char *err,
                     size_t n, int64_t *step)
{
    st_ckpt c;
    int rc = st_ckpt_open(&c, dir, m, err, n);
    rc = rc ? rc : plan_verify(&c, err, n);
    rc = rc ? rc : past_the_end(&c, cfg, err, n);
    if (!rc)
        *step = c.step;
    st_ckpt_close(&c);
    return rc;
}

typedef struct {
    const st_config *cfg;
    const st_model *m;
} plan_ctx;

static int try_plan(void *ctx, const char *dir, int as_warning, int64_t *step)
{
    const plan_ctx *x = ctx;
    char err[1024];
    int rc = plan_open(x->cfg, x->m, dir, err, sizeof err, step);
    if (rc == ST_EXIT_FAILURE)
        return rc;   /* out of memory, printed: nothing to say of the checkpoint */
    if (rc && as_warning)
        st_warn("%s; falling back to an older checkpoint", err);
    else if (rc)
        st_error(NULL, "%s", err);
    return rc;
}

int st_ckpt_resume_plan(const st_config *cfg, const st_model *m, char *dir, size_t n,
                        int64_t *step)
{
    *step = -1;
    plan_ctx x = {cfg, m};
    int rc = resume_walk(cfg, 1, try_plan, &x, dir, n, step);
    if (rc || !dir[0])
        *step = -1;
    return rc;
}
