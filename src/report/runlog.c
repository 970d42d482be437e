/* The run log (see runlog.h): metrics.jsonl records and the same numbers
 * as TensorBoard scalars (tensorboard.h), the progress line and its ETA,
 * and the bookkeeping the summary (summary.h) is made from. */
#include "report/runlog.h"
#include "base/files.h"
#include "base/log.h"
#include "config/origin.h"
#include "report/plot.h"
#include "report/summary.h"
#include "report/tensorboard.h"
#include "base/test_faults.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

struct st_runlog {
    const st_config *cfg;
    int metrics;                   /* metrics.jsonl, O_APPEND */
    off_t metrics_whole;           /* its size up to its last whole record */
    int metrics_failed;            /* a record could not be written */
    st_tb_writer *tb;              /* NULL when log.tensorboard is false */
    char tb_path[4200];            /* its file, "" for none */
    char metrics_path[4200], summary_path[4200];
    char plot_path[4200];          /* "" when log.plot is false */
    int final_written;             /* the final weights are in place */
    st_run_summary sum;
    int world;
    int64_t resumed_from;
    double wall_before;            /* wall time of earlier segments */
    double t_begin, t_first_step;  /* t_first_step: 0 until the first step */
    int64_t steps_here;            /* applied steps this segment */
    double step_s_here;            /* their wall time */
    int64_t evals_here, ckpts_here;
    double eval_s_here, ckpt_s_here;
};

double st_runlog_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* JSON has no NaN or infinity: an unknown or non-finite value is null. */
static void put_number(FILE *f, const char *fmt, double v)
{
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

static void print_outputs(const st_runlog *lg, const char *when)
{
    const st_config *cfg = lg->cfg;
    char ckpt[128];
    if (cfg->checkpoint.every > 0)
        snprintf(ckpt, sizeof ckpt, "every %lld steps and on a preemption signal",
                 (long long)cfg->checkpoint.every);
    else
        snprintf(ckpt, sizeof ckpt, "only on a preemption signal (checkpoint.every = 0)");
    char plot[4300] = "";
    if (lg->plot_path[0])
        snprintf(plot, sizeof plot, ", plot %s", lg->plot_path);
    /* The closing line names the final weights only when this run wrote
     * them: a preempted, failed or crashed run did not. */
    char final[4300] = "final weights not written";
    if (strcmp(when, "wrote") != 0 || lg->final_written)
        snprintf(final, sizeof final, "final weights %s/final/model.safetensors",
                 cfg->checkpoint.dir);
    st_info("shardtrain: %s: metrics %s, summary %s%s%s%s; checkpoints in %s/ (%s), %s",
            when, lg->metrics_path, lg->summary_path, plot,
            *lg->tb_path ? ", TensorBoard events " : "", lg->tb_path, cfg->checkpoint.dir, ckpt,
            final);
}

void st_runlog_final_weights(st_runlog *lg)
{
    if (lg)
        lg->final_written = 1;
}

/* The event file, starting with the resolved configuration as
 * `shardtrain check` prints it, shown at the first step this segment
 * logs: each resume adds its own. */
static int open_tensorboard(st_runlog *lg, int64_t resumed_from_step)
{
    int rc = st_tb_open(&lg->tb, lg->cfg->log.dir, resumed_from_step);
    if (rc)
        return rc;
    snprintf(lg->tb_path, sizeof lg->tb_path, "%s", st_tb_path(lg->tb));
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) {
        st_error(st_tb_path(lg->tb), "out of memory writing the configuration");
        return ST_EXIT_FAILURE;
    }
    st_config_print(lg->cfg, f);
    fclose(f);
    rc = st_tb_text_block(lg->tb, "config", resumed_from_step + 1, text);
    free(text);
    return rc;
}

int st_runlog_open(st_runlog **out, const st_config *cfg, int world,
                   int64_t resumed_from_step, double t_begin)
{
    *out = NULL;
    const char *dir = cfg->log.dir;
    int rc = st_mkdir_p(dir);
    if (rc)
        return rc;
    st_runlog *lg = calloc(1, sizeof *lg);
    if (!lg) {
        st_error(dir, "out of memory opening the run log");
        return ST_EXIT_FAILURE;
    }
    lg->cfg = cfg;
    lg->world = world;
    lg->resumed_from = resumed_from_step;
    lg->t_begin = t_begin;
    snprintf(lg->metrics_path, sizeof lg->metrics_path, "%s/metrics.jsonl", dir);
    snprintf(lg->summary_path, sizeof lg->summary_path, "%s/summary.json", dir);
    if (cfg->log.plot)
        snprintf(lg->plot_path, sizeof lg->plot_path, "%s/plot.svg", dir);
    /* summary.json and plot.svg are written by renaming over their names,
     * which would replace a FIFO or a device there: refused now, before
     * any step, rather than at the first summary or the end. */
    if ((rc = st_refuse_special(lg->summary_path)) ||
        (lg->plot_path[0] && (rc = st_refuse_special(lg->plot_path)))) {
        free(lg);
        return rc;
    }
    /* O_NONBLOCK: a FIFO put there must be refused, not waited on for a
     * reader; a device (/dev/full) is refused as well, here at the start
     * rather than at the first record. */
    struct stat st;
    const int fd = open(lg->metrics_path,
                        O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0666);
    const int open_errno = errno;
    /* A FIFO without a reader fails to open (ENXIO): stat says what it is. */
    const int there = fd >= 0 ? fstat(fd, &st) == 0 : stat(lg->metrics_path, &st) == 0;
    const int regular = fd >= 0 && there && S_ISREG(st.st_mode);
    const int special = there && !S_ISREG(st.st_mode);
    lg->metrics = fd;
    errno = open_errno;
    if (!regular || (lg->metrics_whole = lseek(fd, 0, SEEK_END)) < 0) {
        if (special)
            st_error(lg->metrics_path, "not a regular file; hint: give a run's log.dir, "
                     "where shardtrain train writes metrics.jsonl");
        else
            st_error(lg->metrics_path, "cannot open for appending: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        free(lg);
        return special ? ST_EXIT_USAGE : ST_EXIT_FAILURE;
    }
    if (cfg->log.tensorboard && (rc = open_tensorboard(lg, resumed_from_step)) != 0) {
        st_tb_close(lg->tb);
        close(lg->metrics);
        free(lg);
        return rc;
    }
    st_summary_begin(&lg->sum, lg->summary_path, resumed_from_step, cfg->train.steps);
    lg->sum.tokens_done = resumed_from_step * cfg->train.global_batch * cfg->model.seq_len;
    lg->sum.world = world;
    lg->wall_before = lg->sum.wall_s;
    print_outputs(lg, "writing");
    *out = lg;
    return 0;
}

/* Evaluations and checkpoints still to come after `done` steps: both
 * happen at every multiple of their interval and at the last step. */
static int64_t events_after(int64_t done, int64_t total, int64_t every)
{
    if (every <= 0 || done >= total)
        return 0;
    return total / every - done / every + (total % every != 0);
}

double st_eta_seconds(int64_t done, int64_t total, double step_s, int64_t eval_every,
                      double eval_s, int64_t ckpt_every, double ckpt_s)
{
    if (done >= total)
        return 0.0;
    return (double)(total - done) * step_s +
           (double)events_after(done, total, eval_every) * eval_s +
           (double)events_after(done, total, ckpt_every) * ckpt_s;
}

/* This segment's mean times.  Until an evaluation has been timed, it is
 * taken as its forward passes: eval_batches global batches at a third of
 * a training step each (forward ~ 1/3 of forward and backward); until a
 * checkpoint has been timed, as free. */
static double eta_seconds(const st_runlog *lg, int64_t done)
{
    const st_config *cfg = lg->cfg;
    const double step_s = lg->step_s_here / (double)lg->steps_here;
    const double eval_s = lg->evals_here ? lg->eval_s_here / (double)lg->evals_here
                                         : (double)cfg->train.eval_batches * step_s / 3.0;
    const double ckpt_s = lg->ckpts_here ? lg->ckpt_s_here / (double)lg->ckpts_here : 0.0;
    return st_eta_seconds(done, cfg->train.steps, step_s, cfg->train.eval_every, eval_s,
                          cfg->checkpoint.every, ckpt_s);
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

static void print_progress(const st_runlog *lg, const st_step_record *s)
{
    char eta[32], mfu[16];
    format_eta(eta, sizeof eta, eta_seconds(lg, s->step));
    if (isnan(s->mfu))
        snprintf(mfu, sizeof mfu, "-");
    else
        snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * s->mfu);
    st_info("step %lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | mfu %s | eta %s",
            (long long)s->step, (long long)lg->cfg->train.steps, s->loss, s->lr, s->grad_norm,
            s->tokens_per_s, mfu, eta);
}

/* A metrics.jsonl record is composed in memory and handed to the kernel
 * in one write, so the file only ever grows by whole lines.  The first
 * record that cannot be written (a full disk) is one error line; the file
 * is cut back to its last whole record, so that it still parses (resume,
 * plot and other tools read it), and no more records are written.
 * Training goes on (its checkpoints are what matters most), and the run
 * ends with exit status 1 (st_runlog_close). */
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} metrics_record;

static FILE *record_begin(metrics_record *r)
{
    r->text = NULL;
    r->len = 0;
    r->f = open_memstream(&r->text, &r->len);
    return r->f;
}

static void record_commit(st_runlog *lg, metrics_record *r, int64_t step)
{
    const int composed = r->f && fclose(r->f) == 0;
    if (!lg->metrics_failed) {
        int full = composed && st_fault_log_full(step);
        if (full) {  /* the test hook: half the record goes, then the disk is full */
            (void)st_write_all(lg->metrics, r->text, r->len / 2);
            errno = ENOSPC;
        }
        if (composed && !full && st_write_all(lg->metrics, r->text, r->len) == 0) {
            lg->metrics_whole += (off_t)r->len;
        } else {
            st_error(lg->metrics_path, "cannot write the record of step %lld: %s; the "
                     "metrics of later steps are lost (the file keeps the earlier ones); "
                     "hint: free space in log.dir",
                     (long long)step, composed ? strerror(errno) : "out of memory");
            if (ftruncate(lg->metrics, lg->metrics_whole) != 0) {
                /* it stays with a partial last line, which readers report */
            }
            lg->metrics_failed = 1;
        }
    }
    free(r->text);
}

static void write_step_record(FILE *f, const st_step_record *s)
{
    fprintf(f, "{\"step\":%lld,\"tokens\":%lld,\"loss\":", (long long)s->step,
            (long long)s->tokens);
    put_number(f, "%.9g", s->loss);
    fputs(",\"lr\":", f);
    put_number(f, "%.9g", s->lr);
    fputs(",\"grad_norm\":", f);
    put_number(f, "%.9g", s->grad_norm);
    fputs(",\"tokens_per_s\":", f);
    put_number(f, "%.6g", s->tokens_per_s);
    fputs(",\"mfu\":", f);
    put_number(f, "%.6g", s->mfu);
    fputs(",\"time_ms\":", f);
    put_number(f, "%.6g", s->time_ms);
    fprintf(f, ",\"state_bytes\":%zu,\"peak_bytes\":%zu}\n", s->state_bytes, s->peak_bytes);
}

/* The step record's numbers as one TensorBoard record; MFU only when known. */
static void write_step_scalars(st_tb_writer *tb, const st_step_record *s)
{
    st_tb_value v[] = {
        {"train/loss", s->loss},
        {"train/lr", s->lr},
        {"train/grad_norm", s->grad_norm},
        {"train/tokens_per_s", s->tokens_per_s},
        {"memory/state_bytes", (double)s->state_bytes},
        {"memory/peak_bytes", (double)s->peak_bytes},
        {"train/mfu", s->mfu},
    };
    st_tb_scalars(tb, s->step, v, isnan(s->mfu) ? 6 : 7);
}

void st_runlog_step(st_runlog *lg, const st_step_record *s, int print)
{
    if (!lg->t_first_step) {
        lg->t_first_step = st_runlog_now() - s->time_ms / 1e3;
        /* A resumed segment's start-up (loading the checkpoint) is time a
         * run without the restart would not have spent. */
        if (lg->resumed_from > 0)
            lg->sum.restart_s += lg->t_first_step - lg->t_begin;
    }
    lg->steps_here++;
    lg->step_s_here += s->time_ms / 1e3;
    st_run_summary *sum = &lg->sum;
    sum->train_s += s->time_ms / 1e3;
    sum->train_tokens += s->tokens - sum->tokens_done;
    sum->steps_done = s->step;
    sum->tokens_done = s->tokens;
    sum->have_step = 1;
    sum->final_tok_s = s->tokens_per_s;
    sum->final_mfu = s->mfu;
    sum->mfu_per_tok_s = s->tokens_per_s > 0 ? s->mfu / s->tokens_per_s : NAN;
    sum->rank0_peak = s->peak_bytes;
    if (!print)
        return;
    print_progress(lg, s);
    metrics_record r;
    if (record_begin(&r))
        write_step_record(r.f, s);
    record_commit(lg, &r, s->step);
    if (lg->tb)
        write_step_scalars(lg->tb, s);
}

void st_runlog_skipped(st_runlog *lg, int64_t step, double lr, double bad_ranks,
                       int64_t in_a_row)
{
    const st_config *cfg = lg->cfg;
    st_warn("step %lld: the loss or gradient norm is not finite on %.0f of %d rank(s); the "
            "update is skipped on every rank (%lld in a row, train.nonfinite_limit = %lld)",
            (long long)step, bad_ranks, lg->world, (long long)in_a_row,
            (long long)cfg->train.nonfinite_limit);
    metrics_record r;
    if (record_begin(&r)) {
        fprintf(r.f, "{\"step\":%lld,\"skipped\":\"nonfinite\",\"nonfinite_ranks\":%.0f,"
                "\"in_a_row\":%lld,\"lr\":", (long long)step, bad_ranks, (long long)in_a_row);
        put_number(r.f, "%.9g", lr);
        fputs("}\n", r.f);
    }
    record_commit(lg, &r, step);
    if (lg->tb) {
        st_tb_value v[] = {{"train/skipped_nonfinite", 1.0},
                           {"train/nonfinite_in_a_row", (double)in_a_row}};
        st_tb_scalars(lg->tb, step, v, 2);
    }
    /* A skipped step is still a step done: the schedule moved on. */
    lg->sum.steps_done = step;
    lg->sum.tokens_done += cfg->train.global_batch * cfg->model.seq_len;
}

void st_runlog_eval(st_runlog *lg, int64_t step, double val_loss, double seconds)
{
    lg->evals_here++;
    lg->eval_s_here += seconds;
    lg->sum.eval_s += seconds;
    st_info("step %lld/%lld | val_loss %.4f", (long long)step,
            (long long)lg->cfg->train.steps, val_loss);
    metrics_record r;
    if (record_begin(&r)) {
        fprintf(r.f, "{\"step\":%lld,\"val_loss\":", (long long)step);
        put_number(r.f, "%.9g", val_loss);
        fputs("}\n", r.f);
    }
    record_commit(lg, &r, step);
    if (lg->tb)
        st_tb_scalar(lg->tb, "eval/val_loss", step, val_loss);
    if (!isfinite(val_loss))
        return;
    st_run_summary *sum = &lg->sum;
    if (!sum->have_val || val_loss < sum->best_val) {
        sum->best_val = val_loss;
        sum->best_val_step = step;
    }
    sum->have_val = 1;
    sum->final_val = val_loss;
    sum->final_val_step = step;
}

static void update_wall(st_runlog *lg)
{
    lg->sum.wall_s = lg->wall_before + (st_runlog_now() - lg->t_begin);
}

void st_runlog_checkpoint_begin(st_runlog *lg)
{
    /* Written before the checkpoint commits its `latest` pointer: a process
     * killed between that commit and st_runlog_checkpoint would otherwise
     * leave a summary older than the checkpoint, and the resume could not
     * tell it was the same run (it would count no restart).  This one covers
     * every step the checkpoint will hold. */
    update_wall(lg);
    st_summary_write(&lg->sum, lg->summary_path, "running", 0, 0);
}

void st_runlog_checkpoint(st_runlog *lg, int64_t step, const char *dir, double seconds)
{
    (void)step;
    lg->ckpts_here++;
    lg->ckpt_s_here += seconds;
    lg->sum.ckpt_s += seconds;
    snprintf(lg->sum.last_ckpt, sizeof lg->sum.last_ckpt, "%s", dir);
    /* The file describes the run up to this checkpoint, should the
     * process die before its end. */
    update_wall(lg);
    st_summary_write(&lg->sum, lg->summary_path, "running", 0, 0);
}

void st_runlog_rank_peaks(st_runlog *lg, const uint64_t *peaks, int world)
{
    free(lg->sum.rank_peaks);
    lg->sum.rank_peaks = malloc(sizeof(uint64_t) * (size_t)world);
    if (!lg->sum.rank_peaks)
        return;
    memcpy(lg->sum.rank_peaks, peaks, sizeof(uint64_t) * (size_t)world);
    lg->sum.world = world;
}

int st_runlog_close(st_runlog *lg, int exit_status)
{
    if (!lg)
        return exit_status;
    int rc = exit_status;
    /* a record that could not be written was reported as it happened */
    if (lg->metrics_failed && rc == 0)
        rc = ST_EXIT_FAILURE;
    if (close(lg->metrics) != 0 && rc == 0) {
        st_error(lg->metrics_path, "error writing: %s", strerror(errno));
        rc = ST_EXIT_FAILURE;
    }
    /* the event file's write errors were printed as they happened */
    if (st_tb_close(lg->tb) != 0 && rc == 0)
        rc = ST_EXIT_FAILURE;
    lg->tb = NULL;
    update_wall(lg);
    const char *status = st_summary_status(rc);
    const int requeue = rc == ST_EXIT_PREEMPTED && lg->cfg->checkpoint.requeue;
    if (st_summary_write(&lg->sum, lg->summary_path, status, rc, requeue) != 0 && rc == 0)
        rc = ST_EXIT_FAILURE;
    /* The picture is drawn from the file just closed, so a resumed run's
     * plot shows every segment of it. */
    const char *dirs[] = {lg->cfg->log.dir};
    if (lg->plot_path[0] && st_plot_write(lg->plot_path, dirs, 1) != 0 && rc == 0)
        rc = ST_EXIT_FAILURE;
    st_summary_print(&lg->sum, st_summary_status(rc), rc);
    print_outputs(lg, "wrote");
    free(lg->sum.rank_peaks);
    free(lg);
    return rc;
}
