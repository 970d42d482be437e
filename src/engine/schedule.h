/* The FSDP schedule of one micro-step: the list of steps, which units each
 * step reads, and the rule that decides when each unit is gathered,
 * released and has its gradient reduced.  It is written once, here, and
 * walked by three readers: the engine (fsdp.c) executes the events, the
 * memory estimator (estimate.c) adds up the bytes each event allocates or
 * frees, and the step-time projection (projection.c) puts each event on a
 * timeline.  A change of schedule is therefore a change of all three.
 *
 * The steps of a training micro-step are
 *
 *   embed fwd, block 0..L-1 fwd, head fwd+bwd, block L-1..0 bwd, embed bwd
 *
 * (forward only: up to the head).  Units are numbered as in model.h: the
 * embedding 0, block l as l + 1, the head L + 1.  The walk emits, for each
 * step k in order:
 *
 *   1. GATHER_START and GATHER_WAIT for each unit the step reads that is
 *      not gathered yet (a unit prefetched earlier is only waited for);
 *   2. GATHER_START for the units of the steps after k, in step order,
 *      while fewer than `prefetch` gathers are in flight;
 *   3. COMPUTE k;
 *   4. if the step completes a unit's gradient and this micro-step
 *      reduces: REDUCE_START of that unit, then REDUCE_FINISH of the
 *      previous one, so the reduction runs one unit behind the compute;
 *   5. RELEASE of each unit of step k that no later step reads, or, with
 *      reshard-after-forward, that the very next step does not read.
 *
 * and after the last step the REDUCE_FINISH of the reduction still held.
 * When every rank holds whole units (S == 1) a gather completes as it
 * starts: GATHER_START has no GATHER_WAIT and counts as no gather in
 * flight, so with prefetch > 0 step 2 gathers every later step's units at
 * once, and a unit released early is gathered again by the next step's
 * prefetch.  That costs nothing in fp32 (the shard is the unit) and holds
 * a rounded copy of each unit in bf16; the estimate counts it so. */
#ifndef ST_SCHEDULE_H
#define ST_SCHEDULE_H

#include <stdint.h>

typedef enum {
    ST_STEP_EMBED_FWD,
    ST_STEP_BLOCK_FWD,
    ST_STEP_HEAD,            /* forward and backward of the head */
    ST_STEP_BLOCK_BWD,
    ST_STEP_EMBED_BWD
} st_step_kind;

/* One step: its kind and, for a block, its layer (-1 otherwise).  The
 * engine allocates its step list from this size and the estimator counts
 * it, so it stays two ints. */
typedef struct {
    int kind;
    int layer;
} st_sched_step;

/* What the schedule depends on. */
typedef struct {
    int n_layers;                /* L: the model has L + 2 units */
    int tied;                    /* the head also reads the embedding */
    int instant_gather;          /* S == 1: a unit's shard is the unit */
    int reshard_after_forward;   /* full_shard, hybrid_shard, no_shard */
    int64_t prefetch;            /* gathers in flight ahead of the compute */
    int reduces;                 /* gradients cross ranks (not S == R == 1) */
} st_sched;

/* Whether strategy (enum st_strategy) frees a gathered unit between its
 * forward and its backward: all but shard_grad_op. */
int st_sched_reshards_after_forward(int strategy);

/* st_sched from the release rule itself (the engine is given the rule,
 * not the strategy). */
void st_sched_init_rule(st_sched *s, int64_t n_layers, int tied, int reshard_after_forward,
                        int S, int R, int64_t prefetch);

/* st_sched for strategy (enum st_strategy) on a shard group of S and a
 * replicate group of R ranks, with the model's layer count and tying. */
void st_sched_init(st_sched *s, int64_t n_layers, int tied, int strategy, int S, int R,
                   int64_t prefetch);

typedef enum {
    ST_SCHED_BEGIN,              /* arg: 1 if the micro-step reduces */
    ST_SCHED_GATHER_START,       /* arg: unit */
    ST_SCHED_GATHER_WAIT,        /* arg: unit */
    ST_SCHED_COMPUTE,            /* arg: step index */
    ST_SCHED_REDUCE_START,       /* arg: unit */
    ST_SCHED_REDUCE_FINISH,      /* arg: unit */
    ST_SCHED_RELEASE             /* arg: unit */
} st_sched_op;

/* Reductions held at once by the walk: the one started and the one behind
 * it, for a reader that keeps a slot per reduction. */
#define ST_SCHED_MAX_REDUCING 2

/* Room for the step list of a model of L layers. */
static inline int64_t st_sched_max_steps(int64_t n_layers) { return 2 * n_layers + 4; }

/* Fills steps (st_sched_max_steps entries) with a micro-step's list,
 * with the backward when train; returns the number of steps. */
int st_sched_build_steps(const st_sched *s, int train, st_sched_step *steps);

/* Units whose parameters step st reads, into out; returns how many (at
 * most 2).  The embedding's backward reads none: it needs only tokens. */
int st_sched_step_units(const st_sched *s, const st_sched_step *st, int out[2]);

/* Units whose full-size gradient step st adds to (the tied head adds to
 * the embedding's); returns how many (at most 2). */
int st_sched_grad_units(const st_sched *s, const st_sched_step *st, int out[2]);

/* Called for each event of the walk; a non-zero return stops it (the
 * reduction held is still finished) and is returned by st_sched_walk. */
typedef int (*st_sched_fn)(void *ctx, st_sched_op op, int arg);

typedef struct st_sched_trace st_sched_trace;

/* Walks one micro-step over steps[0..n) from every unit sharded, calling
 * fn for each event in order; sync: this micro-step reduces gradients
 * (no_sync leaves all but the last of an accumulation unreduced).  When
 * trace is not NULL (tests) each event is appended to it before fn sees
 * it.  Returns fn's first non-zero return, or 0. */
int st_sched_walk(const st_sched *s, const st_sched_step *steps, int n, int sync,
                  st_sched_fn fn, void *ctx, st_sched_trace *trace);

/* A recorded sequence of events, for tests that compare what the engine
 * executed with what the estimator walked.  Host memory outside the
 * engine's accounting, so recording does not move peak_bytes. */
typedef struct {
    st_sched_op op;
    int arg;
} st_sched_event;

struct st_sched_trace {
    st_sched_event *ev;
    int n, cap;
};

void st_sched_trace_add(st_sched_trace *t, st_sched_op op, int arg);
void st_sched_trace_free(st_sched_trace *t);
/* "gather_start" etc., for diagnostics. */
const char *st_sched_op_name(st_sched_op op);

#endif
