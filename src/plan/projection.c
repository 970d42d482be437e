/* Step-time projection (see projection.h).  The numbers it gives are what
 * the README quotes for clusters we have not run on, so the model is kept
 * small enough to check by hand and walks the very schedule the engine
 * executes (engine/schedule.h), event for event: a projection of a
 * schedule the engine does not run would flatter or blame the wrong thing.
 *
 * Compute.  st_model_flops_per_token is 6 x (matrix parameters) + 12 L C T
 * (attention scores and values, forward + backward, causal mask ignored).
 * It is split over the units: a block gets 6 x (its matrix parameters) +
 * 12 C T, the head 6 x (its matrix, or V x C when tied), the embedding 0
 * (a lookup).  Of a unit's share f_u, forward is f_u / 3 and backward
 * 2 f_u / 3, per token; a micro-batch has b T tokens (b = micro_batch).
 *   block forward   t = (f_u / 3) b T / (tflops 1e12)
 *   block backward  t = (2 f_u / 3) b T / (...)  [+ the forward again with
 *                   activation checkpointing, which recomputes the block]
 *   head            t = f_u b T / (...)  (forward and backward in one step)
 *   embedding fwd, embedding bwd: 0
 *
 * Collectives (ring algorithm, costs as nccl-tests' bus bandwidth defines
 * them).  Over a group of n ranks, a collective whose full buffer is B
 * bytes costs
 *   all-gather, reduce-scatter   t = (n-1) lat + B (n-1)/n / bw
 *   all-reduce                   t = 2 (n-1) lat + 2 B (n-1)/n / bw
 * B is the unit padded to a multiple of S (as the engine pads it), in the
 * compute dtype for gathers (2 bytes bf16, 4 fp32) and in reduce_dtype for
 * reductions.  bw and lat are intra-node when every group of that kind
 * lies inside one node, otherwise inter-node: the ring is only as fast as
 * its slowest link.  NCCL's hierarchical and tree algorithms, and NVLink
 * SHARP, do better than this on multi-node groups and for small buffers,
 * and NCCL's several rings (channels) leave a node through different NICs,
 * so a shard group of whole nodes can see up to G x the per-GPU NIC
 * bandwidth: multi-node full_shard is pessimistic here (give inter_bw_gbs
 * = G x NIC for the other bound).  A replicate group has one rank per node
 * and each of the G groups of a node uses its own NIC, so inter_bw is
 * right for it.
 *   full_shard, shard_grad_op  S = N G, R = 1
 *   hybrid_shard               S = shard_size or G, R = N G / S: the
 *                              gradient's shard (B / S bytes) is then
 *                              all-reduced over R
 *   no_shard                   S = 1 (no gathers), R = N G: the unit's full
 *                              gradient is all-reduced
 *
 * Schedule.  The engine's step list per micro-step is embed fwd, block
 * 0..L-1 fwd, head fwd+bwd, block L-1..0 bwd, embed bwd, walked here with
 * the engine's own rules (unit states, `prefetch` gathers in flight,
 * release after forward unless shard_grad_op, reduction one unit behind)
 * on two resources: the compute stream and one communication channel for
 * every group (shard and replicate alike).  Collectives run one at a time
 * in issue order, as on the NCCL backend's one communication stream (which
 * keeps two communicators from deadlocking, comm_nccl.c), so a hybrid_shard
 * replicate all-reduce and a shard-group gather never overlap each other,
 * though each may overlap compute.  As in the NCCL backend, a collective starts no
 * earlier than the compute enqueued before it, and a wait makes the next
 * compute wait for the collective:
 *   - a step's own gathers are issued when the compute stream reaches the
 *     step, and its compute starts when they and the previous compute are
 *     done;
 *   - prefetch gathers are issued after that, i.e. at the step's compute
 *     start, and run while it computes if the channel is free;
 *   - after a backward step the unit's reduce-scatter is issued (at the
 *     compute's end), then the previous unit's reduce-scatter is waited
 *     for and, for R > 1, the all-reduce before it waited for and its own
 *     issued: the replicate all-reduce of a unit runs while the backward
 *     of the unit after next computes (fsdp.c's replicate_finish);
 *     no_shard has no reduce-scatter and issues its all-reduce at once,
 *     in the reduce-scatter's place, where it runs behind the next
 *     unit's backward;
 *   - the micro-step ends when its last reduction is waited for.
 * An optimizer step is accum = global_batch / (micro_batch N G)
 * micro-steps run one after the other; with no_sync only the last one
 * reduces.  The optimizer update is memory-bound: AdamW reads parameters,
 * gradients and both moments and writes three of them back, 28 bytes per
 * fp32 element of the rank's shards, at hbm_bw (in bf16 it also writes
 * the shard's bf16 copy, 2 bytes more, which spares the gathers a packing
 * pass; neither is counted).
 *
 * SM sharing.  A running collective's kernels hold some of the GPU's SMs
 * (NCCL: one thread block per channel), so compute that overlaps one runs
 * slower.  With comm_sm_share f (the fraction of the GPU they hold), a
 * compute step runs at 1 - f of its speed while the communication stream
 * is busy and at full speed otherwise; the collectives keep their ring
 * cost.  A step of c seconds that starts as a collective of d seconds
 * starts thus ends after c + f d when d (1 - f) < c, else c / (1 - f).
 * f = 0 (the default) suits a tflops that was achieved with communication
 * running beside it (a whole training step's rate); a rate measured on
 * compute alone wants f > 0 (16 / 132 = 0.12 for 16 NCCL channels on an
 * H100 SXM, the assumption of docs/gpu.md's step model).
 *
 * Neglected: the loss and gradient-norm all-reduces of a few bytes, the
 * bf16 packing and the host-side gradient accumulation, and kernel launch
 * gaps.
 *
 *   tokens/s/GPU = global_batch T / step_s / (N G)
 *   efficiency  = compute_s / step_s */
#include "plan/projection.h"
#include "comm/groups.h"
#include "base/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sources: NVLink 4 gives an H100 SXM 900 GB/s bidirectional, 450 GB/s per
 * direction; nccl-tests all_gather / reduce_scatter on 8 H100 SXM reach
 * roughly 350-370 GB/s bus bandwidth, so 360 is assumed (all_reduce with
 * NVLS reaches more, not modelled).  One 400 Gb/s NDR InfiniBand NIC per
 * GPU is 50 GB/s line rate; multi-node nccl-tests reach about 40 GB/s per
 * GPU.  Per ring-step latencies of a few microseconds are NCCL's order of
 * magnitude (NVLink lower than the network).  HBM3 is 3.35 TB/s peak; an
 * unfused elementwise optimizer pass reaches about 2 TB/s (assumed). */
void st_cluster_defaults(st_cluster *c)
{
    c->nodes = 1;
    c->gpus_per_node = 8;
    c->tflops = 0.0;
    c->intra_bw_gbs = 360.0;
    c->intra_lat_us = 2.0;
    c->inter_bw_gbs = 40.0;
    c->inter_lat_us = 5.0;
    c->hbm_bw_gbs = 2000.0;
    c->comm_sm_share = 0.0;
}

#define OPT_BYTES_PER_ELEM 28.0

typedef struct {
    double bw, lat;          /* bytes/s, s per ring step */
} link_t;

/* Per unit: flops per token, the collectives' durations and the bytes a
 * rank sends in them. */
typedef struct {
    double *flops, *ag_s, *rs_s, *ar_s, *ag_b, *rs_b, *ar_b;
} unit_costs;

typedef struct {
    int S, R;
    const double *compute_s; /* per step of the micro-step */
    unit_costs c;
    double *done;            /* per unit: when its all-gather ends */
    double *rs_end;          /* per unit: when its reduce-scatter ends */
    double ar_end;           /* when the replicate all-reduce in flight ends */
    double ready;            /* where the compute stream stands */
    double chan;             /* when the communication stream is free */
    double ag, rs, ar;       /* bytes accumulated */
    double keep;             /* compute speed beside a collective: 1 - comm_sm_share */
    double *busy;            /* the collectives' [start, end) spans, in time order */
    int n_busy, first_busy;  /* spans, and the first that may still be ahead */
    st_sched_trace *trace;   /* tests: the events walked, or NULL */
} sim;

static int fail(char *err, size_t errn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errn)
        vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return ST_EXIT_USAGE;
}

static double max2(double a, double b) { return a > b ? a : b; }

static double ring(int n, double bytes, const link_t *l)
{
    if (n <= 1)
        return 0.0;
    return (n - 1) * l->lat + bytes * (n - 1) / n / l->bw;
}

/* ---- the engine's schedule, on a timeline ------------------------------ */

/* A collective of dur seconds on the communication stream, issued when
 * the compute stream stands at ready: it starts when the stream is free,
 * and its span is kept for the compute it slows.  Returns its end. */
static double channel_run(sim *s, double dur)
{
    const double start = max2(s->ready, s->chan);
    s->chan = start + dur;
    if (dur > 0.0) {
        s->busy[2 * s->n_busy] = start;
        s->busy[2 * s->n_busy + 1] = s->chan;
        s->n_busy++;
    }
    return s->chan;
}

/* When compute of work seconds (at full speed) that starts at start ends,
 * at keep of its speed inside the spans.  The spans are in time order and
 * compute starts never go back, so spans wholly behind start are passed
 * for good. */
static double compute_run(sim *s, double start, double work)
{
    double t = start;
    while (s->first_busy < s->n_busy && s->busy[2 * s->first_busy + 1] <= t)
        s->first_busy++;
    for (int i = s->first_busy; i < s->n_busy && work > 0.0; i++) {
        const double a = s->busy[2 * i], b = s->busy[2 * i + 1];
        if (a > t) {             /* full speed up to the span */
            if (work <= a - t)
                return t + work;
            work -= a - t;
            t = a;
        }
        const double cap = (b - t) * s->keep;
        if (work <= cap)
            return t + work / s->keep;   /* cap > 0, so keep > 0 */
        work -= cap;
        t = b;
    }
    return t + work;
}

static void gather_start(sim *s, int u)
{
    if (s->S == 1)
        return;              /* the shard is the unit: nothing crosses the wire */
    s->done[u] = channel_run(s, s->c.ag_s[u]);
    s->ag += s->c.ag_b[u];
}

/* rs_end[u]: when u's reduction ends, which reduce_finish waits for: its
 * reduce-scatter, or for no_shard (S == 1) its all-reduce, issued here at
 * once (fsdp.c's reduce_start). */
static void reduce_start(sim *s, int u)
{
    s->rs_end[u] = s->ready;
    if (s->S > 1) {
        s->rs_end[u] = channel_run(s, s->c.rs_s[u]);
        s->rs += s->c.rs_b[u];
    } else if (s->R > 1) {
        s->rs_end[u] = channel_run(s, s->c.ar_s[u]);
        s->ar += s->c.ar_b[u];
    }
}

static void reduce_finish(sim *s, int u)
{
    s->ready = max2(s->ready, s->rs_end[u]);
    if (s->R > 1 && s->S > 1) {
        /* The previous all-reduce is waited for first; this one runs
         * behind the next compute, which waits for it one reduction later
         * (or the micro-step's end does). */
        s->ready = max2(s->ready, s->ar_end);
        s->ar_end = channel_run(s, s->c.ar_s[u]);
        s->ar += s->c.ar_b[u];
    }
}

static int on_event(void *ctx, st_sched_op op, int arg)
{
    sim *s = ctx;
    switch (op) {
    case ST_SCHED_GATHER_START: gather_start(s, arg); break;
    case ST_SCHED_GATHER_WAIT: s->ready = max2(s->ready, s->done[arg]); break;
    case ST_SCHED_COMPUTE: s->ready = compute_run(s, s->ready, s->compute_s[arg]); break;
    case ST_SCHED_REDUCE_START: reduce_start(s, arg); break;
    case ST_SCHED_REDUCE_FINISH: reduce_finish(s, arg); break;
    default: break;      /* a release frees memory, it takes no time */
    }
    return 0;
}

/* One micro-step from idle; returns its duration. */
static double micro_step(sim *s, const st_sched *sched, const st_sched_step *steps, int n,
                         int sync)
{
    s->ready = s->chan = s->ar_end = 0.0;
    s->n_busy = s->first_busy = 0;
    st_sched_walk(sched, steps, n, sync, on_event, s, s->trace);
    return max2(s->ready, s->chan);
}

/* ---- set-up ------------------------------------------------------------ */

/* Whether some group of the layout has members on two nodes: shard groups
 * are consecutive ranks, replicate groups ranks with the same rank mod S. */
static int spans_nodes(int world, int G, int S, int replicate)
{
    for (int r = 0; r < world; r++) {
        int first = replicate ? r % S : r / S * S;
        if (r / G != first / G)
            return 1;
    }
    return 0;
}

static int check_cluster(const st_cluster *c, char *err, size_t errn)
{
    if (c->nodes < 1 || c->gpus_per_node < 1 || c->nodes > (1 << 20) / c->gpus_per_node)
        return fail(err, errn, "cluster of %d nodes x %d GPUs is not a layout; hint: give "
                    "nodes >= 1 and gpus_per_node >= 1 (at most 2^20 ranks)", c->nodes,
                    c->gpus_per_node);
    if (!(c->tflops > 0.0))
        return fail(err, errn, "achieved compute of %g TFLOP/s per GPU; hint: give the "
                    "measured (or assumed) dense bf16 TFLOP/s, e.g. 400 for an H100", c->tflops);
    if (!(c->intra_bw_gbs > 0.0) || !(c->inter_bw_gbs > 0.0) || !(c->hbm_bw_gbs > 0.0))
        return fail(err, errn, "bandwidth intra %g, inter %g, hbm %g GB/s; hint: every "
                    "bandwidth must be > 0 (INFINITY for none)", c->intra_bw_gbs,
                    c->inter_bw_gbs, c->hbm_bw_gbs);
    if (!(c->intra_lat_us >= 0.0) || !(c->inter_lat_us >= 0.0) || isinf(c->intra_lat_us) ||
        isinf(c->inter_lat_us))
        return fail(err, errn, "latency intra %g, inter %g us; hint: latencies must be "
                    "finite and >= 0", c->intra_lat_us, c->inter_lat_us);
    if (!(c->comm_sm_share >= 0.0 && c->comm_sm_share < 1.0))
        return fail(err, errn, "comm_sm_share %g; hint: the fraction of a GPU that a "
                    "collective's kernels hold is >= 0 and < 1", c->comm_sm_share);
    return 0;
}

/* The checks of the model and configuration that need the world size. */
static int check_config(const st_model *m, const st_config *cfg, int world, char *err,
                        size_t errn)
{
    const st_train_config *tr = &cfg->train;
    const st_parallel_config *par = &cfg->parallel;
    if (m->T != cfg->model.seq_len || m->n_units != m->L + 2)
        return fail(err, errn, "model (seq_len %lld, %d units) was not built from this "
                    "config (seq_len %lld); hint: st_model_init(&m, &cfg->model)",
                    (long long)m->T, m->n_units, (long long)cfg->model.seq_len);
    if (tr->micro_batch < 1 || tr->global_batch < 1 ||
        tr->global_batch % (tr->micro_batch * world))
        return fail(err, errn, "train.global_batch = %lld is not a multiple of micro_batch "
                    "%lld x %d ranks; hint: use a multiple of %lld",
                    (long long)tr->global_batch, (long long)tr->micro_batch, world,
                    (long long)(tr->micro_batch * world));
    if (par->prefetch < 0)
        return fail(err, errn, "parallel.prefetch = %lld is negative; hint: 0 disables "
                    "prefetching", (long long)par->prefetch);
    return 0;
}

/* The engine's own layout rules, with consecutive ranks per node. */
static int layout_of(const st_cluster *c, const st_parallel_config *par, st_layout *lay,
                     char *err, size_t errn)
{
    const int G = c->gpus_per_node, world = c->nodes * G;
    int *node_of = malloc(sizeof(int) * (size_t)world);
    if (!node_of)
        return fail(err, errn, "out of memory for %d ranks", world);
    for (int r = 0; r < world; r++)
        node_of[r] = r / G;
    int rc = st_layout_compute(world, 0, node_of, par->strategy, par->shard_size, lay, err,
                               errn);
    free(node_of);
    return rc;
}

/* Fills uc for the layout; returns the elements of this rank's shards. */
static double cost_units(const st_model *m, const st_config *cfg, const st_cluster *c,
                         const st_layout *lay, unit_costs *uc)
{
    const int G = c->gpus_per_node, world = c->nodes * G;
    const int S = lay->shard_size, R = lay->replicate_size;
    const link_t intra = {c->intra_bw_gbs * 1e9, c->intra_lat_us * 1e-6};
    const link_t inter = {c->inter_bw_gbs * 1e9, c->inter_lat_us * 1e-6};
    const link_t *shard_link = spans_nodes(world, G, S, 0) ? &inter : &intra;
    const link_t *rep_link = spans_nodes(world, G, S, 1) ? &inter : &intra;
    const double cbytes = cfg->train.precision == ST_PREC_BF16 ? 2.0 : 4.0;
    const double rbytes = cfg->parallel.reduce_dtype == ST_PREC_BF16 ? 2.0 : 4.0;
    const int nu = m->n_units, head = nu - 1;

    /* Flops per token: the same terms as st_model_flops_per_token (with
     * LoRA the frozen matrices' 4 a parameter and the adapters' 6; the
     * steps below still split a unit's flops 1 : 2 between forward and
     * backward, which LoRA's frozen matrices make 1 : 1, so the model
     * errs towards a longer forward there). */
    const double per = m->lora.rank ? 4.0 : 6.0;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        if (t->ndim == 2 && t->unit != 0)
            uc->flops[t->unit] += per * (double)t->numel;
    }
    for (int i = 0; i < m->n_lora_tensors; i++)
        uc->flops[m->lora_tensors[i].unit] += 6.0 * (double)m->lora_tensors[i].numel;
    if (m->tied)
        uc->flops[head] += per * (double)(m->V * m->C);
    double shard_elems = 0.0;
    for (int u = 0; u < nu; u++) {
        if (m->units[u].kind == ST_UNIT_BLOCK)
            uc->flops[u] += 12.0 * (double)(m->C * m->T);
        /* Gathers bring both parts of a unit; only the trained part (all
         * of it without LoRA, the adapters with) is reduced. */
        int64_t padded = st_model_train_padded(m, u, S);
        int64_t gathered = padded + st_model_frozen_padded(m, u, S);
        double shard = (double)(padded / S);
        shard_elems += shard;
        uc->ag_s[u] = ring(S, (double)gathered * cbytes, shard_link);
        uc->rs_s[u] = ring(S, (double)padded * rbytes, shard_link);
        uc->ar_s[u] = 2.0 * ring(R, shard * rbytes, rep_link);
        uc->ag_b[u] = S > 1 ? (double)gathered * cbytes * (S - 1) / S : 0.0;
        uc->rs_b[u] = S > 1 ? (double)padded * rbytes * (S - 1) / S : 0.0;
        uc->ar_b[u] = R > 1 ? 2.0 * shard * rbytes * (R - 1) / R : 0.0;
    }
    return shard_elems;
}

/* Each step's compute time into compute_s; returns their sum. */
static double cost_steps(const st_model *m, const st_config *cfg, const st_cluster *c,
                         const double *flops, const st_sched_step *steps, int n,
                         double *compute_s)
{
    const st_train_config *tr = &cfg->train;
    const int ckpt = tr->activation_checkpointing == ST_ACKPT_FULL, head = m->n_units - 1;
    const double rate = c->tflops * 1e12, tokens = (double)(tr->micro_batch * m->T);
    double sum = 0.0;
    for (int k = 0; k < n; k++) {
        const int u = steps[k].layer + 1;
        switch (steps[k].kind) {
        case ST_STEP_BLOCK_FWD: compute_s[k] = flops[u] / 3.0 * tokens / rate; break;
        case ST_STEP_HEAD: compute_s[k] = flops[head] * tokens / rate; break;
        case ST_STEP_BLOCK_BWD:
            compute_s[k] = flops[u] * (ckpt ? 1.0 : 2.0 / 3.0) * tokens / rate;
            break;
        default: compute_s[k] = 0.0; /* the embedding is a lookup */
        }
        sum += compute_s[k];
    }
    return sum;
}

/* The step's time and bytes from micro-steps that are identical but for
 * the reduction: one of each kind is simulated and counted. */
static void project_micro_steps(sim *s, const st_sched *sched, const st_sched_step *steps,
                                int n, int accum, int no_sync, st_projection *out)
{
    double t_sync = micro_step(s, sched, steps, n, 1);
    double ag1 = s->ag, rs1 = s->rs, ar1 = s->ar;
    double t_skip = t_sync, ag0 = ag1, rs0 = rs1, ar0 = ar1;
    if (no_sync && accum > 1) {
        s->ag = s->rs = s->ar = 0.0;
        t_skip = micro_step(s, sched, steps, n, 0);
        ag0 = s->ag;
        rs0 = s->rs;
        ar0 = s->ar;
    }
    out->step_s = (accum - 1) * t_skip + t_sync;
    out->ag_bytes = (accum - 1) * ag0 + ag1;
    out->rs_bytes = (accum - 1) * rs0 + rs1;
    out->ar_bytes = (accum - 1) * ar0 + ar1;
}

int st_project_step(const st_model *m, const st_config *cfg, const st_cluster *c,
                    st_projection *out, char *err, size_t errn)
{
    return st_project_step_traced(m, cfg, c, out, err, errn, NULL);
}

int st_project_step_traced(const st_model *m, const st_config *cfg, const st_cluster *c,
                           st_projection *out, char *err, size_t errn, st_sched_trace *trace)
{
    memset(out, 0, sizeof *out);
    if (err && errn)
        err[0] = '\0';
    int rc = check_cluster(c, err, errn);
    if (rc)
        return rc;
    const int world = c->nodes * c->gpus_per_node;
    st_layout lay;
    rc = check_config(m, cfg, world, err, errn);
    rc = rc ? rc : layout_of(c, &cfg->parallel, &lay, err, errn);
    if (rc)
        return rc;
    const st_train_config *tr = &cfg->train;
    const int S = lay.shard_size, R = lay.replicate_size, nu = m->n_units;
    const int max_steps = (int)st_sched_max_steps(m->L);

    /* Nine doubles per unit and one per step in one block, and the
     * collectives' spans: at most two gathers, a reduce-scatter and an
     * all-reduce per unit in a micro-step. */
    const size_t max_spans = 4 * (size_t)nu + 4;
    double *buf = calloc((size_t)nu * 9 + (size_t)max_steps + 2 * max_spans, sizeof(double));
    st_sched_step *steps = calloc((size_t)max_steps, sizeof *steps);
    if (!buf || !steps) {
        free(buf);
        free(steps);
        return fail(err, errn, "out of memory for %d units", nu);
    }
    unit_costs uc = {buf, buf + nu, buf + 2 * nu, buf + 3 * nu, buf + 4 * nu, buf + 5 * nu,
                     buf + 6 * nu};
    double *compute_s = buf + 9 * nu;
    double shard_elems = cost_units(m, cfg, c, &lay, &uc);
    st_sched sched;
    st_sched_init(&sched, m->L, m->tied, cfg->parallel.strategy, S, R, cfg->parallel.prefetch);
    int n = st_sched_build_steps(&sched, 1, steps);
    double micro_compute = cost_steps(m, cfg, c, uc.flops, steps, n, compute_s);

    sim s = {.S = S, .R = R, .compute_s = compute_s, .c = uc, .done = buf + 7 * nu,
             .rs_end = buf + 8 * nu, .trace = trace, .keep = 1.0 - c->comm_sm_share,
             .busy = compute_s + max_steps};
    const int accum = (int)(tr->global_batch / (tr->micro_batch * world));
    project_micro_steps(&s, &sched, steps, n, accum, cfg->parallel.no_sync, out);

    out->optimizer_s = OPT_BYTES_PER_ELEM * shard_elems / (c->hbm_bw_gbs * 1e9);
    out->compute_s = accum * micro_compute + out->optimizer_s;
    out->step_s += out->optimizer_s;
    out->exposed_comm_s = out->step_s - out->compute_s;
    if (out->exposed_comm_s < 0.0) /* rounding only */
        out->exposed_comm_s = 0.0;
    out->scaling_efficiency = out->compute_s / out->step_s;
    out->tokens_per_s_per_gpu =
        (double)tr->global_batch * (double)m->T / out->step_s / (double)world;
    out->shard_size = S;
    out->replicate_size = R;
    out->accum = accum;
    free(buf);
    free(steps);
    return 0;
}
