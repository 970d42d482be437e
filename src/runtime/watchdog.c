/* The collective watchdog (see watchdog.h).
 *
 * Normal path: a wait first tests its request once; only if the collective
 * is not already complete does it poll (MPI_Test, which also drives Open
 * MPI's progress, then a yield, then short sleeps once the wait is long),
 * reading the clock and testing the one pre-posted query receive between
 * polls.  Nothing is sent: each watched communicator only counts the
 * collectives started on it.
 *
 * Fault path, entered when a deadline passes or MPI reports an error:
 *
 *  1. Exchange.  The rank asks every other member of the communicator, on
 *     a private duplicate of MPI_COMM_WORLD (the side channel), "how many
 *     collectives have you started on communicator <id>?", and collects
 *     answers for a grace period.  Every rank answers from inside any
 *     wait, where it polls anyway, with one pre-posted receive.  A member
 *     that is silent (dead, stopped) or whose count is below the sequence
 *     number of the collective did not arrive; only the silent ones are
 *     named as failed.  A rank that finds the asker itself silent was
 *     away (stopped, then woken by the launcher) and blames nobody.
 *  2. Contagion.  A query means its sender is about to stop the job, so a
 *     rank that receives one while waiting gives up at once and goes
 *     through its own exchange: every blocked survivor reports, within a
 *     grace period of the first, instead of being killed silently when
 *     the first one exits.
 *  3. Exit.  Each rank, once its line is printed, tells the ranks below it
 *     that it has reported (TAG_DONE) and lingers, answering queries.  The
 *     lowest rank known to be alive waits until every rank it knows to be
 *     alive has reported (bounded by 0.4 of a timeout), then calls
 *     MPI_Abort, which makes the launcher kill what is left, stalled ranks
 *     included; the others _exit.  Should MPI_Abort not end it, a
 *     deadline kills the silent ranks of its node and exits.  Both give ST_EXIT_TIMEOUT.  Waiting for
 *     the reports matters on a loaded machine: an abort after a fixed
 *     linger killed a slow survivor before it had printed, and the
 *     launcher's SIGCONT woke a stopped rank in time to answer a late
 *     exchange as if it were merely behind.  Exiting without MPI_Finalize
 *     is deliberate: it would wait for the ranks that are gone.
 *
 * Each process goes through the fault path at most once. */
#include "runtime/watchdog.h"
#include "base/log.h"
#include "runtime/deadline.h"

#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { TAG_QUERY = 1, TAG_REPLY = 2, TAG_DONE = 3 };
enum why { WHY_TIMEOUT, WHY_PEER, WHY_MPI };

typedef struct {
    int live;
    int size;
    int *world_rank;      /* member i's rank in MPI_COMM_WORLD */
    uint64_t issued;      /* collectives started here so far */
} watched;

static struct {
    int up;
    int rank, world;
    double timeout;
    MPI_Comm side;
    watched *w;
    int n, cap;
    int64_t qbuf[2];              /* a query: {comm id, sequence number} */
    MPI_Request qreq;             /* the pre-posted receive of queries */
    int64_t *reply_buf;           /* [world][2]: {comm id, issued} */
    MPI_Request *reply_req;       /* [world]: one answer per asking rank */
    int lowest_alive;             /* lowest rank seen asking or answering */
    unsigned char *alive;         /* [world]: seen asking, answering or reporting */
    unsigned char *reported;      /* [world]: sent TAG_DONE (fault path only) */
    unsigned char *silent;        /* [world]: did not answer our exchange */
    int64_t *whereabouts;         /* [world][2]: {pid, host hash}, for the last resort */
    int64_t step;                 /* st_watchdog_set_step */
} wd = {.timeout = 600.0, .qreq = MPI_REQUEST_NULL, .side = MPI_COMM_NULL};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* For the first 100 ms a wait polls as MPI_Wait would (Open MPI yields
 * between polls when oversubscribed), so completion is seen as early as
 * before; a longer wait sleeps 100 us between polls, at most 0.1% of it,
 * rather than keep a core busy for the whole timeout. */
static void pause_poll(double waited)
{
    if (waited < 0.1) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 100000L};
    nanosleep(&ts, NULL);
}

/* The grace period of the exchange and the linger before exiting: long
 * enough for a waiting rank to notice a query (a poll interval plus
 * scheduling delay), short enough that the whole fault path stays well
 * inside one more timeout. */
static double grace_s(void)
{
    double g = wd.timeout / 10.0;
    return g < 0.5 ? 0.5 : g > 5.0 ? 5.0 : g;
}

static void post_query_recv(void)
{
    if (MPI_Irecv(wd.qbuf, 2, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, wd.side,
                  &wd.qreq) != MPI_SUCCESS)
        wd.qreq = MPI_REQUEST_NULL;  /* side channel broken: stop answering */
}

static void note_alive(int r)
{
    if (r < 0 || r >= wd.world)
        return;
    wd.alive[r] = 1;
    if (r < wd.lowest_alive)
        wd.lowest_alive = r;
}

/* Answers every query that has arrived.  Returns the rank of the first
 * asker seen by this call, or -1. */
static int service_queries(void)
{
    int first = -1;
    while (wd.qreq != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Test(&wd.qreq, &flag, &st) != MPI_SUCCESS) {
            wd.qreq = MPI_REQUEST_NULL;
            break;
        }
        if (!flag)
            break;
        int src = st.MPI_SOURCE;
        int64_t id = wd.qbuf[0];
        int64_t issued = id >= 0 && id < wd.n && wd.w[id].live ? (int64_t)wd.w[id].issued : -1;
        if (src >= 0 && src < wd.world && wd.reply_req[src] == MPI_REQUEST_NULL) {
            wd.reply_buf[2 * src] = id;
            wd.reply_buf[2 * src + 1] = issued;
            if (MPI_Isend(&wd.reply_buf[2 * src], 2, MPI_INT64_T, src, TAG_REPLY, wd.side,
                          &wd.reply_req[src]) != MPI_SUCCESS)
                wd.reply_req[src] = MPI_REQUEST_NULL;
        }
        note_alive(src);
        if (first < 0)
            first = src;
        post_query_recv();
    }
    return first;
}

/* FNV-1a of the host name: equal on the ranks of one node. */
static int64_t host_hash(void)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        return 0;
    uint64_t h = 1469598103934665603ull;
    for (const char *c = host; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

int st_watchdog_init(void)
{
    if (wd.up)
        return 0;
    /* Errors come back as return codes, so a broken peer becomes our
     * message and exit status rather than Open MPI's abort text.
     * Communicators made from the world inherit the handler. */
    if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(MPI_COMM_WORLD, &wd.rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &wd.world) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &wd.side) != MPI_SUCCESS) {
        st_error(NULL, "cannot set up the collective watchdog's communicator; hint: check "
                 "the MPI installation");
        return ST_EXIT_FAILURE;
    }
    wd.reply_buf = calloc((size_t)wd.world * 2, sizeof *wd.reply_buf);
    wd.reply_req = malloc((size_t)wd.world * sizeof *wd.reply_req);
    wd.alive = calloc((size_t)wd.world, 1);
    wd.reported = calloc((size_t)wd.world, 1);
    wd.silent = calloc((size_t)wd.world, 1);
    wd.whereabouts = calloc((size_t)wd.world * 2, sizeof *wd.whereabouts);
    if (!wd.reply_buf || !wd.reply_req || !wd.alive || !wd.reported || !wd.silent ||
        !wd.whereabouts) {
        st_error(NULL, "out of memory for the collective watchdog of %d ranks", wd.world);
        return ST_EXIT_FAILURE;
    }
    for (int r = 0; r < wd.world; r++)
        wd.reply_req[r] = MPI_REQUEST_NULL;
    /* Where each rank runs, for stop_silent_ranks.  Blocking, like the
     * duplicate above: start-up's deadline (deadline.h) bounds both. */
    int64_t me[2] = {(int64_t)getpid(), host_hash()};
    if (MPI_Allgather(me, 2, MPI_INT64_T, wd.whereabouts, 2, MPI_INT64_T, wd.side) !=
        MPI_SUCCESS) {
        st_error(NULL, "cannot set up the collective watchdog's communicator; hint: check "
                 "the MPI installation");
        return ST_EXIT_FAILURE;
    }
    wd.lowest_alive = wd.rank;
    wd.alive[wd.rank] = 1;
    wd.up = 1;
    post_query_recv();
    if (st_watchdog_register(MPI_COMM_WORLD) != 0) {
        st_error(NULL, "cannot register MPI_COMM_WORLD with the collective watchdog");
        return ST_EXIT_FAILURE;
    }
    return 0;
}

void st_watchdog_finalize(void)
{
    if (!wd.up)
        return;
    if (wd.qreq != MPI_REQUEST_NULL) {
        MPI_Cancel(&wd.qreq);
        MPI_Wait(&wd.qreq, MPI_STATUS_IGNORE);
    }
    for (int r = 0; r < wd.world; r++)
        if (wd.reply_req[r] != MPI_REQUEST_NULL)
            MPI_Request_free(&wd.reply_req[r]);
    for (int i = 0; i < wd.n; i++)
        free(wd.w[i].world_rank);
    free(wd.w);
    free(wd.reply_buf);
    free(wd.reply_req);
    free(wd.alive);
    free(wd.reported);
    free(wd.silent);
    free(wd.whereabouts);
    MPI_Comm_free(&wd.side);
    double t = wd.timeout;
    memset(&wd, 0, sizeof wd);
    wd.timeout = t;
    wd.qreq = MPI_REQUEST_NULL;
    wd.side = MPI_COMM_NULL;
}

int st_watchdog_running(void)
{
    return wd.up;
}

void st_watchdog_set_timeout(double seconds)
{
    if (seconds > 0.0)
        wd.timeout = seconds;
}

void st_watchdog_set_step(int64_t step)
{
    wd.step = step;
}

int64_t st_watchdog_step(void)
{
    return wd.step;
}

int st_watchdog_register(MPI_Comm comm)
{
    if (!wd.up)
        return -1;
    if (wd.n == wd.cap) {
        int cap = wd.cap ? 2 * wd.cap : 8;
        watched *w = realloc(wd.w, (size_t)cap * sizeof *w);
        if (!w)
            return -1;
        wd.w = w;
        wd.cap = cap;
    }
    watched *w = &wd.w[wd.n];
    memset(w, 0, sizeof *w);
    MPI_Group g = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    int *idx = NULL, ok = 0;
    if (MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN) == MPI_SUCCESS &&
        MPI_Comm_size(comm, &w->size) == MPI_SUCCESS &&
        MPI_Comm_group(comm, &g) == MPI_SUCCESS &&
        MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS &&
        (idx = malloc((size_t)w->size * sizeof *idx)) &&
        (w->world_rank = malloc((size_t)w->size * sizeof *w->world_rank))) {
        for (int i = 0; i < w->size; i++)
            idx[i] = i;
        ok = MPI_Group_translate_ranks(g, w->size, idx, world, w->world_rank) == MPI_SUCCESS;
    }
    free(idx);
    if (g != MPI_GROUP_NULL)
        MPI_Group_free(&g);
    if (world != MPI_GROUP_NULL)
        MPI_Group_free(&world);
    if (!ok) {
        free(w->world_rank);
        return -1;
    }
    w->live = 1;
    return wd.n++;
}

void st_watchdog_unregister(int id)
{
    if (id < 0 || id >= wd.n || !wd.w[id].live)
        return;
    wd.w[id].live = 0;
    free(wd.w[id].world_rank);
    wd.w[id].world_rank = NULL;
}

uint64_t st_watchdog_enter(int id)
{
    return id >= 0 && id < wd.n ? ++wd.w[id].issued : 0;
}

/* ---- the fault path ---------------------------------------------------- */

static size_t append(char *buf, size_t n, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t n, size_t len, const char *fmt, ...)
{
    if (len >= n)
        return len;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
    return k < 0 ? len : len + (size_t)k;
}

static void describe(char *buf, size_t n, const st_wd_op *op)
{
    size_t len = append(buf, n, 0, "%s", op->op ? op->op : "collective");
    if (op->what)
        len = append(buf, n, len, " of %s", op->what);
    if (op->unit >= 0)
        len = append(buf, n, len, " %d", op->unit);
    len = append(buf, n, len, " (%s group)", op->group ? op->group : "an MPI");
    if (op->step > 0)
        append(buf, n, len, " at step %lld", (long long)op->step);
    else if (op->step == 0)
        append(buf, n, len, " during start-up");
    else
        append(buf, n, len, " at shutdown");
}

/* Takes in every report (TAG_DONE) that has arrived. */
static void collect_reports(void)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_DONE, wd.side, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int32_t dummy;
        if (MPI_Recv(&dummy, 1, MPI_INT32_T, st.MPI_SOURCE, TAG_DONE, wd.side,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        note_alive(st.MPI_SOURCE);
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < wd.world)
            wd.reported[st.MPI_SOURCE] = 1;
    }
}

/* Tells every rank below this one known to be alive (the candidates for
 * the one that aborts) that this rank has printed its line.  The sends
 * are never completed: the process is about to exit. */
static void announce_report(void)
{
    static const int32_t done = 1;
    for (int r = 0; r < wd.rank && r < wd.world; r++) {
        MPI_Request req;
        if (wd.alive[r] && MPI_Isend(&done, 1, MPI_INT32_T, r, TAG_DONE, wd.side, &req) ==
                               MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

static int all_alive_reported(void)
{
    for (int r = 0; r < wd.world; r++)
        if (r != wd.rank && wd.alive[r] && !wd.reported[r])
            return 0;
    return 1;
}

/* Keeps answering the others for at least s seconds; with until_reported,
 * also until every rank known to be alive has reported, but no longer than
 * max_s. */
static void linger(double s, int until_reported, double max_s)
{
    const double t0 = now_s();
    for (;;) {
        service_queries();
        collect_reports();
        const double t = now_s() - t0;
        if (t >= max_s || (t >= s && (!until_reported || all_alive_reported())))
            return;
        pause_poll(1.0);
    }
}

/* Asks the members of id and fills the list of those that did not answer
 * (dead or stopped: the only ranks named as failed; marked in wd.silent)
 * and, in behind, of those that answered but had not reached the
 * collective (alive, held up elsewhere by the failed ones).  Returns how
 * many did not answer, or -1 when it cannot tell. */
static int exchange(int id, uint64_t seq, char *list, size_t n, char *behind, size_t bn)
{
    behind[0] = 0;
    snprintf(list, n, "unknown");
    if (!wd.up || id < 0 || id >= wd.n || !wd.w[id].live)
        return -1;
    list[0] = 0;
    const watched *w = &wd.w[id];
    int m = w->size, missing = 0, pending = 0;
    MPI_Request *rr = malloc((size_t)m * sizeof *rr), *sr = malloc((size_t)m * sizeof *sr);
    int64_t *rb = calloc((size_t)m * 2, sizeof *rb);
    int *state = calloc((size_t)m, sizeof *state);   /* 0 silent, 1 arrived, 2 behind */
    static int64_t query[2];
    query[0] = id;
    query[1] = (int64_t)seq;
    if (!rr || !sr || !rb || !state) {
        free(rr), free(sr), free(rb), free(state);
        snprintf(list, n, "unknown (out of memory)");
        return -1;
    }
    for (int i = 0; i < m; i++) {
        int r = w->world_rank[i];
        rr[i] = sr[i] = MPI_REQUEST_NULL;
        if (r == wd.rank) {
            state[i] = 1;
            continue;
        }
        if (MPI_Irecv(&rb[2 * i], 2, MPI_INT64_T, r, TAG_REPLY, wd.side, &rr[i]) != MPI_SUCCESS)
            rr[i] = MPI_REQUEST_NULL;
        else
            pending++;
        if (MPI_Isend(query, 2, MPI_INT64_T, r, TAG_QUERY, wd.side, &sr[i]) != MPI_SUCCESS)
            sr[i] = MPI_REQUEST_NULL;
    }
    const double end = now_s() + grace_s();
    while (pending > 0 && now_s() < end) {
        service_queries();
        for (int i = 0; i < m; i++) {
            if (rr[i] == MPI_REQUEST_NULL)
                continue;
            int flag = 0;
            if (MPI_Test(&rr[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                rr[i] = MPI_REQUEST_NULL;   /* a broken link: silent */
                pending--;
            } else if (flag) {
                state[i] = rb[2 * i + 1] >= (int64_t)seq ? 1 : 2;
                note_alive(w->world_rank[i]);
                pending--;
            }
        }
        pause_poll(1.0);
    }
    /* Requests still open are left to the exit, with their buffers (never
     * freed, so a late answer lands in valid memory): cancelling a send to
     * a dead rank may block. */
    size_t len = 0, blen = 0;
    const int show = 16;
    int late = 0;
    for (int i = 0; i < m; i++) {
        if (state[i] == 2) {
            if (late < show)
                blen = append(behind, bn, blen, "%s%d", late ? ", " : "", w->world_rank[i]);
            late++;
        }
        if (state[i] != 0)
            continue;
        wd.silent[w->world_rank[i]] = 1;
        if (missing < show)
            len = append(list, n, len, "%s%d", missing ? ", " : "", w->world_rank[i]);
        missing++;
    }
    if (missing > show)
        append(list, n, len, ", ... (%d in all)", missing);
    if (late > show)
        append(behind, bn, blen, ", ... (%d in all)", late);
    free(state);
    return missing;
}

/* The last resort, before the abort: a stopped rank can only be ended by
 * a signal, and a launcher that lost a rank does not always send one, so
 * the rank that aborts kills the ranks of its own node that did not
 * answer, after checking that the pid still runs this program. */
static void stop_silent_ranks(void)
{
    char self[64] = "", other[64], path[64];
    FILE *f = fopen("/proc/self/comm", "r");
    if (!f)
        return;
    if (!fgets(self, sizeof self, f))
        self[0] = 0;
    fclose(f);
    for (int r = 0; r < wd.world && self[0]; r++) {
        if (r == wd.rank || !wd.silent[r] || wd.whereabouts[2 * r + 1] != wd.whereabouts[2 * wd.rank + 1])
            continue;
        const pid_t pid = (pid_t)wd.whereabouts[2 * r];
        snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
        if (!(f = fopen(path, "r")))
            continue;
        const int same = fgets(other, sizeof other, f) && !strcmp(self, other);
        fclose(f);
        if (same && pid > 1)
            kill(pid, SIGKILL);
    }
}

static void fault(enum why why, int id, uint64_t seq, const st_wd_op *op, int mpi_rc,
                  double waited, int asker) __attribute__((noreturn));
static void fault(enum why why, int id, uint64_t seq, const st_wd_op *op, int mpi_rc,
                  double waited, int asker)
{
    char what[256], reason[MPI_MAX_ERROR_STRING + 96], list[512], behind[512];
    describe(what, sizeof what, op);
    if (why == WHY_TIMEOUT) {
        snprintf(reason, sizeof reason, "did not complete within %g s", wd.timeout);
    } else if (why == WHY_PEER) {
        snprintf(reason, sizeof reason, "was abandoned after %.1f s because rank %d gave up "
                 "waiting", waited, asker);
    } else {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int k = 0;
        if (MPI_Error_string(mpi_rc, msg, &k) != MPI_SUCCESS)
            snprintf(msg, sizeof msg, "error %d", mpi_rc);
        snprintf(reason, sizeof reason, "failed (MPI: %s)", msg);
    }
    /* Every rank reports its own view of the stall, and errors it held
     * for an agreement that will not come are printed before it. */
    st_log_unhold();
    int missing = exchange(id, seq, list, sizeof list, behind, sizeof behind);
    char where[32], also[600] = "";
    snprintf(where, sizeof where, "rank %d", wd.rank);
    if (why == WHY_PEER && asker >= 0 && asker < wd.world && wd.silent[asker]) {
        /* The rank that asked was alive to ask and is silent now: it gave
         * up and left, so this rank is the one that was away (stopped, or
         * busy past the grace period).  Its view of the others is stale;
         * it blames nobody and leaves the abort to them. */
        st_error(where, "%s %s, and the other ranks had already ended; this rank was "
                 "stopped or too slow to answer; hint: see the other ranks' lines", what,
                 reason);
        fflush(stderr);
        _exit(ST_EXIT_TIMEOUT);
    }
    if (behind[0])
        snprintf(also, sizeof also, "; alive but held up elsewhere: %s", behind);
    st_error(where, "%s %s; ranks that did not arrive: %s%s; hint: %s", what, reason,
             missing ? list : "none", also,
             missing > 0 ? "those ranks died or stalled (see their output and the "
                           "launcher's); if they are only slow, raise parallel.timeout_s"
             : missing == 0 ? "every rank reached it, so the transport failed; check the "
                              "network and the MPI installation"
                            : "look for a rank that died or stalled; if it is only slow, "
                              "raise parallel.timeout_s");
    fflush(stdout);
    fflush(stderr);
    if (wd.up) {
        /* The others began their exchanges within a poll of our query;
         * two grace periods cover theirs.  The rank that aborts waits for
         * the reports too, up to 0.4 of a timeout, and MPI_Abort gets
         * at most a quarter of one (or two grace periods), which keeps the whole job
         * within two timeouts of the stall. */
        announce_report();
        collect_reports();
        const int aborter = wd.world > 1 && wd.lowest_alive == wd.rank;
        const double g2 = 2.0 * grace_s();
        linger(g2, aborter, aborter ? (g2 > 0.4 * wd.timeout ? g2 : 0.4 * wd.timeout) : g2);
        if (aborter) {
            /* MPI_Abort asks the launcher, which may itself be waiting on
             * the lost rank (or not kill a stopped one): past a quarter of
             * a timeout, the ranks of this node that did not answer are
             * killed here and this rank exits by itself. */
            const double q = 0.25 * wd.timeout;
            st_deadline_arm(q > 2.0 * grace_s() ? q : 2.0 * grace_s(), where, "MPI_Abort",
                            "the launcher did not end the job; the ranks of this node that "
                            "did not answer were killed", stop_silent_ranks);
            MPI_Abort(MPI_COMM_WORLD, ST_EXIT_TIMEOUT);
        }
    }
    _exit(ST_EXIT_TIMEOUT);
}

void st_watchdog_fail(int id, uint64_t seq, const st_wd_op *op, int mpi_rc)
{
    fault(WHY_MPI, id, seq, op, mpi_rc, 0.0, -1);
}

void st_watchdog_wait(MPI_Request *req, int id, uint64_t seq, const st_wd_op *op)
{
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && done)
        return;
    if (id < 0) {
        /* Not watched (no watchdog running): block as MPI would. */
        rc = rc == MPI_SUCCESS ? MPI_Wait(req, MPI_STATUS_IGNORE) : rc;
        if (rc != MPI_SUCCESS)
            fault(WHY_MPI, id, seq, op, rc, 0.0, -1);
        return;
    }
    const double t0 = now_s(), deadline = t0 + wd.timeout;
    for (;;) {
        if (rc != MPI_SUCCESS)
            fault(WHY_MPI, id, seq, op, rc, now_s() - t0, -1);
        if (done)
            return;
        const double t = now_s();
        int asker = service_queries();
        if (asker >= 0)
            fault(WHY_PEER, id, seq, op, 0, t - t0, asker);
        if (t >= deadline)
            fault(WHY_TIMEOUT, id, seq, op, 0, t - t0, -1);
        pause_poll(t - t0);
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}

void st_watchdog_blocking_begin(const char *what, int world_fence)
{
    if (!wd.up)
        return;
    if (world_fence) {
        st_wd_op op = {"barrier", what, -1, "world", wd.step};
        uint64_t seq = st_watchdog_enter(ST_WD_WORLD);
        MPI_Request r;
        st_watchdog_finish(MPI_Ibarrier(MPI_COMM_WORLD, &r), &r, ST_WD_WORLD, seq, &op);
    }
    char where[32];
    snprintf(where, sizeof where, "rank %d", wd.rank);
    st_deadline_arm(wd.timeout, where, what, "a rank died or stalled inside it (see the "
                    "other ranks' lines and the launcher's output); if it is only slow, raise "
                    "parallel.timeout_s", NULL);
}

void st_watchdog_blocking_end(void)
{
    if (wd.up)
        st_deadline_disarm();
}

void st_watchdog_finish(int mpi_rc, MPI_Request *req, int id, uint64_t seq,
                        const st_wd_op *op)
{
    if (mpi_rc != MPI_SUCCESS)
        fault(WHY_MPI, id, seq, op, mpi_rc, 0.0, -1);
    st_watchdog_wait(req, id, seq, op);
}
