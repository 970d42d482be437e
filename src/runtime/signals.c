/* The preemption signal flag (see signals.h). */
#include "runtime/signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t pending_signal;

static void on_signal(int sig) { pending_signal = sig; }

void st_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* Restart interrupted system calls: MPI and file I/O in flight must not
     * see EINTR because a flag was set. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int st_signals_pending(void) { return pending_signal; }

const char *st_signal_name(int sig)
{
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "a signal";
}
