/* Step-time projection (see projection.h).  The numbers it gives are what
 * the README quotes for clusters we have not run on, so the model is kept
 * small enough to check by hand and follows the engine's schedule in
 * fsdp.c step for step: a projection of a schedule the engine does not run
 * would flatter or blame the wrong thing.
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
 * 0..L-1 fwd, head fwd+bwd, block L-1..0 bwd, embed bwd, replayed here with
 * the engine's own rules (unit states, `prefetch` gathers in flight,
 * release after forward unless shard_grad_op, reduction one unit behind)
 * on three resources: the compute stream and one channel per communicator
 * (shard group, replicate group).  Collectives on one channel run one at a
 * time in issue order, as on the NCCL backend's one stream per
 * communicator; the two channels may run at once (NVLink and InfiniBand
 * for hybrid_shard).  As in the NCCL backend, a collective starts no
 * earlier than the compute enqueued before it, and a wait makes the next
 * compute wait for the collective:
 *   - a step's own gathers are issued when the compute stream reaches the
 *     step, and its compute starts when they and the previous compute are
 *     done;
 *   - prefetch gathers are issued after that, i.e. at the step's compute
 *     start, and run while it computes if the channel is free;
 *   - after a backward step the unit's reduce-scatter is issued (at the
 *     compute's end), then the previous unit's reduce-scatter is waited
 *     for and, for R > 1, its all-reduce issued and waited for before the
 *     next compute (st_comm_allreduce_now): the engine never overlaps the
 *     replicate all-reduce with compute, and this model shows what that
 *     costs;
 *   - the micro-step ends when its last reduction is waited for.
 * An optimizer step is accum = global_batch / (micro_batch N G)
 * micro-steps run one after the other; with no_sync only the last one
 * reduces.  The optimizer update is memory-bound: AdamW reads parameters,
 * gradients and both moments and writes three of them back, 28 bytes per
 * fp32 element of the rank's shards, at hbm_bw.  Neglected: the loss and
 * gradient-norm all-reduces of a few bytes, the bf16 packing and the
 * host-side gradient accumulation, kernel launch gaps, and any slowdown of
 * compute by communication kernels sharing the SMs.
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
}

enum { K_EMBED_FWD, K_BLOCK_FWD, K_HEAD, K_BLOCK_BWD, K_EMBED_BWD };
enum { SHARDED, GATHERING, GATHERED };

#define OPT_BYTES_PER_ELEM 28.0

typedef struct {
    int kind;
    int nu, u[2];            /* units the step reads, as fsdp.c's step_units */
    int reduce;              /* unit whose gradient is complete after it, or -1 */
    double compute_s;
} pstep;

typedef struct {
    double bw, lat;          /* bytes/s, s per ring step */
} link_t;

typedef struct {
    const pstep *steps;
    int n, n_units, S, R, reshard;
    int64_t prefetch;
    const double *ag_s, *rs_s, *ar_s;       /* per unit */
    const double *ag_b, *rs_b, *ar_b;       /* per unit, bytes a rank sends */
    int *state;
    double *done;            /* when a gathering unit's all-gather ends */
    int in_flight;
    double ready;            /* where the compute stream stands */
    double chan[2];          /* when the shard / replicate channel is free */
    double ag, rs, ar;       /* bytes accumulated */
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

static int step_needs(const pstep *s, int u)
{
    for (int i = 0; i < s->nu; i++)
        if (s->u[i] == u)
            return 1;
    return 0;
}

/* ---- the engine's schedule, on a timeline ------------------------------ */

static void gather_start(sim *s, int u)
{
    if (s->state[u] != SHARDED)
        return;
    if (s->S == 1) {
        /* The shard is the unit: nothing crosses the wire. */
        s->state[u] = GATHERED;
        return;
    }
    double start = max2(s->ready, s->chan[0]);
    s->done[u] = start + s->ag_s[u];
    s->chan[0] = s->done[u];
    s->ag += s->ag_b[u];
    s->state[u] = GATHERING;
    s->in_flight++;
}

static void gather_wait(sim *s, int u)
{
    if (s->state[u] != GATHERING)
        return;
    s->ready = max2(s->ready, s->done[u]);
    s->state[u] = GATHERED;
    s->in_flight--;
}

static void prefetch_after(sim *s, int k)
{
    for (int j = k + 1; j < s->n && s->in_flight < s->prefetch; j++)
        for (int i = 0; i < s->steps[j].nu && s->in_flight < s->prefetch; i++)
            if (s->state[s->steps[j].u[i]] == SHARDED)
                gather_start(s, s->steps[j].u[i]);
}

static void release_after(sim *s, int k)
{
    const pstep *st = &s->steps[k];
    for (int i = 0; i < st->nu; i++) {
        int next = -1;
        for (int j = k + 1; j < s->n && next < 0; j++)
            if (step_needs(&s->steps[j], st->u[i]))
                next = j;
        if (next < 0 || (s->reshard && next != k + 1)) {
            gather_wait(s, st->u[i]);
            s->state[st->u[i]] = SHARDED;
        }
    }
}

/* A reduction in flight: which unit, and when its reduce-scatter ends. */
typedef struct {
    int unit;
    double rs_end;
} pending;

static void reduce_finish(sim *s, pending *p)
{
    if (p->unit < 0)
        return;
    s->ready = max2(s->ready, p->rs_end);
    if (s->R > 1) {
        /* Blocking in the engine: the next compute waits for it. */
        double start = max2(s->ready, s->chan[1]);
        s->chan[1] = start + s->ar_s[p->unit];
        s->ready = s->chan[1];
        s->ar += s->ar_b[p->unit];
    }
    p->unit = -1;
}

/* One micro-step from idle; returns its duration. */
static double micro_step(sim *s, int sync)
{
    for (int u = 0; u < s->n_units; u++)
        s->state[u] = SHARDED;
    s->in_flight = 0;
    s->ready = s->chan[0] = s->chan[1] = 0.0;
    pending pend = {-1, 0.0};
    const int comm = !(s->S == 1 && s->R == 1);
    for (int k = 0; k < s->n; k++) {
        const pstep *st = &s->steps[k];
        for (int i = 0; i < st->nu; i++) {
            gather_start(s, st->u[i]);
            gather_wait(s, st->u[i]);
        }
        prefetch_after(s, k);
        s->ready += st->compute_s;
        if (st->reduce >= 0 && sync && comm) {
            pending next = {st->reduce, s->ready};
            if (s->S > 1) {
                double start = max2(s->ready, s->chan[0]);
                next.rs_end = start + s->rs_s[st->reduce];
                s->chan[0] = next.rs_end;
                s->rs += s->rs_b[st->reduce];
            }
            reduce_finish(s, &pend);
            pend = next;
        }
        release_after(s, k);
    }
    reduce_finish(s, &pend);
    return max2(s->ready, max2(s->chan[0], s->chan[1]));
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
    return 0;
}

int st_project_step(const st_model *m, const st_config *cfg, const st_cluster *c,
                     st_projection *out, char *err, size_t errn)
{
    memset(out, 0, sizeof *out);
    if (err && errn)
        err[0] = '\0';
    int rc = check_cluster(c, err, errn);
    if (rc)
        return rc;
    const int G = c->gpus_per_node, world = c->nodes * G;
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

    /* The engine's own layout rules, with consecutive ranks per node. */
    int *node_of = malloc(sizeof(int) * (size_t)world);
    if (!node_of)
        return fail(err, errn, "out of memory for %d ranks", world);
    for (int r = 0; r < world; r++)
        node_of[r] = r / G;
    st_layout lay;
    rc = st_layout_compute(world, 0, node_of, par->strategy, par->shard_size, &lay, err, errn);
    free(node_of);
    if (rc)
        return rc;
    const int S = lay.shard_size, R = lay.replicate_size;
    const link_t intra = {c->intra_bw_gbs * 1e9, c->intra_lat_us * 1e-6};
    const link_t inter = {c->inter_bw_gbs * 1e9, c->inter_lat_us * 1e-6};
    const link_t *shard_link = spans_nodes(world, G, S, 0) ? &inter : &intra;
    const link_t *rep_link = spans_nodes(world, G, S, 1) ? &inter : &intra;

    const int nu = m->n_units, head = nu - 1;
    const double cbytes = tr->precision == ST_PREC_BF16 ? 2.0 : 4.0;
    const double rbytes = par->reduce_dtype == ST_PREC_BF16 ? 2.0 : 4.0;
    const double rate = c->tflops * 1e12, tokens = (double)(tr->micro_batch * m->T);

    /* Per unit: flops per token (the same terms as st_model_flops_per_token)
     * and collective costs; 8 doubles per unit in one block. */
    double *buf = calloc((size_t)nu * 8, sizeof(double));
    int *state = calloc((size_t)nu, sizeof(int));
    pstep *steps = calloc((size_t)(2 * m->L + 4), sizeof(pstep));
    if (!buf || !state || !steps) {
        free(buf);
        free(state);
        free(steps);
        return fail(err, errn, "out of memory for %d units", nu);
    }
    double *flops = buf, *ag_s = buf + nu, *rs_s = buf + 2 * nu, *ar_s = buf + 3 * nu;
    double *ag_b = buf + 4 * nu, *rs_b = buf + 5 * nu, *ar_b = buf + 6 * nu, *done = buf + 7 * nu;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        if (t->ndim == 2 && t->unit != 0)
            flops[t->unit] += 6.0 * (double)t->numel;
    }
    if (m->tied)
        flops[head] += 6.0 * (double)(m->V * m->C);
    double shard_elems = 0.0;
    for (int u = 0; u < nu; u++) {
        if (m->units[u].kind == ST_UNIT_BLOCK)
            flops[u] += 12.0 * (double)(m->C * m->T);
        int64_t padded = (m->units[u].numel + S - 1) / S * S;
        double shard = (double)(padded / S);
        shard_elems += shard;
        ag_s[u] = ring(S, (double)padded * cbytes, shard_link);
        rs_s[u] = ring(S, (double)padded * rbytes, shard_link);
        ar_s[u] = 2.0 * ring(R, shard * rbytes, rep_link);
        ag_b[u] = S > 1 ? (double)padded * cbytes * (S - 1) / S : 0.0;
        rs_b[u] = S > 1 ? (double)padded * rbytes * (S - 1) / S : 0.0;
        ar_b[u] = R > 1 ? 2.0 * shard * rbytes * (R - 1) / R : 0.0;
    }

    /* The step list of fsdp.c's build_steps, with each step's compute. */
    const int ckpt = tr->activation_checkpointing == ST_ACKPT_FULL;
    int n = 0;
    double micro_compute = 0.0;
    steps[n++] = (pstep){K_EMBED_FWD, 1, {0, 0}, -1, 0.0};
    for (int l = 0; l < m->L; l++)
        steps[n++] = (pstep){K_BLOCK_FWD, 1, {l + 1, 0}, -1, flops[l + 1] / 3.0 * tokens / rate};
    steps[n++] = (pstep){K_HEAD, m->tied ? 2 : 1, {head, 0}, head, flops[head] * tokens / rate};
    for (int l = (int)m->L - 1; l >= 0; l--)
        steps[n++] = (pstep){K_BLOCK_BWD, 1, {l + 1, 0}, l + 1,
                             flops[l + 1] * (ckpt ? 1.0 : 2.0 / 3.0) * tokens / rate};
    /* The embedding's backward reads no parameters; its gradient (with the
     * tied head's part) is complete only after it. */
    steps[n++] = (pstep){K_EMBED_BWD, 0, {0, 0}, 0, 0.0};
    for (int k = 0; k < n; k++)
        micro_compute += steps[k].compute_s;

    sim s = {steps, n, nu, S, R, par->strategy != ST_STRAT_SHARD_GRAD_OP, par->prefetch,
             ag_s, rs_s, ar_s, ag_b, rs_b, ar_b, state, done, 0, 0.0, {0.0, 0.0},
             0.0, 0.0, 0.0};
    const int accum = (int)(tr->global_batch / (tr->micro_batch * world));
    double t = 0.0;
    /* Micro-steps are identical but for the reduction, so one of each kind
     * is simulated and counted; the byte totals are scaled the same way. */
    double t_sync = micro_step(&s, 1);
    double ag1 = s.ag, rs1 = s.rs, ar1 = s.ar;
    double t_skip = t_sync, ag0 = ag1, rs0 = rs1, ar0 = ar1;
    if (par->no_sync && accum > 1) {
        s.ag = s.rs = s.ar = 0.0;
        t_skip = micro_step(&s, 0);
        ag0 = s.ag;
        rs0 = s.rs;
        ar0 = s.ar;
    }
    t = (accum - 1) * t_skip + t_sync;

    out->optimizer_s = OPT_BYTES_PER_ELEM * shard_elems / (c->hbm_bw_gbs * 1e9);
    out->compute_s = accum * micro_compute + out->optimizer_s;
    out->step_s = t + out->optimizer_s;
    out->exposed_comm_s = out->step_s - out->compute_s;
    if (out->exposed_comm_s < 0.0) /* rounding only */
        out->exposed_comm_s = 0.0;
    out->scaling_efficiency = out->compute_s / out->step_s;
    out->tokens_per_s_per_gpu =
        (double)tr->global_batch * (double)m->T / out->step_s / (double)world;
    out->ag_bytes = (accum - 1) * ag0 + ag1;
    out->rs_bytes = (accum - 1) * rs0 + rs1;
    out->ar_bytes = (accum - 1) * ar0 + ar1;
    out->shard_size = S;
    out->replicate_size = R;
    out->accum = accum;
    free(buf);
    free(state);
    free(steps);
    return 0;
}
