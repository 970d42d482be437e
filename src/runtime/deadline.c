/* The process deadline (see deadline.h).
 *
 * One detached thread per arming waits on a condition variable until its
 * deadline; disarming bumps a generation number, so a thread that wakes
 * for an older arming does nothing.  The line is built before the thread
 * starts and written with one write(2), since at expiry the main thread
 * may hold stdio's locks. */
#include "runtime/deadline.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static unsigned long generation;

typedef struct {
    unsigned long gen;
    struct timespec end;
    void (*last_resort)(void);
    char line[768];
} armed;

static void *expire(void *arg)
{
    armed *a = arg;
    pthread_mutex_lock(&lock);
    int rc = 0;
    while (generation == a->gen && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&changed, &lock, &a->end);
    const int fire = generation == a->gen;
    pthread_mutex_unlock(&lock);
    if (fire) {
        if (a->last_resort)
            a->last_resort();
        size_t n = strlen(a->line);
        ssize_t k = write(STDERR_FILENO, a->line, n);
        (void)k;  /* nothing better to do: the status still says it */
        _exit(ST_EXIT_TIMEOUT);
    }
    free(a);
    return NULL;
}

int st_deadline_arm(double seconds, const char *where, const char *what, const char *hint,
                    void (*last_resort)(void))
{
    armed *a = malloc(sizeof *a);
    if (!a)
        return -1;
    a->last_resort = last_resort;
    snprintf(a->line, sizeof a->line, "shardtrain: error: %s: %s did not complete within "
             "%g s; hint: %s\n", where, what, seconds, hint);
    /* pthread_cond_timedwait measures CLOCK_REALTIME by default. */
    clock_gettime(CLOCK_REALTIME, &a->end);
    double whole = (double)(long long)seconds;
    a->end.tv_sec += (time_t)whole;
    a->end.tv_nsec += (long)((seconds - whole) * 1e9);
    if (a->end.tv_nsec >= 1000000000L) {
        a->end.tv_sec++;
        a->end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lock);
    a->gen = ++generation;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, expire, a);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(a);
        return -1;
    }
    return 0;
}

void st_deadline_disarm(void)
{
    pthread_mutex_lock(&lock);
    ++generation;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

double st_deadline_startup_s(void)
{
    const char *s = getenv("SHARDTRAIN_STARTUP_TIMEOUT_S");
    char *end;
    double v = s && *s ? strtod(s, &end) : 0.0;
    if (s && *s && (*end || !(v > 0.0) || v > 1e9)) {
        st_error("SHARDTRAIN_STARTUP_TIMEOUT_S", "'%s' is not a number of seconds > 0; "
                 "hint: e.g. SHARDTRAIN_STARTUP_TIMEOUT_S=60, or unset it", s);
        return -1.0;
    }
    return v > 0.0 ? v : 600.0;
}
