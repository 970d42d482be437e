/* Preemption signals.  A scheduler announces the end of a job's time with
 * SIGUSR1 (Slurm's --signal) or SIGTERM; the handler only records which
 * one came, and the train loop acts on it at its next step boundary, where
 * every rank can agree to checkpoint and stop together. */
#ifndef ST_SIGNALS_H
#define ST_SIGNALS_H

/* SIGUSR1 and SIGTERM only set a flag (the handler does nothing else). */
void st_signals_install(void);
/* The signal number caught since st_signals_install, or 0. */
int st_signals_pending(void);
/* "SIGUSR1", "SIGTERM", or "a signal" for any other number. */
const char *st_signal_name(int sig);

#endif
