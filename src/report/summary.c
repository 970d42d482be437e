/* The run summary (see summary.h): carrying a previous segment's totals,
 * writing summary.json, and the closing lines. */
#include "report/summary.h"
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *st_summary_status(int exit_status)
{
    switch (exit_status) {
    case ST_EXIT_OK: return "completed";
    case ST_EXIT_PREEMPTED: return "preempted";
    default: return "failed";
    }
}

/* ---- reading the previous segment's summary --------------------------- */

static double get_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double get_sub(const json_t *o, const char *obj, const char *key)
{
    return get_num(json_object_get(o, obj), key);
}

/* Carries the totals of a previous segment's summary when it describes the
 * run being resumed: it had done at least the steps the checkpoint holds.
 * Times that did not parse count as 0: a summary is a report, and a resume
 * must not fail over one. */
static void carry(st_run_summary *s, const json_t *prev, int64_t resumed_from_step)
{
    const double done = get_num(prev, "steps_done");
    if (!(done >= (double)resumed_from_step))
        return;
    const double segments = get_num(prev, "segments");
    s->segments = segments >= 1 && segments < 1e9 ? (int)segments + 1 : 2;
    const double wall = get_num(prev, "wall_time_s");
    s->wall_s = isfinite(wall) && wall > 0 ? wall : 0.0;
    const double ck = get_sub(prev, "time_lost_s", "checkpoints");
    const double ev = get_sub(prev, "time_lost_s", "evaluation");
    const double rs = get_sub(prev, "time_lost_s", "restarts");
    s->ckpt_s = isfinite(ck) && ck > 0 ? ck : 0.0;
    s->eval_s = isfinite(ev) && ev > 0 ? ev : 0.0;
    s->restart_s = isfinite(rs) && rs > 0 ? rs : 0.0;
    const double ts = get_num(prev, "train_time_s"), tt = get_num(prev, "train_tokens");
    if (isfinite(ts) && ts > 0 && isfinite(tt) && tt > 0) {
        s->train_s = ts;
        s->train_tokens = (int64_t)tt;
        /* Steps the previous segment did after the checkpoint are done
         * again: their time is lost to the restart. */
        const double redone = done - (double)resumed_from_step;
        const double mean_step = get_num(prev, "mean_step_s");
        if (redone > 0 && isfinite(mean_step) && mean_step > 0)
            s->restart_s += redone * mean_step;
    }
    const json_t *val = json_object_get(prev, "val_loss");
    const double best = get_num(val, "best"), best_step = get_num(val, "best_step");
    if (isfinite(best) && best_step <= (double)resumed_from_step) {
        s->have_val = 1;
        s->best_val = s->final_val = best;
        s->best_val_step = s->final_val_step = (int64_t)best_step;
        const double fin = get_num(val, "final"), fin_step = get_num(val, "final_step");
        if (isfinite(fin) && fin_step <= (double)resumed_from_step) {
            s->final_val = fin;
            s->final_val_step = (int64_t)fin_step;
        }
    }
    const char *ck_path = json_string_value(json_object_get(prev, "last_checkpoint"));
    if (ck_path)
        snprintf(s->last_ckpt, sizeof s->last_ckpt, "%s", ck_path);
}

void st_summary_begin(st_run_summary *s, const char *path, int64_t resumed_from_step,
                      int64_t steps_total)
{
    memset(s, 0, sizeof *s);
    s->segments = 1;
    s->steps_total = steps_total;
    s->steps_done = resumed_from_step;
    s->final_tok_s = s->final_mfu = s->mfu_per_tok_s = NAN;
    if (resumed_from_step <= 0)
        return;
    json_error_t err;
    /* A regular file only: a FIFO in its place must not hang the resume. */
    FILE *fp = st_fopen_regular(path);
    json_t *prev = fp ? json_loadf(fp, 0, &err) : NULL;
    if (fp)
        fclose(fp);
    if (!prev)
        return;
    if (json_is_object(prev))
        carry(s, prev, resumed_from_step);
    json_decref(prev);
}

/* ---- summary.json ----------------------------------------------------- */

/* JSON has no NaN or infinity: an unknown value is null. */
static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *summary_json(const st_run_summary *s, const char *status, int exit_status,
                            int requeue)
{
    const double mean_tok_s = s->train_s > 0 ? (double)s->train_tokens / s->train_s : NAN;
    json_t *peaks = json_array();
    if (s->rank_peaks)
        for (int r = 0; r < s->world; r++)
            json_array_append_new(peaks, json_integer((json_int_t)s->rank_peaks[r]));
    else
        json_array_append_new(peaks, json_integer((json_int_t)s->rank0_peak));
    json_t *val = json_null();
    if (s->have_val)
        val = json_pack("{s:o, s:I, s:o, s:I}", "best", num_or_null(s->best_val), "best_step",
                        (json_int_t)s->best_val_step, "final", num_or_null(s->final_val),
                        "final_step", (json_int_t)s->final_val_step);
    return json_pack(
        "{s:s, s:i, s:b, s:I, s:I, s:I, s:i, s:i, s:o, s:{s:o, s:o, s:o}, s:o, s:I, s:o,"
        " s:{s:o, s:o}, s:{s:o, s:o}, s:o, s:o, s:o}",
        "status", status, "exit_status", exit_status, "requeue_requested", requeue,
        "steps_done", (json_int_t)s->steps_done, "steps_total", (json_int_t)s->steps_total,
        "tokens_done", (json_int_t)s->tokens_done, "segments", s->segments, "restarts",
        s->segments - 1, "wall_time_s", json_real(s->wall_s), "time_lost_s", "checkpoints",
        json_real(s->ckpt_s), "evaluation", json_real(s->eval_s), "restarts",
        json_real(s->restart_s), "train_time_s", json_real(s->train_s), "train_tokens",
        (json_int_t)s->train_tokens, "mean_step_s",
        num_or_null(s->steps_done > 0 && s->train_tokens > 0 && s->have_step
                        ? s->train_s * (double)s->tokens_done /
                              ((double)s->train_tokens * (double)s->steps_done)
                        : NAN),
        "tokens_per_s", "mean", num_or_null(mean_tok_s), "final", num_or_null(s->final_tok_s),
        "mfu", "mean", num_or_null(mean_tok_s * s->mfu_per_tok_s), "final",
        num_or_null(s->final_mfu), "val_loss", val, "peak_bytes_per_rank", peaks,
        "last_checkpoint", s->last_ckpt[0] ? json_string(s->last_ckpt) : json_null());
}

int st_summary_write(const st_run_summary *s, const char *path, const char *status,
                     int exit_status, int requeue)
{
    json_t *o = summary_json(s, status, exit_status, requeue);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(o);
    if (!text) {
        st_error(path, "cannot format the run summary (out of memory)");
        return -1;
    }
    const size_t n = strlen(text);
    char *body = realloc(text, n + 2);
    if (!body) {
        free(text);
        st_error(path, "cannot format the run summary (out of memory)");
        return -1;
    }
    memcpy(body + n, "\n", 2);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (st_refuse_special(path)) {   /* its one error line is printed */
        free(body);
        return -1;
    }
    int rc = st_file_write_atomic(path, tmp, 0644, st_file_write_string, body);
    free(body);
    if (rc != ST_ATOMIC_DONE) {
        st_error(path, "cannot write the run summary: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the closing lines ------------------------------------------------ */

static void format_duration(char *buf, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, n, "%.1fs", s);
}

void st_summary_print(const st_run_summary *s, const char *status, int exit_status)
{
    char wall[32], ck[32], ev[32], rs[32];
    format_duration(wall, sizeof wall, s->wall_s);
    format_duration(ck, sizeof ck, s->ckpt_s);
    format_duration(ev, sizeof ev, s->eval_s);
    format_duration(rs, sizeof rs, s->restart_s);
    char ended[64];
    if (exit_status == ST_EXIT_OK)
        snprintf(ended, sizeof ended, "%s", status);
    else
        snprintf(ended, sizeof ended, "%s (exit status %d)", status, exit_status);
    st_info("shardtrain: summary: %s; %lld/%lld steps, %lld tokens, wall %s over %d segment(s) "
            "(checkpoints %s, evaluation %s, restarts %s)",
            ended, (long long)s->steps_done, (long long)s->steps_total,
            (long long)s->tokens_done, wall, s->segments, ck, ev, rs);
    const double mean = s->train_s > 0 ? (double)s->train_tokens / s->train_s : NAN;
    char mfu[64] = "mfu unknown (log.peak_tflops = 0)";
    if (isfinite(s->final_mfu))
        snprintf(mfu, sizeof mfu, "mfu mean %.1f%% final %.1f%%",
                 100.0 * mean * s->mfu_per_tok_s, 100.0 * s->final_mfu);
    st_info("shardtrain: summary: tokens/s mean %.0f final %.0f; %s", mean, s->final_tok_s, mfu);
    if (s->have_val)
        st_info("shardtrain: summary: val_loss best %.4f (step %lld) final %.4f (step %lld)", s->best_val,
                (long long)s->best_val_step, s->final_val, (long long)s->final_val_step);
    char line[1024];
    int len = snprintf(line, sizeof line, "shardtrain: summary: peak memory per rank:");
    const int n = s->rank_peaks ? s->world : 1;
    for (int r = 0; r < n && len < (int)sizeof line - 40; r++) {
        char b[32];
        st_format_bytes(b, sizeof b, (double)(s->rank_peaks ? s->rank_peaks[r] : s->rank0_peak));
        len += snprintf(line + len, sizeof line - (size_t)len, "%s %s", r ? "," : "", b);
    }
    if (!s->rank_peaks && s->world > 1)
        snprintf(line + len, sizeof line - (size_t)len, " (rank 0 only: the run failed)");
    st_info("%s", line);
    st_info("shardtrain: summary: last checkpoint: %s", s->last_ckpt[0] ? s->last_ckpt : "none");
}
