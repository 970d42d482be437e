/* Preemption signals (see signals.h). */
#include "runtime/signals.h"
#include "base/log.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t pending_signal;
static volatile sig_atomic_t deferred;
static volatile sig_atomic_t stopping;
/* When the first deferred signal came, in CLOCK_MONOTONIC seconds. */
static volatile sig_atomic_t first_at;

/* A signal repeated within this many seconds is the same one: `scancel
 * --full` delivers it to each task twice at once. */
enum { SAME_SIGNAL_S = 2 };

static long monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* async-signal-safe */
    return (long)ts.tv_sec;
}

/* Only async-signal-safe calls: write(2) and _exit(2). */
static void say_and_exit(int sig, int again)
{
    static const char twice[] = "shardtrain: warning: second preemption signal and still no "
                                "step boundary; exiting with status 3, no new checkpoint\n";
    if (again) {
        ssize_t w = write(STDERR_FILENO, twice, sizeof twice - 1);
        (void)w;
        _exit(ST_EXIT_PREEMPTED);
    }
    static const char usr1[] = "shardtrain: warning: SIGUSR1 received before training "
                               "started; exiting with status 3, no checkpoint written\n";
    static const char term[] = "shardtrain: warning: SIGTERM received before training "
                               "started; exiting with status 3, no checkpoint written\n";
    const char *m = sig == SIGUSR1 ? usr1 : term;
    const size_t n = sig == SIGUSR1 ? sizeof usr1 - 1 : sizeof term - 1;
    ssize_t w = write(STDERR_FILENO, m, n);
    (void)w;
    _exit(ST_EXIT_PREEMPTED);
}

/* Deferred, the first signal is a flag for the step boundary; another
 * one, seconds later, while the first is still waiting there, means the
 * process is stuck where no boundary comes (a blocked read, say: calls are
 * restarted, see below), so it ends the process at once, as before
 * training. */
static void on_signal(int sig)
{
    if (!deferred)
        say_and_exit(sig, 0);
    if (stopping)
        return;
    if (!pending_signal) {
        first_at = (sig_atomic_t)monotonic_s();
        pending_signal = sig;
    } else if (monotonic_s() - first_at >= SAME_SIGNAL_S) {
        say_and_exit(sig, 1);
    }
}

void st_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* Restarted: in the deferred mode the handler only sets a flag, and
     * MPI and file I/O in flight must not see EINTR for it; before, the
     * handler never returns.  So a call that blocks forever is not ended
     * by the first signal once deferred: the second one ends it. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void st_signals_defer(void) { deferred = 1; }

void st_signals_stopping(void) { stopping = 1; }

int st_signals_pending(void) { return pending_signal; }

const char *st_signal_name(int sig)
{
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "a signal";
}
