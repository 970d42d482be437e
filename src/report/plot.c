/* The loss plot (see plot.h): the page's layout - title, legend, one frame
 * per panel stacked down the page on a shared step axis - and the series
 * drawn into the frames.  Coordinates are pixels of a fixed-width page;
 * every number goes through svg.h, so the file is the same in any locale. */
#include "report/plot.h"
#include "report/axis.h"
#include "report/chart.h"
#include "report/metrics_read.h"
#include "report/svg.h"
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_W 960.0
#define LEFT 88.0      /* room for tick labels and the rotated axis title */
#define RIGHT 28.0
#define PLOT_W (PAGE_W - LEFT - RIGHT)
#define LOSS_H 300.0
#define SMALL_H 110.0
#define CHAR_W 6.2     /* a guess at 12px sans-serif's mean advance, for wrapping the legend */
#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

/* Tableau's ten colours: distinct, and readable on white. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_COLOURS (int)(sizeof palette / sizeof palette[0])

typedef struct {
    const char *dir;
    st_metrics m;
    int64_t tokens_per_step; /* 0: the log has no tokens; -1: not one ratio */
} plot_run;

enum quantity { Q_LOSS, Q_TOKENS_PER_S, Q_MFU, Q_LR };

static double quantity_of(const st_metrics_step *s, enum quantity q)
{
    switch (q) {
    case Q_LOSS: return s->loss;
    case Q_TOKENS_PER_S: return s->tokens_per_s;
    case Q_MFU: return 100.0 * s->mfu; /* NaN stays NaN: not known */
    case Q_LR: return s->lr;
    }
    return NAN;
}

/* The logged steps' values of q, leaving out the unknown ones. */
static int step_points(const st_metrics *m, enum quantity q, st_chart_points *p)
{
    p->n = 0;
    p->x = malloc(sizeof(double) * (size_t)(m->n_steps + 1));
    p->y = malloc(sizeof(double) * (size_t)(m->n_steps + 1));
    if (!p->x || !p->y)
        return -1;
    for (int64_t i = 0; i < m->n_steps; i++) {
        double v = quantity_of(&m->steps[i], q);
        if (isfinite(v)) {
            p->x[p->n] = (double)m->steps[i].step;
            p->y[p->n++] = v;
        }
    }
    return 0;
}

static void points_free(st_chart_points *p)
{
    free(p->x);
    free(p->y);
    memset(p, 0, sizeof *p);
}

/* The centred mean of up to `window` (odd) points around each point,
 * narrower near the ends so that it stays centred (the first and last
 * points are their own mean).  Centred rather than exponential: a finished
 * run is looked at whole, and a centred mean does not lag the curve. */
static int smooth(const st_chart_points *in, int64_t window, st_chart_points *out)
{
    out->n = in->n;
    out->x = malloc(sizeof(double) * (size_t)(in->n + 1));
    out->y = malloc(sizeof(double) * (size_t)(in->n + 1));
    double *sum = malloc(sizeof(double) * (size_t)(in->n + 1)); /* sum[i]: y[0, i) */
    if (!out->x || !out->y || !sum) {
        free(sum);
        return -1;
    }
    sum[0] = 0.0;
    for (int64_t i = 0; i < in->n; i++)
        sum[i + 1] = sum[i] + in->y[i];
    for (int64_t i = 0; i < in->n; i++) {
        int64_t half = window / 2;
        if (half > i)
            half = i;
        if (half > in->n - 1 - i)
            half = in->n - 1 - i;
        out->x[i] = in->x[i];
        out->y[i] = (sum[i + half + 1] - sum[i - half]) / (double)(2 * half + 1);
    }
    free(sum);
    return 0;
}

/* The smoothing window for runs of at most n logged steps: about a
 * twentieth of the longest, odd; 1 (no smoothing) below 40 points. */
static int64_t smoothing_window(int64_t n)
{
    return 2 * (n / 40) + 1;
}

/* The run's name as shown: its directory, cut from the left when long. */
static const char *shown_name(const char *dir, char *buf, size_t size)
{
    size_t n = strlen(dir);
    if (n <= 48)
        return dir;
    snprintf(buf, size, "...%s", dir + n - 45);
    return buf;
}

/* How a legend entry is marked. */
enum mark { MARK_RUN, MARK_RAW, MARK_RAW_ALONE, MARK_SMOOTHED, MARK_CIRCLE, MARK_CROSS };

/* Where the next legend entry goes. */
typedef struct {
    double x, y;
} pen;

/* One legend entry at the pen, on the next row when it would not fit. */
static void legend_entry(st_svg *s, pen *p, enum mark mark, const char *colour, const char *text)
{
    const double w = 34 + CHAR_W * (double)strlen(text) + 20;
    if (p->x > LEFT && p->x + w > PAGE_W - RIGHT) {
        p->x = LEFT;
        p->y += 20;
    }
    char attrs[128];
    const double x = p->x, y = p->y - 4;
    switch (mark) {
    case MARK_RUN:
    case MARK_RAW:
    case MARK_RAW_ALONE:
    case MARK_SMOOTHED:
        snprintf(attrs, sizeof attrs, "stroke=\"%s\" %s", colour,
                 mark == MARK_RUN ? "stroke-width=\"3\""
                 : mark == MARK_RAW ? "stroke-width=\"1\" stroke-opacity=\"0.45\""
                 : mark == MARK_RAW_ALONE ? "stroke-width=\"1.6\""
                                          : "stroke-width=\"2.2\"");
        st_svg_line(s, x, y, x + 26, y, attrs);
        break;
    case MARK_CIRCLE:
        st_chart_circle(s, x + 13, y, 3.5, colour);
        break;
    case MARK_CROSS:
        st_chart_cross(s, x + 13, y, 4, colour);
        break;
    }
    st_svg_text(s, x + 34, p->y, "font-size=\"12\" fill=\"#222\"", text);
    p->x += w;
}

/* The legend from y on: the runs' names by colour when there are several,
 * then what each mark means.  Returns the y below it. */
static double draw_legend(st_svg *s, const plot_run *runs, int n_runs, int64_t window,
                          int any_skipped, double y)
{
    const char *key_colour = n_runs == 1 ? palette[0] : "#555";
    pen p = {LEFT, y};
    char text[96];
    if (n_runs > 1) {
        for (int r = 0; r < n_runs; r++)
            legend_entry(s, &p, MARK_RUN, palette[r % N_COLOURS],
                         shown_name(runs[r].dir, text, sizeof text));
        p.x = LEFT;
        p.y += 22;
    }
    legend_entry(s, &p, window > 1 ? MARK_RAW : MARK_RAW_ALONE, key_colour,
                 "loss, each logged step");
    if (window > 1) {
        snprintf(text, sizeof text, "smoothed (centred mean of %lld steps)", (long long)window);
        legend_entry(s, &p, MARK_SMOOTHED, key_colour, text);
    }
    legend_entry(s, &p, MARK_CIRCLE, key_colour, "validation loss");
    if (any_skipped)
        legend_entry(s, &p, MARK_CROSS, key_colour, "skipped step (not finite)");
    return p.y + 12;
}

/* The range of q over every run (mfu in percent); from_zero pins the low
 * end at 0, for rates whose size matters more than their wiggles. */
static void value_range(const plot_run *runs, int n_runs, enum quantity q, int with_val,
                        int from_zero, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int r = 0; r < n_runs; r++) {
        const st_metrics *m = &runs[r].m;
        for (int64_t i = 0; i < m->n_steps; i++) {
            double v = quantity_of(&m->steps[i], q);
            if (isfinite(v)) {
                *lo = fmin(*lo, v);
                *hi = fmax(*hi, v);
            }
        }
        for (int64_t i = 0; with_val && i < m->n_evals; i++) { /* fmin passes NaN over */
            *lo = fmin(*lo, m->evals[i].val_loss);
            *hi = fmax(*hi, m->evals[i].val_loss);
        }
    }
    if (!(*hi >= *lo)) { /* nothing logged */
        *lo = 0.0;
        *hi = 1.0;
    }
    if (from_zero && *lo > 0.0)
        *lo = 0.0;
    double pad = (*hi - *lo) * 0.05;
    *hi += pad;
    if (!from_zero || *lo < 0.0)
        *lo -= pad;
}

/* One run's series of a second-panel quantity. */
static int draw_rate(st_svg *s, const st_chart_frame *f, const plot_run *run, int r,
                     enum quantity q, const char *name)
{
    st_chart_points p;
    if (step_points(&run->m, q, &p)) {
        points_free(&p);
        return -1;
    }
    char id[48];
    snprintf(id, sizeof id, "run%d-%s", r, name);
    if (p.n) /* a run without MFU beside one with it */
        st_chart_polyline(s, f, &p, id, palette[r % N_COLOURS], "stroke-width=\"1.6\"");
    points_free(&p);
    return 0;
}

/* One run's marks in the loss frame. */
static int draw_loss(st_svg *s, const st_chart_frame *f, const plot_run *run, int r, int64_t window)
{
    const char *colour = palette[r % N_COLOURS];
    char id[48];
    st_chart_points raw, smoothed = {0};
    int rc = step_points(&run->m, Q_LOSS, &raw);
    if (!rc && window > 1)
        rc = smooth(&raw, window, &smoothed);
    if (!rc) {
        snprintf(id, sizeof id, "run%d-loss", r);
        st_chart_polyline(s, f, &raw, id, colour,
                          window > 1 ? "stroke-width=\"1\" stroke-opacity=\"0.45\""
                                     : "stroke-width=\"1.6\"");
        if (window > 1) {
            snprintf(id, sizeof id, "run%d-loss-smoothed", r);
            st_chart_polyline(s, f, &smoothed, id, colour, "stroke-width=\"2.2\"");
        }
        st_svg_printf(s, "<g id=\"run%d-val-loss\">\n", r);
        for (int64_t i = 0; i < run->m.n_evals; i++) {
            const st_metrics_eval *e = &run->m.evals[i];
            if (isfinite(e->val_loss))
                st_chart_circle(s, st_chart_px(f, (double)e->step), st_chart_py(f, e->val_loss),
                                3.5, colour);
        }
        st_svg_printf(s, "</g>\n<g id=\"run%d-skipped\">\n", r);
        for (int64_t i = 0; i < run->m.n_skipped; i++)
            st_chart_cross(s, st_chart_px(f, (double)run->m.skipped[i]), f->top + f->height - 8,
                           4, colour);
        st_svg_printf(s, "</g>\n");
    }
    points_free(&raw);
    points_free(&smoothed);
    return rc;
}

/* tokens / step when every logged step of the run agrees on it. */
static int64_t tokens_per_step(const st_metrics *m)
{
    int64_t ratio = 0;
    for (int64_t i = 0; i < m->n_steps; i++) {
        const st_metrics_step *s = &m->steps[i];
        if (s->tokens < 0)
            return i == 0 ? 0 : -1;
        if (i == 0)
            ratio = s->tokens / s->step;
        if (ratio <= 0 || s->tokens != ratio * s->step)
            return -1;
    }
    return ratio;
}

/* The ratio the tokens scale uses: the one all runs with tokens share. */
static int64_t common_tokens_per_step(const plot_run *runs, int n_runs)
{
    int64_t ratio = 0;
    for (int r = 0; r < n_runs; r++) {
        int64_t t = runs[r].tokens_per_step;
        if (t < 0 || (t > 0 && ratio > 0 && t != ratio))
            return 0;
        if (t > 0)
            ratio = t;
    }
    return ratio;
}

static void subtitle(st_svg *s, const plot_run *runs, int n_runs, double y)
{
    char text[256];
    if (n_runs == 1) {
        const st_metrics *m = &runs[0].m;
        snprintf(text, sizeof text,
                 "%lld logged steps, the last step %lld; %lld evaluations; %lld skipped steps",
                 (long long)m->n_steps, (long long)(m->n_steps ? m->steps[m->n_steps - 1].step : 0),
                 (long long)m->n_evals, (long long)m->n_skipped);
    } else {
        snprintf(text, sizeof text, "%d runs overlaid, one colour each", n_runs);
    }
    st_svg_text(s, LEFT, y, "font-size=\"12\" fill=\"#555\"", text);
}

/* The whole page body into s; *height gets the page's height. */
static int draw_page(st_svg *s, const plot_run *runs, int n_runs, double *height)
{
    int64_t max_n = 0, max_step = 1;
    int any_mfu = 0, any_skipped = 0;
    for (int r = 0; r < n_runs; r++) {
        const st_metrics *m = &runs[r].m;
        max_n = m->n_steps > max_n ? m->n_steps : max_n;
        if (m->n_steps && m->steps[m->n_steps - 1].step > max_step)
            max_step = m->steps[m->n_steps - 1].step;
        if (m->n_evals && m->evals[m->n_evals - 1].step > max_step)
            max_step = m->evals[m->n_evals - 1].step;
        if (m->n_skipped && m->skipped[m->n_skipped - 1] > max_step)
            max_step = m->skipped[m->n_skipped - 1];
        any_skipped |= m->n_skipped > 0;
        for (int64_t i = 0; i < m->n_steps && !any_mfu; i++)
            any_mfu = isfinite(m->steps[i].mfu);
    }
    const int64_t window = smoothing_window(max_n);
    char title[160], name[64];
    if (n_runs == 1)
        snprintf(title, sizeof title, "shardtrain run %s",
                 shown_name(runs[0].dir, name, sizeof name));
    else
        snprintf(title, sizeof title, "shardtrain: %d runs", n_runs);
    st_svg_text(s, LEFT, 30, "font-size=\"18\" font-weight=\"bold\" fill=\"#111\"", title);
    subtitle(s, runs, n_runs, 50);
    double y = draw_legend(s, runs, n_runs, window, any_skipped, 76);

    const int64_t ratio = common_tokens_per_step(runs, n_runs);
    st_chart_frame loss = {.left = LEFT, .top = y + (ratio > 0 ? 44 : 14), .width = PLOT_W,
                  .height = LOSS_H};
    st_axis_make(&loss.x, 0.0, (double)max_step, 9);
    double lo, hi;
    value_range(runs, n_runs, Q_LOSS, 1, 0, &lo, &hi);
    if (any_skipped) /* a strip below the curves for the crosses */
        lo -= (hi - lo) * 0.08;
    st_axis_make(&loss.y, lo, hi, 6);
    st_chart_draw_frame(s, &loss, "loss (nats/token)", "step");
    if (ratio > 0) {
        char title[96];
        snprintf(title, sizeof title, "tokens trained (%lld per step)", (long long)ratio);
        st_chart_top_axis(s, &loss, (double)ratio, title);
    }
    if (max_n == 0)
        st_svg_text(s, LEFT + PLOT_W / 2, loss.top + LOSS_H / 2,
                    "text-anchor=\"middle\" font-size=\"14\" fill=\"#777\"", "no steps logged yet");
    for (int r = 0; r < n_runs; r++)
        if (draw_loss(s, &loss, &runs[r], r, window))
            return -1;
    y = loss.top + LOSS_H + 40;

    static const struct {
        enum quantity q;
        const char *id, *title, *y_title;
    } rates[] = {
        {Q_TOKENS_PER_S, "tokens-per-s", "Throughput", "tokens/s"},
        {Q_MFU, "mfu", "Model FLOPs utilisation", "MFU (%)"},
        {Q_LR, "lr", "Learning rate", "learning rate"},
    };
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        if (rates[k].q == Q_MFU && !any_mfu)
            continue;
        st_svg_text(s, LEFT, y + 22, "font-size=\"13\" font-weight=\"bold\" fill=\"#222\"",
                    rates[k].title);
        st_chart_frame f = {.left = LEFT, .top = y + 30, .width = PLOT_W, .height = SMALL_H,
                            .x = loss.x};
        value_range(runs, n_runs, rates[k].q, 0, 1, &lo, &hi);
        st_axis_make(&f.y, lo, hi, 4);
        int last = rates[k].q == Q_LR;
        st_chart_draw_frame(s, &f, rates[k].y_title, last ? "step" : NULL);
        for (int r = 0; r < n_runs; r++)
            if (draw_rate(s, &f, &runs[r], r, rates[k].q, rates[k].id))
                return -1;
        y = f.top + SMALL_H + (last ? 44 : 20);
    }
    *height = y + 8;
    return 0;
}

static int write_text(int fd, void *ctx)
{
    const st_svg *s = ctx;
    return st_write_all(fd, s->text, s->len);
}

static int write_svg(const char *out_path, const st_svg *body, double height)
{
    st_svg page;
    st_svg_init(&page);
    st_svg_printf(&page, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                         "viewBox=\"0 0 %d %d\" " FONT ">\n"
                         "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n",
                  (int)PAGE_W, (int)ceil(height), (int)PAGE_W, (int)ceil(height));
    st_svg_printf(&page, "%s</svg>\n", body->text ? body->text : "");
    if (page.failed) {
        st_svg_free(&page);
        st_error(out_path, "out of memory drawing the plot");
        return ST_EXIT_FAILURE;
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= sizeof tmp) {
        st_svg_free(&page);
        st_error(out_path, "path too long");
        return ST_EXIT_FAILURE;
    }
    int step = st_file_write_atomic(out_path, tmp, 0666, write_text, &page);
    st_svg_free(&page);
    if (step)   /* named as the user gave it, not by its temporary */
        st_error(out_path, "cannot write the plot: %s; hint: check that its directory "
                 "exists and is writable", strerror(errno));
    return step ? ST_EXIT_FAILURE : 0;
}

int st_plot_write(const char *out_path, const char *const *log_dirs, int n_dirs)
{
    int refused = st_refuse_special(out_path);   /* before the logs are read */
    if (refused)
        return refused;
    plot_run *runs = calloc((size_t)n_dirs, sizeof *runs);
    if (!runs) {
        st_error(out_path, "out of memory drawing the plot");
        return ST_EXIT_FAILURE;
    }
    int rc = 0;
    for (int r = 0; r < n_dirs && !rc; r++) {
        char path[4096];
        runs[r].dir = log_dirs[r];
        if ((size_t)snprintf(path, sizeof path, "%s/metrics.jsonl", log_dirs[r]) >=
            sizeof path) {
            st_error(log_dirs[r], "path too long (over %zu bytes with /metrics.jsonl)",
                     sizeof path - 1);
            rc = ST_EXIT_USAGE;
            break;
        }
        rc = st_metrics_read(path, &runs[r].m);
        runs[r].tokens_per_step = tokens_per_step(&runs[r].m);
    }
    st_svg body;
    st_svg_init(&body);
    double height = 0.0;
    if (!rc && (draw_page(&body, runs, n_dirs, &height) || body.failed)) {
        st_error(out_path, "out of memory drawing the plot");
        rc = ST_EXIT_FAILURE;
    }
    if (!rc)
        rc = write_svg(out_path, &body, height);
    st_svg_free(&body);
    for (int r = 0; r < n_dirs; r++)
        st_metrics_free(&runs[r].m);
    free(runs);
    return rc;
}
