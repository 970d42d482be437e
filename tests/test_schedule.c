/* The engine, the memory estimator and the step-time projection must walk
 * one schedule: an estimate of a schedule the engine does not run is
 * wrong in a way no byte count reveals.  For each configuration this
 * program trains one step of a small model on the ranks it was launched
 * with, recording the schedule events the engine acted on (st_fsdp.trace),
 * and compares them with the events st_estimate_memory_traced and
 * st_project_step_traced walk for the same configuration, each reading
 * its own inputs (strategy, shard group size, prefetch, tying, no_sync and
 * the accumulation) as the estimate command does.
 *
 * Run by tests/schedule.sh as 1, 2 and 4 ranks (one node).  Rank 0 prints
 * one line per configuration, "same DESC" or "differ DESC: WHY", which the
 * script turns into TAP; the verdict is agreed over all ranks, each of
 * which compares its own trace. */
#include "base/log.h"
#include "comm/groups.h"
#include "config/config.h"
#include "engine/fsdp.h"
#include "engine/schedule.h"
#include "kernels/kernels.h"
#include "kernels/kernels_backends.h"
#include "model/model.h"
#include "plan/estimate.h"
#include "plan/projection.h"
#include "runtime/runtime.h"
#include "train/engine_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int strategy;
    int64_t prefetch;
    int tied, ckpt, bf16;
    int accum, no_sync;
} setup;

static void describe(const setup *s, int world, char *out, size_t n)
{
    snprintf(out, n, "%d rank(s) %s prefetch %lld %s%s%s accum %d%s", world,
             st_enum_name("parallel", "strategy", s->strategy), (long long)s->prefetch,
             s->tied ? "tied" : "untied", s->ckpt ? " ckpt" : "", s->bf16 ? " bf16" : "",
             s->accum, s->no_sync ? " no_sync" : "");
}

static void configure(st_config *cfg, const setup *s, int world)
{
    if (st_config_defaults(cfg) != 0)
        st_die(1, "st_config_defaults failed");
    cfg->model.n_layer = 3;
    cfg->model.n_head = 2;
    cfg->model.n_kv_head = 2;
    cfg->model.d_model = 16;
    cfg->model.d_ff = 32;
    cfg->model.vocab_size = 37;
    cfg->model.seq_len = 8;
    cfg->model.tie_embeddings = s->tied;
    cfg->train.micro_batch = 2;
    cfg->train.global_batch = 2 * (int64_t)world * s->accum;
    cfg->train.activation_checkpointing = s->ckpt ? ST_ACKPT_FULL : ST_ACKPT_NONE;
    cfg->train.precision = s->bf16 ? ST_PREC_BF16 : ST_PREC_FP32;
    cfg->parallel.strategy = s->strategy;
    cfg->parallel.shard_size = s->strategy == ST_STRAT_HYBRID_SHARD ? 2 : 0;
    cfg->parallel.prefetch = s->prefetch;
    cfg->parallel.no_sync = s->no_sync;
    cfg->parallel.backend = ST_BACKEND_MPI;
}

/* One optimizer step's micro-steps on the engine, traced. */
static int run_engine(const st_config *cfg, const st_model *m, st_groups *g, int accum,
                      st_sched_trace *trace)
{
    st_fsdp f;
    int rc = st_engine_open(&f, m, cfg, g, st_kernels_cpu());
    const int64_t n = cfg->train.micro_batch * m->T;
    int32_t *in = malloc(sizeof(int32_t) * (size_t)n), *tg = malloc(sizeof(int32_t) * (size_t)n);
    if (!in || !tg)
        st_die(1, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        in[i] = (int32_t)((7 * i + 3) % m->V);
        tg[i] = (int32_t)((5 * i + 1) % m->V);
    }
    f.trace = trace;
    st_fsdp_zero_grads(&f);
    for (int micro = 0; micro < accum && !rc; micro++) {
        double loss = 0.0;
        rc = st_fsdp_forward_backward(&f, in, tg, 1.0f / (float)n, micro == accum - 1, &loss);
    }
    st_fsdp_destroy(&f);
    free(in);
    free(tg);
    return rc;
}

/* The walk of trace t beginning with a BEGIN of flag sync: its first
 * event's index and length (0: none). */
static int find_walk(const st_sched_trace *t, int sync, int *len)
{
    for (int i = 0; i < t->n; i++) {
        if (t->ev[i].op != ST_SCHED_BEGIN || t->ev[i].arg != sync)
            continue;
        int j = i + 1;
        while (j < t->n && t->ev[j].op != ST_SCHED_BEGIN)
            j++;
        *len = j - i;
        return i;
    }
    *len = 0;
    return -1;
}

static void event_text(const st_sched_trace *t, int i, char *out, size_t n)
{
    if (i < 0 || i >= t->n)
        snprintf(out, n, "(end)");
    else
        snprintf(out, n, "%s %d", st_sched_op_name(t->ev[i].op), t->ev[i].arg);
}

/* Every micro-step the engine ran must be the reader's walk with the same
 * sync flag, and the reader must walk no other kind. */
static int same_walks(const st_sched_trace *eng, const st_sched_trace *rd, const char *who,
                      char *why, size_t n)
{
    int walks = 0;
    for (int i = 0; i < eng->n; i++) {
        if (eng->ev[i].op != ST_SCHED_BEGIN)
            continue;
        int len_e, len_r, j = i + 1;
        while (j < eng->n && eng->ev[j].op != ST_SCHED_BEGIN)
            j++;
        len_e = j - i;
        int r = find_walk(rd, eng->ev[i].arg, &len_r);
        if (r < 0) {
            snprintf(why, n, "%s walks no micro-step with sync %d", who, eng->ev[i].arg);
            return 0;
        }
        for (int k = 0; k < len_e || k < len_r; k++) {
            char a[64], b[64];
            event_text(eng, k < len_e ? i + k : -1, a, sizeof a);
            event_text(rd, k < len_r ? r + k : -1, b, sizeof b);
            if (strcmp(a, b) != 0) {
                snprintf(why, n, "micro-step %d, event %d: engine %s, %s %s", walks, k, a,
                         who, b);
                return 0;
            }
        }
        walks++;
    }
    for (int i = 0; i < rd->n; i++) {
        int len;
        if (rd->ev[i].op == ST_SCHED_BEGIN && find_walk(eng, rd->ev[i].arg, &len) < 0) {
            snprintf(why, n, "%s walks a micro-step with sync %d the engine never ran", who,
                     rd->ev[i].arg);
            return 0;
        }
    }
    if (walks == 0)
        snprintf(why, n, "the engine recorded no micro-step");
    return walks > 0;
}

/* Traces one setup on the engine, the estimator and the projection, and
 * compares them; returns 1 when all ranks found them the same. */
static int check_setup(const st_runtime *rt, const setup *s, char *why, size_t n)
{
    st_config cfg;
    configure(&cfg, s, rt->world);
    st_model m;
    st_groups g;
    memset(&g, 0, sizeof g);
    st_sched_trace eng = {0}, est = {0}, proj = {0};
    int rc = st_model_init(&m, &cfg.model);
    rc = rc ? rc : st_groups_create(&g, rt, &cfg, NULL);
    rc = rc ? rc : run_engine(&cfg, &m, &g, s->accum, &eng);
    int good = rc == 0;
    if (!good)
        snprintf(why, n, "the engine failed with status %d", rc);
    if (good) {
        st_mem_estimate e;
        int S = cfg.parallel.shard_size > 0 ? (int)cfg.parallel.shard_size : rt->world;
        st_estimate_memory_traced(&m, &cfg, s->strategy, rt->world, S, (int)
                                  cfg.train.activation_checkpointing, cfg.train.micro_batch,
                                  &e, &est);
        good = same_walks(&eng, &est, "the estimate", why, n);
    }
    if (good) {
        st_cluster c;
        st_cluster_defaults(&c);
        c.gpus_per_node = rt->world;
        c.tflops = 100.0;
        st_projection p;
        char err[256];
        if (st_project_step_traced(&m, &cfg, &c, &p, err, sizeof err, &proj) != 0) {
            snprintf(why, n, "the projection failed: %s", err);
            good = 0;
        } else {
            good = same_walks(&eng, &proj, "the projection", why, n);
        }
    }
    /* Worst verdict of all ranks; the reason printed is rank 0's. */
    int all_good = st_runtime_agree(good ? 0 : 1) == 0;
    if (!all_good && good)
        snprintf(why, n, "another rank's trace differs");
    st_groups_destroy(&g);
    st_sched_trace_free(&eng);
    st_sched_trace_free(&est);
    st_sched_trace_free(&proj);
    st_config_free(&cfg);
    return all_good;
}

int main(void)
{
    st_runtime rt;
    int rc = st_runtime_init(&rt, NULL, NULL);
    if (rc) {
        st_runtime_finalize();
        return rc;
    }
    static const int strategies[] = {ST_STRAT_FULL_SHARD, ST_STRAT_SHARD_GRAD_OP,
                                     ST_STRAT_HYBRID_SHARD, ST_STRAT_NO_SHARD};
    /* accum 1; accum 2 reducing every micro-step; accum 3 with no_sync. */
    static const int accums[][2] = {{1, 0}, {2, 0}, {3, 1}};
    int failed = 0, count = 0;
    for (int si = 0; si < 4; si++) {
        /* hybrid_shard needs shard groups of 2 that divide the world. */
        if (strategies[si] == ST_STRAT_HYBRID_SHARD && rt.world % 2)
            continue;
        for (int pf = 0; pf <= 3; pf++)
            for (int tied = 1; tied >= 0; tied--)
                for (int a = 0; a < 3; a++) {
                    setup s = {strategies[si], pf, tied, (pf + a) % 2, (pf + tied) % 2 == 0,
                               accums[a][0], accums[a][1]};
                    char desc[160], why[512] = "";
                    describe(&s, rt.world, desc, sizeof desc);
                    int same = check_setup(&rt, &s, why, sizeof why);
                    failed += !same;
                    count++;
                    if (rt.rank == 0) {
                        if (same)
                            printf("same %s\n", desc);
                        else
                            printf("differ %s: %s\n", desc, why);
                        fflush(stdout);
                    }
                }
    }
    if (rt.rank == 0)
        printf("checked %d configurations, %d differ\n", count, failed);
    st_runtime_finalize();
    return failed ? 1 : 0;
}
