/* The FSDP schedule (see schedule.h).  The walk keeps its own record of
 * each unit (sharded, gathering, gathered) and of the gathers in flight,
 * so that its decisions depend on nothing but the schedule's inputs: the
 * engine's buffers, the estimator's byte counts and the projection's clock
 * follow from the events, never feed back into them. */
#include "engine/schedule.h"
#include "base/log.h"
#include "config/config.h"

#include <stdlib.h>
#include <string.h>

enum { SHARDED, GATHERING, GATHERED };

int st_sched_reshards_after_forward(int strategy)
{
    /* shard_grad_op keeps a gathered unit from its forward to its
     * backward; the others free it as soon as the next step does not
     * need it. */
    return strategy != ST_STRAT_SHARD_GRAD_OP;
}

void st_sched_init_rule(st_sched *s, int64_t n_layers, int tied, int reshard_after_forward,
                        int S, int R, int64_t prefetch)
{
    memset(s, 0, sizeof *s);
    s->n_layers = (int)n_layers;
    s->tied = tied;
    s->instant_gather = S == 1;
    s->reshard_after_forward = reshard_after_forward;
    s->prefetch = prefetch;
    s->reduces = !(S == 1 && R == 1);
}

void st_sched_init(st_sched *s, int64_t n_layers, int tied, int strategy, int S, int R,
                   int64_t prefetch)
{
    st_sched_init_rule(s, n_layers, tied, st_sched_reshards_after_forward(strategy), S, R,
                       prefetch);
}

static int head_unit(const st_sched *s) { return s->n_layers + 1; }

int st_sched_build_steps(const st_sched *s, int train, st_sched_step *steps)
{
    const int L = s->n_layers;
    int n = 0;
    steps[n++] = (st_sched_step){ST_STEP_EMBED_FWD, -1};
    for (int l = 0; l < L; l++)
        steps[n++] = (st_sched_step){ST_STEP_BLOCK_FWD, l};
    steps[n++] = (st_sched_step){ST_STEP_HEAD, -1};
    if (train) {
        for (int l = L - 1; l >= 0; l--)
            steps[n++] = (st_sched_step){ST_STEP_BLOCK_BWD, l};
        steps[n++] = (st_sched_step){ST_STEP_EMBED_BWD, -1};
    }
    return n;
}

int st_sched_step_units(const st_sched *s, const st_sched_step *st, int out[2])
{
    switch (st->kind) {
    case ST_STEP_EMBED_FWD: out[0] = 0; return 1;
    case ST_STEP_BLOCK_FWD:
    case ST_STEP_BLOCK_BWD: out[0] = st->layer + 1; return 1;
    case ST_STEP_HEAD:
        out[0] = head_unit(s);
        if (s->tied) {
            out[1] = 0;
            return 2;
        }
        return 1;
    default: return 0;
    }
}

int st_sched_grad_units(const st_sched *s, const st_sched_step *st, int out[2])
{
    switch (st->kind) {
    case ST_STEP_HEAD: return st_sched_step_units(s, st, out);
    case ST_STEP_BLOCK_BWD: out[0] = st->layer + 1; return 1;
    case ST_STEP_EMBED_BWD: out[0] = 0; return 1;
    default: return 0;
    }
}

/* The unit whose gradient is complete once step st is done, or -1.  The
 * embedding's is complete only after its own backward, since the tied
 * head adds to it first. */
static int grad_complete(const st_sched *s, const st_sched_step *st)
{
    switch (st->kind) {
    case ST_STEP_HEAD: return head_unit(s);
    case ST_STEP_BLOCK_BWD: return st->layer + 1;
    case ST_STEP_EMBED_BWD: return 0;
    default: return -1;
    }
}

typedef struct {
    const st_sched *s;
    const st_sched_step *steps;
    int n;
    st_sched_fn fn;
    void *ctx;
    st_sched_trace *trace;
    unsigned char *state;    /* per unit */
    int64_t in_flight;
} walk;

static int emit(walk *w, st_sched_op op, int arg)
{
    if (w->trace)
        st_sched_trace_add(w->trace, op, arg);
    return w->fn(w->ctx, op, arg);
}

static int gather_start(walk *w, int u)
{
    if (w->state[u] != SHARDED)
        return 0;
    if (w->s->instant_gather) {
        w->state[u] = GATHERED;
    } else {
        w->state[u] = GATHERING;
        w->in_flight++;
    }
    return emit(w, ST_SCHED_GATHER_START, u);
}

static int gather_wait(walk *w, int u)
{
    if (w->state[u] != GATHERING)
        return 0;
    w->state[u] = GATHERED;
    w->in_flight--;
    return emit(w, ST_SCHED_GATHER_WAIT, u);
}

/* Gather ahead for the steps after k, up to `prefetch` gathers in flight. */
static int prefetch_after(walk *w, int k)
{
    for (int j = k + 1; j < w->n && w->in_flight < w->s->prefetch; j++) {
        int us[2], m = st_sched_step_units(w->s, &w->steps[j], us);
        for (int i = 0; i < m && w->in_flight < w->s->prefetch; i++) {
            int rc = gather_start(w, us[i]);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The first step after k that reads unit u, or -1. */
static int next_use(const walk *w, int k, int u)
{
    for (int j = k + 1; j < w->n; j++) {
        int us[2], m = st_sched_step_units(w->s, &w->steps[j], us);
        for (int i = 0; i < m; i++)
            if (us[i] == u)
                return j;
    }
    return -1;
}

/* Free the units of step k that no step needs soon enough. */
static int release_after(walk *w, int k)
{
    int us[2], m = st_sched_step_units(w->s, &w->steps[k], us);
    for (int i = 0; i < m; i++) {
        int next = next_use(w, k, us[i]);
        if (next < 0 || (w->s->reshard_after_forward && next != k + 1)) {
            w->state[us[i]] = SHARDED;
            int rc = emit(w, ST_SCHED_RELEASE, us[i]);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The step's own units, gathered and waited for one after the other. */
static int gather_own(walk *w, int k)
{
    int us[2], m = st_sched_step_units(w->s, &w->steps[k], us), rc = 0;
    for (int i = 0; i < m && !rc; i++) {
        rc = gather_start(w, us[i]);
        rc = rc ? rc : gather_wait(w, us[i]);
    }
    return rc;
}

int st_sched_walk(const st_sched *s, const st_sched_step *steps, int n, int sync,
                  st_sched_fn fn, void *ctx, st_sched_trace *trace)
{
    unsigned char state[s->n_layers + 2];
    memset(state, SHARDED, sizeof state);
    walk w = {s, steps, n, fn, ctx, trace, state, 0};
    int pending = -1;        /* the unit whose reduction is held */
    int rc = emit(&w, ST_SCHED_BEGIN, sync);
    for (int k = 0; k < n && !rc; k++) {
        rc = gather_own(&w, k);
        rc = rc ? rc : prefetch_after(&w, k);
        rc = rc ? rc : emit(&w, ST_SCHED_COMPUTE, k);
        int u = grad_complete(s, &steps[k]);
        if (!rc && u >= 0 && sync && s->reduces) {
            /* Started, even when starting failed, so it is finished too. */
            rc = emit(&w, ST_SCHED_REDUCE_START, u);
            int rc2 = pending >= 0 ? emit(&w, ST_SCHED_REDUCE_FINISH, pending) : 0;
            pending = u;
            rc = rc ? rc : rc2;
        }
        rc = rc ? rc : release_after(&w, k);
    }
    if (pending >= 0) {
        int rc2 = emit(&w, ST_SCHED_REDUCE_FINISH, pending);
        rc = rc ? rc : rc2;
    }
    return rc;
}

/* ---- traces ------------------------------------------------------------ */

void st_sched_trace_add(st_sched_trace *t, st_sched_op op, int arg)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        st_sched_event *ev = realloc(t->ev, sizeof *ev * (size_t)cap);
        /* Called from inside the walk, which has no error path for its
         * test-only recording. */
        if (!ev)
            st_fatal("out of memory recording the schedule");
        t->ev = ev;
        t->cap = cap;
    }
    t->ev[t->n++] = (st_sched_event){op, arg};
}

void st_sched_trace_free(st_sched_trace *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}

const char *st_sched_op_name(st_sched_op op)
{
    static const char *const names[] = {"begin", "gather_start", "gather_wait", "compute",
                                        "reduce_start", "reduce_finish", "release"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}
