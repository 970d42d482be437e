/* The test-only hooks (see test_faults.h for the list).  The poisoned
 * steps are read once, by the train loop's start-up checks; the others at
 * each question.  Either way a variable is read at the moment the code it
 * affects runs, so a malformed value fails there, with one error line. */
#include "base/test_faults.h"
#include "base/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_POISONED 64

static int64_t poisoned_steps[MAX_POISONED];
static int n_poisoned;

int st_fault_load_poisoned_steps(void)
{
    static const char var[] = "SHARDTRAIN_TEST_NONFINITE_STEPS";
    const char *s = getenv(var), *p = s;
    n_poisoned = 0;
    while (p && *p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || n_poisoned == MAX_POISONED ||
            (*end && *end != ',')) {
            st_error(var, "'%s' is not a comma-separated list of at most %d step numbers "
                     ">= 1; hint: e.g. %s=3,4", s, MAX_POISONED, var);
            return ST_EXIT_USAGE;
        }
        poisoned_steps[n_poisoned++] = v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int st_fault_poisoned_step(int64_t step1)
{
    for (int i = 0; i < n_poisoned; i++)
        if (poisoned_steps[i] == step1)
            return 1;
    return 0;
}

int st_fault_crash_in_checkpoint(int64_t step)
{
    const char *s = getenv("SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT");
    const long crash_step = s && *s ? strtol(s, NULL, 10) : -1;
    return crash_step == step;
}

int st_fault_checkpoint_full(int64_t step, const char *where)
{
    const char *s = getenv("SHARDTRAIN_TEST_CHECKPOINT_FULL_AT");
    char *end = NULL;
    const long at = s && *s ? strtol(s, &end, 10) : -1;
    if (at != step)
        return 0;
    /* "N" fails the shard file, "N:rename" the rename into place. */
    const char *point = *end == ':' ? end + 1 : "shard";
    return strcmp(point, where) == 0;
}

/* SHARDTRAIN_TEST_STAGE_FULL_AT=NAME[:stuck|:stuck-kill|:kill|:kill-after|
 * :kill-back|:kill-back-done|:no-back]: the mode
 * after NAME ("" when none), or NULL when the variable does not name NAME
 * (with name NULL: whatever NAME it names). */
static const char *stage_fault_mode(const char *name)
{
    const char *s = getenv("SHARDTRAIN_TEST_STAGE_FULL_AT");
    if (!s)
        return NULL;
    const char *colon = strchr(s, ':');
    const size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (name && (strlen(name) != n || strncmp(s, name, n) != 0))
        return NULL;
    return colon ? colon + 1 : "";
}

int st_fault_stage_full(const char *name)
{
    const char *m = stage_fault_mode(name);
    return m && (!*m || !strcmp(m, "stuck") || !strcmp(m, "stuck-kill") ||
                 !strcmp(m, "kill-back") ||
                 !strcmp(m, "kill-back-done") || !strcmp(m, "no-back"));
}

int st_fault_stage_no_back(void)
{
    const char *m = stage_fault_mode(NULL);
    return m && !strcmp(m, "no-back");
}

int st_fault_stage_stuck(void)
{
    const char *m = stage_fault_mode(NULL);
    return m && (!strcmp(m, "stuck") || !strcmp(m, "stuck-kill"));
}

void st_fault_stage_kill_before(const char *name)
{
    const char *m = stage_fault_mode(name);
    if (m && !strcmp(m, "kill"))
        raise(SIGKILL);
}

void st_fault_stage_kill_after(const char *name)
{
    const char *m = stage_fault_mode(name);
    if (m && !strcmp(m, "kill-after"))
        raise(SIGKILL);
}

void st_fault_stage_kill_in_rollback(void)
{
    const char *m = stage_fault_mode(NULL);
    if (m && !strcmp(m, "kill-back"))
        raise(SIGKILL);
}

void st_fault_stage_kill_after_rollback(void)
{
    const char *m = stage_fault_mode(NULL);
    if (m && (!strcmp(m, "kill-back-done") || !strcmp(m, "stuck-kill")))
        raise(SIGKILL);
}

int st_fault_log_full(int64_t step)
{
    const char *s = getenv("SHARDTRAIN_TEST_LOG_FULL_AT");
    const long from = s && *s ? strtol(s, NULL, 10) : -1;
    return from >= 0 && step >= from;
}

int st_fault_kernels_variant(st_fault_kernels *variant)
{
    static const char var[] = "SHARDTRAIN_TEST_KERNELS";
    const char *s = getenv(var);
    if (!s || !*s || !strcmp(s, "cpu")) {
        *variant = ST_FAULT_KERNELS_CPU;
        return 0;
    }
    if (!strcmp(s, "cpu-bf16params")) {
        *variant = ST_FAULT_KERNELS_CPU_BF16PARAMS;
        return 0;
    }
    st_error(var, "'%s' is not a kernels backend this build can test; hint: "
             "cpu or cpu-bf16params", s);
    return ST_EXIT_USAGE;
}

int st_fault_debug_io(void) { return getenv("SHARDTRAIN_DEBUG_IO") != NULL; }

/* SHARDTRAIN_TEST_FAULT=RANK:POINT:ACTION[:N].  Each point counts its
 * visits in this process; the N-th visit (default 1) of RANK acts. */
void st_fault_at(const char *point, long rank)
{
    static const char var[] = "SHARDTRAIN_TEST_FAULT";
    static const char *const points[] = {"init", "startup", "step", "eval", "ckpt_begin",
                                         "ckpt_shard", "ckpt_gather", "ckpt_publish", "ckpt_done",
                                         "final"};
    enum { N_POINTS = sizeof points / sizeof points[0] };
    static long visits[N_POINTS];
    const char *s = getenv(var);
    if (!s || !*s)
        return;
    char name[32] = "", action[8] = "";
    long r = -1, nth = 1;
    int used = 0, k = sscanf(s, "%ld:%31[a-z_]:%7[a-z]%n", &r, name, action, &used);
    if (k == 3 && s[used] == ':') {
        int more = 0;
        if (sscanf(s + used + 1, "%ld%n", &nth, &more) != 1 || s[used + 1 + more])
            k = 0;
    } else if (k == 3 && s[used]) {
        k = 0;
    }
    int which = -1, mine = -1;
    for (int i = 0; i < N_POINTS; i++) {
        if (k == 3 && !strcmp(name, points[i]))
            which = i;
        if (!strcmp(point, points[i]))
            mine = i;
    }
    if (k != 3 || r < 0 || nth < 1 || which < 0 ||
        (strcmp(action, "stop") && strcmp(action, "kill"))) {
        st_error(var, "'%s' is not RANK:POINT:stop|kill[:N] with POINT one of init, startup, "
                 "step, eval, ckpt_begin, ckpt_shard, ckpt_gather, ckpt_publish, ckpt_done, "
                 "final; "
                 "hint: e.g. %s=1:ckpt_gather:stop", s, var);
        _exit(ST_EXIT_USAGE);
    }
    if (mine < 0 || which != mine || rank != r || ++visits[mine] != nth)
        return;
    fflush(stdout);
    fflush(stderr);
    raise(strcmp(action, "stop") ? SIGKILL : SIGSTOP);
}

void st_fault_pause(const char *point)
{
    const char *s = getenv("SHARDTRAIN_TEST_PAUSE");
    if (!s || strcmp(s, point) != 0)
        return;
    fprintf(stderr, "shardtrain: test: paused at %s\n", point);
    fflush(stderr);
    /* sleep() returns early when a signal's handler returns; count down
     * to the deadline, not the calls. */
    for (time_t end = time(NULL) + 60; time(NULL) < end;)
        sleep(1);
}

int st_fault_free_bytes(uint64_t *bytes)
{
    const char *s = getenv("SHARDTRAIN_TEST_FREE_BYTES");
    if (!s || !*s)
        return 0;
    *bytes = strtoull(s, NULL, 10);
    return 1;
}
