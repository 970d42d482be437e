/* The loss plot: one self-contained SVG of one run or several overlaid,
 * drawn from their metrics.jsonl (metrics_read.h), which opens in a
 * browser and converts with rsvg-convert - no scripts, fonts or files
 * outside it.  A batch job has no screen; this is the picture it leaves.
 *
 * Panels, sharing the step axis: training loss (every logged step, thin,
 * and a centred moving average, thick) with validation loss as circles and
 * skipped non-finite steps as crosses, and a tokens scale on top when the
 * log records tokens; then tokens/s, MFU (when any run knows it) and the
 * learning rate.  One colour per run.
 *
 * Each plotted series is an element with an id a test or a script can
 * find: polylines run<I>-loss, run<I>-loss-smoothed, run<I>-tokens-per-s,
 * run<I>-mfu and run<I>-lr (one point per logged value), and groups
 * run<I>-val-loss (one circle per evaluation) and run<I>-skipped (one path
 * per skipped step), I counting the runs from 0 in the order given. */
#ifndef ST_PLOT_H
#define ST_PLOT_H

/* Read LOG_DIR/metrics.jsonl of each of the n log_dirs and replace
 * out_path with their plot (a temporary beside it, renamed over it).
 * Returns 0, or the exit status after one error line: ST_EXIT_USAGE for a
 * missing or malformed metrics file (FILE:LINE), ST_EXIT_FAILURE when the
 * plot cannot be written. */
int st_plot_write(const char *out_path, const char *const *log_dirs, int n_dirs);

#endif
