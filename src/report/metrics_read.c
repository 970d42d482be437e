/* metrics.jsonl back into arrays (see metrics_read.h).  Each line is
 * parsed by jansson on its own, so a bad line is named by its number. */
#include "report/metrics_read.h"
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HINT "; hint: metrics.jsonl holds one JSON object per line, as shardtrain train writes it"

/* Room for one more element in a growing array. */
static int grow(void **p, int64_t n, int64_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    int64_t c = *cap ? *cap * 2 : 256;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* The orphan rule: how many of the n records (each starting with its
 * int64_t step, `size` bytes apart) stay when a record of `step` arrives -
 * those with a smaller step. */
static int64_t keep_before(const void *records, int64_t n, size_t size, int64_t step)
{
    while (n > 0) {
        int64_t last;
        memcpy(&last, (const char *)records + (size_t)(n - 1) * size, sizeof last);
        if (last < step)
            break;
        n--;
    }
    return n;
}

/* Drop the orphans of kind (records, *n) and make room for one more. */
static int make_room(st_metrics *m, void **records, int64_t *n, int64_t *cap, size_t size,
                     int64_t step)
{
    int64_t keep = keep_before(*records, *n, size, step);
    m->n_orphans += *n - keep;
    *n = keep;
    return grow(records, *n, cap, size);
}

typedef struct {
    const char *path;
    int line;
    st_metrics *m;
    int64_t cap_steps, cap_evals, cap_skipped;
} reader;

static int bad(const reader *r, const char *what)
{
    st_error_at(r->path, r->line, "%s" HINT, what);
    return ST_EXIT_USAGE;
}

/* A JSON number (integer or real) under key, into *out; null, which the
 * writer puts for a value that is not finite, is NaN: not known. */
static int number(const reader *r, json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v)) {
        char msg[128];
        snprintf(msg, sizeof msg, "\"%s\" is %s", key,
                 v ? "neither a number nor null" : "missing");
        return bad(r, msg);
    }
    *out = json_number_value(v);
    return 0;
}

static int no_memory(const reader *r)
{
    st_error(r->path, "out of memory reading the metrics");
    return ST_EXIT_FAILURE;
}

static int add_step(reader *r, json_t *o, int64_t step)
{
    st_metrics *m = r->m;
    st_metrics_step s = {.step = step, .tokens = -1, .mfu = NAN};
    int rc = number(r, o, "loss", &s.loss);
    rc = rc ? rc : number(r, o, "lr", &s.lr);
    rc = rc ? rc : number(r, o, "tokens_per_s", &s.tokens_per_s);
    /* Absent in logs of runs without log.peak_tflops before it was null. */
    if (!rc && json_object_get(o, "mfu"))
        rc = number(r, o, "mfu", &s.mfu);
    if (rc)
        return rc;
    json_t *tokens = json_object_get(o, "tokens");
    if (json_is_integer(tokens) && json_integer_value(tokens) >= 0)
        s.tokens = json_integer_value(tokens);
    else if (tokens)
        return bad(r, "\"tokens\" is not a whole number >= 0");
    if (make_room(m, (void **)&m->steps, &m->n_steps, &r->cap_steps, sizeof *m->steps, step))
        return no_memory(r);
    m->steps[m->n_steps++] = s;
    return 0;
}

static int add_eval(reader *r, json_t *o, int64_t step)
{
    st_metrics *m = r->m;
    st_metrics_eval e = {.step = step};
    int rc = number(r, o, "val_loss", &e.val_loss);
    if (rc)
        return rc;
    if (make_room(m, (void **)&m->evals, &m->n_evals, &r->cap_evals, sizeof *m->evals, step))
        return no_memory(r);
    m->evals[m->n_evals++] = e;
    return 0;
}

static int add_skipped(reader *r, int64_t step)
{
    st_metrics *m = r->m;
    if (make_room(m, (void **)&m->skipped, &m->n_skipped, &r->cap_skipped, sizeof *m->skipped,
                  step))
        return no_memory(r);
    m->skipped[m->n_skipped++] = step;
    return 0;
}

/* One line: blank lines and objects of no known kind are passed over. */
static int read_line(reader *r, const char *text)
{
    if (text[strspn(text, " \t\r\n")] == '\0')
        return 0;
    json_error_t err;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!o) {
        char msg[256], why[200];
        snprintf(msg, sizeof msg, "not JSON: %s", st_printable(err.text, why, sizeof why));
        return bad(r, msg);
    }
    /* json_object_get of a non-object is NULL. */
    int is_step = json_object_get(o, "loss") != NULL;
    int is_eval = json_object_get(o, "val_loss") != NULL;
    int is_skip = json_object_get(o, "skipped") != NULL;
    json_t *step = json_object_get(o, "step");
    int rc = 0;
    if (!json_is_object(o))
        rc = bad(r, "not a JSON object");
    else if (!is_step && !is_eval && !is_skip)
        rc = 0;
    else if (!json_is_integer(step) || json_integer_value(step) < 1)
        rc = bad(r, "\"step\" is not a whole number >= 1");
    else if (is_skip)
        rc = add_skipped(r, json_integer_value(step));
    else if (is_eval)
        rc = add_eval(r, o, json_integer_value(step));
    else
        rc = add_step(r, o, json_integer_value(step));
    json_decref(o);
    return rc;
}

int st_metrics_read(const char *path, st_metrics *m)
{
    memset(m, 0, sizeof *m);
    /* A regular file only: a FIFO in its place must not hang. */
    FILE *f = st_fopen_regular(path);
    if (!f) {
        st_error(path, "cannot open: %s; hint: give a run's log.dir, where shardtrain "
                       "train writes metrics.jsonl",
                 errno == EINVAL ? "not a regular file" : strerror(errno));
        return errno == ENOENT || errno == ENOTDIR ? ST_EXIT_USAGE : ST_EXIT_FAILURE;
    }
    reader r = {.path = path, .m = m};
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    errno = 0;
    while (!rc && getline(&line, &cap, f) >= 0) {
        r.line++;
        rc = read_line(&r, line);
    }
    if (!rc && ferror(f)) {
        st_error(path, "read error: %s", strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    free(line);
    fclose(f);
    if (rc)
        st_metrics_free(m);
    return rc;
}

void st_metrics_free(st_metrics *m)
{
    free(m->steps);
    free(m->evals);
    free(m->skipped);
    memset(m, 0, sizeof *m);
}
