/* Preemption signals, SIGUSR1 (Slurm's --signal) and SIGTERM, over the
 * whole life of the process.  Handlers are installed at the first
 * instruction of main, in one of two modes:
 *
 *  - before training: the handler ends the process at once, whatever it is
 *    blocked in (an open, MPI start-up, loading a checkpoint), with one
 *    line and ST_EXIT_PREEMPTED.  No step has run, so there is nothing to
 *    checkpoint, and the previous checkpoint, if any, is left as it was.
 *  - once the train loop runs (st_signals_defer): the handler only records
 *    which signal came, and the loop acts on it at its next step boundary,
 *    where every rank agrees to checkpoint and stop together.  Interrupted
 *    system calls are restarted there, so MPI and file I/O in flight never
 *    see EINTR because a flag was set.  Another signal 2 s or more after
 *    the first, while it still waits for its boundary, ends the process at
 *    once, like the first mode (the process is stuck where no boundary
 *    comes: a blocked read); repeats within 2 s are the same signal
 *    (`scancel --full` delivers it twice at once);
 *  - once the boundary acts on it (st_signals_stopping): further signals
 *    are ignored, so that they cannot cut the final checkpoint short. */
#ifndef ST_SIGNALS_H
#define ST_SIGNALS_H

/* Install the handlers, in the end-at-once mode.  First thing in main. */
void st_signals_install(void);
/* From now on a signal is recorded and acted on at a step boundary. */
void st_signals_defer(void);
/* The boundary is writing the checkpoint that ends the run: ignore
 * further signals. */
void st_signals_stopping(void);
/* The signal number recorded since st_signals_defer, or 0. */
int st_signals_pending(void);
/* "SIGUSR1", "SIGTERM", or "a signal" for any other number. */
const char *st_signal_name(int sig);

#endif
