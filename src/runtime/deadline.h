/* The process deadline: ends this process with ST_EXIT_TIMEOUT when a
 * phase that no collective watchdog can watch has not finished in time.
 *
 * The watchdog (watchdog.h) can only watch what MPI lets it poll.  Two
 * phases give it nothing to poll: the launcher hand-shake and MPI_Init
 * (with the watchdog's own set-up) before any communicator exists, and
 * MPI_Abort, which may itself wait on a launcher that lost a rank.  A
 * timer thread bounds both: if the phase has not ended (disarmed) when the
 * time runs out, it prints one line and calls _exit.  The thread makes no
 * MPI call, so MPI_THREAD_FUNNELED holds. */
#ifndef ST_DEADLINE_H
#define ST_DEADLINE_H

/* Starts the timer: after `seconds`, unless st_deadline_disarm ran first,
 * prints "shardtrain: error: <where>: <what> did not complete within N s;
 * hint: <hint>" and the process exits with ST_EXIT_TIMEOUT.  One deadline
 * at a time; arming again replaces the previous one.  last_resort, when
 * not NULL, runs on the timer's thread just before the exit (no MPI call
 * there).  Returns 0, or -1 when no thread could be started (the phase is
 * then unbounded). */
int st_deadline_arm(double seconds, const char *where, const char *what, const char *hint,
                    void (*last_resort)(void));
void st_deadline_disarm(void);

/* The bound on start-up until the configuration is read:
 * SHARDTRAIN_STARTUP_TIMEOUT_S, else parallel.timeout_s's default (600).
 * A malformed value prints one error line and returns -1. */
double st_deadline_startup_s(void);

#endif
