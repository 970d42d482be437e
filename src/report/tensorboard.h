/* TensorBoard event files: what `tensorboard --logdir LOG_DIR` reads.
 *
 * A writer owns one LOG_DIR/events.out.tfevents.TIME.HOST.PID file of
 * TFRecords (each a little-endian uint64 length, its masked CRC-32C, the
 * bytes of one tensorflow.Event, their masked CRC-32C), as TensorFlow's
 * and PyTorch's summary writers make them.  Each call writes one record
 * and hands it to the kernel at once, so a job killed at any moment
 * leaves a file TensorBoard reads up to the last whole step.
 *
 * Resuming: every writer starts with a SessionLog START event at the first
 * step its run will log.  TensorBoard then drops what earlier files of the
 * directory logged at that step or later: the steps a crashed run logged
 * after its last checkpoint, which the resumed run logs again.  So a
 * resumed or requeued run continues the same curves, without duplicate or
 * out-of-order steps.  TensorBoard reads a directory's files in name
 * order, so TIME is the later of now and one past the newest file's TIME:
 * a run requeued within the same second, or onto a node whose clock is
 * behind, still sorts after the run it resumes. */
#ifndef ST_TENSORBOARD_H
#define ST_TENSORBOARD_H

#include <stdint.h>

typedef struct st_tb_writer st_tb_writer;

/* One scalar of a step's record: TensorBoard stores it as a float. */
typedef struct {
    const char *tag;
    double value;
} st_tb_value;

/* Creates log_dir (mkdir -p) and the event file in it, and writes the
 * file_version event and the SessionLog START at step
 * resumed_from_step + 1 (0 for a fresh run: a fresh start over a directory
 * of an earlier run replaces its curves too).  0, or an error printed and
 * ST_EXIT_FAILURE. */
int st_tb_open(st_tb_writer **out, const char *log_dir, int64_t resumed_from_step);

/* The file's path, for messages. */
const char *st_tb_path(const st_tb_writer *w);

/* Scalars of one step, as one record (simple_value summaries). */
int st_tb_scalars(st_tb_writer *w, int64_t step, const st_tb_value *values, int n);
int st_tb_scalar(st_tb_writer *w, const char *tag, int64_t step, double value);

/* A text summary (TensorBoard's text plugin renders it as Markdown). */
int st_tb_text(st_tb_writer *w, const char *tag, int64_t step, const char *text);
/* Text shown as written, in a fixed-width font: st_tb_text of a Markdown
 * code block (every line but the empty ones indented by four spaces). */
int st_tb_text_block(st_tb_writer *w, const char *tag, int64_t step, const char *text);

/* Writes return 0, or ST_EXIT_FAILURE: the first failure prints one error
 * line naming the file, and the writer then ignores every later call. */

/* Flushes, fsyncs and closes the file, and frees w (NULL is a no-op).
 * 0, or ST_EXIT_FAILURE when any write failed (printed once). */
int st_tb_close(st_tb_writer *w);

#endif
