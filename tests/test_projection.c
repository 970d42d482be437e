/* Unit test of the step-time projection (projection.c).  Its numbers go
 * into the README next to published throughputs, so each check compares it
 * with an expectation computed here from the written-down formulas (unit
 * sizes and FLOPs from the architecture by hand, closed-form schedules for
 * a tiny model), never with the projection's own intermediate values:
 *   1. infinite bandwidth, zero latency: the step is pure compute;
 *   2. no_shard on one GPU moves no bytes;
 *   3. a one-block toy gives the closed-form serial time with prefetch 0,
 *      the overlapped one with prefetch 1, and no_shard's all-reduces,
 *      each issued as its unit's backward ends (1 and 3 blocks);
 *   4. more bandwidth never slows a step; hybrid_shard beats full_shard
 *      across nodes when the network is slower than NVLink;
 *   5. the reported rates are consistent with the step time;
 *   6. bad inputs are refused with ST_EXIT_USAGE and a message.
 * The Llama 3 8B projections the README quotes are printed as diagnostics. */
#include "config/config.h"
#include "base/log.h"
#include "model/model.h"
#include "plan/projection.h"
#include "tap.h"

#include <math.h>
#include <string.h>

static int near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

static const char *strat_name(int s) { return st_enum_name("parallel", "strategy", s); }

static void set_shape(st_config *cfg, int arch, int64_t L, int64_t H, int64_t KV, int64_t C,
                      int64_t F, int64_t V, int64_t T, int tied)
{
    cfg->model.arch = arch;
    cfg->model.n_layer = L;
    cfg->model.n_head = H;
    cfg->model.n_kv_head = KV;
    cfg->model.d_model = C;
    cfg->model.d_ff = F;
    cfg->model.vocab_size = V;
    cfg->model.seq_len = T;
    cfg->model.tie_embeddings = tied;
}

static void gpt2_124m(st_config *cfg)
{
    set_shape(cfg, ST_ARCH_GPT2, 12, 12, 12, 768, 3072, 50257, 1024, 1);
}

static void llama_8b(st_config *cfg)
{
    set_shape(cfg, ST_ARCH_LLAMA, 32, 32, 8, 4096, 14336, 128256, 8192, 0);
}

/* Element counts by hand: [0] embedding, [1] one block, [2] head. */
static void unit_sizes(const st_config *cfg, double n[3])
{
    double C = (double)cfg->model.d_model, F = (double)cfg->model.d_ff;
    double V = (double)cfg->model.vocab_size, T = (double)cfg->model.seq_len;
    if (cfg->model.arch == ST_ARCH_GPT2) {
        n[0] = V * C + T * C;                       /* wte, wpe */
        n[1] = 2 * 2 * C                            /* ln_1, ln_2 weight + bias */
               + 3 * C * C + 3 * C + C * C + C      /* c_attn, attn c_proj */
               + C * F + F + F * C + C;             /* c_fc, mlp c_proj */
        n[2] = 2 * C;                               /* ln_f (lm_head tied) */
    } else {
        double kv = C / (double)cfg->model.n_head * (double)cfg->model.n_kv_head;
        n[0] = V * C;
        n[1] = 2 * C + 2 * C * C + 2 * C * kv + 3 * C * F;
        n[2] = C + V * C;
    }
}

/* The units as stored: the vocabulary rows of the token embedding and an
 * untied output weight padded to a multiple of model.vocab_padding
 * (zero rows the optimizer updates like any others). */
static void stored_unit_sizes(const st_config *cfg, double n[3])
{
    unit_sizes(cfg, n);
    const int64_t V = cfg->model.vocab_size, pad = cfg->model.vocab_padding;
    const double extra = (double)((V + pad - 1) / pad * pad - V) * (double)cfg->model.d_model;
    n[0] += extra;
    if (cfg->model.arch != ST_ARCH_GPT2)
        n[2] += extra;
}

/* Matrix parameters of one block and of the head, per the FLOPs convention. */
static void matrix_params(const st_config *cfg, double *block, double *head)
{
    double C = (double)cfg->model.d_model, F = (double)cfg->model.d_ff;
    double V = (double)cfg->model.vocab_size;
    if (cfg->model.arch == ST_ARCH_GPT2) {
        *block = 4 * C * C + 2 * C * F;
    } else {
        double kv = C / (double)cfg->model.n_head * (double)cfg->model.n_kv_head;
        *block = 2 * C * C + 2 * C * kv + 3 * C * F;
    }
    *head = V * C;
}

/* Compute seconds of one optimizer step, by hand. */
static double hand_compute(const st_config *cfg, int world, double tflops)
{
    double blk, head, L = (double)cfg->model.n_layer, C = (double)cfg->model.d_model;
    double T = (double)cfg->model.seq_len;
    matrix_params(cfg, &blk, &head);
    double per_token = 6 * (L * blk + head) + 12 * L * C * T;
    if (cfg->train.activation_checkpointing == ST_ACKPT_FULL)
        per_token += L * (2 * blk + 4 * C * T);
    return (double)cfg->train.global_batch / world * T * per_token / (tflops * 1e12);
}

static double pad(double n, int S) { return ceil(n / S) * S; }

static int project(const st_config *cfg, const st_cluster *c, st_projection *p)
{
    st_model m;
    if (st_model_init(&m, &cfg->model))
        st_die(1, "st_model_init failed");
    char err[512];
    int rc = st_project_step(&m, cfg, c, p, err, sizeof err);
    if (rc)
        tap_diag("st_project_step: %s", err);
    st_model_free(&m);
    return rc;
}

static void base_config(st_config *cfg, void (*shape)(st_config *), int world)
{
    if (st_config_defaults(cfg))
        st_die(1, "st_config_defaults failed");
    shape(cfg);
    cfg->train.micro_batch = 1;
    cfg->train.global_batch = world;
    cfg->train.precision = ST_PREC_BF16;
    cfg->parallel.reduce_dtype = ST_PREC_FP32;
    cfg->parallel.prefetch = 1;
}

static void ideal_cluster(st_cluster *c, int N, int G, double tflops)
{
    st_cluster_defaults(c);
    c->nodes = N;
    c->gpus_per_node = G;
    c->tflops = tflops;
    c->intra_bw_gbs = c->inter_bw_gbs = c->hbm_bw_gbs = INFINITY;
    c->intra_lat_us = c->inter_lat_us = 0.0;
}

/* 1 and 2, and the FLOPs convention behind every other check. */
static void check_pure_compute(void)
{
    st_config cfg;
    base_config(&cfg, gpt2_124m, 16);
    st_model m;
    st_model_init(&m, &cfg.model);
    double sz[3], blk, head;
    unit_sizes(&cfg, sz);
    matrix_params(&cfg, &blk, &head);
    tap_ok(m.units[0].numel == (int64_t)sz[0] && m.units[1].numel == (int64_t)sz[1] &&
               m.units[m.n_units - 1].numel == (int64_t)sz[2],
           "gpt2-124m unit sizes match the hand count (%.0f, %.0f, %.0f)", sz[0], sz[1], sz[2]);
    double st[3];
    stored_unit_sizes(&cfg, st);
    tap_ok(cfg.model.vocab_padding == 128 && st[0] == (50304.0 + 1024.0) * 768.0 &&
               st_model_train_padded(&m, 0, 1) == (int64_t)st[0] &&
               st_model_train_padded(&m, 1, 1) == (int64_t)sz[1] &&
               st_model_train_padded(&m, m.n_units - 1, 1) == (int64_t)sz[2],
           "gpt2-124m stored units: the embedding's 50257 vocabulary rows padded to 50304 "
           "(%.0f elements), the others as counted",
           st[0]);
    tap_ok(near(st_model_flops_per_token(&m), 6 * (12 * blk + head) + 12 * 12 * 768 * 1024.0,
                1e-12),
           "flops per token is 6 x matrix params + 12 L C T");
    st_model_free(&m);
    st_config_free(&cfg);

    int strategies[] = {ST_STRAT_FULL_SHARD, ST_STRAT_HYBRID_SHARD, ST_STRAT_SHARD_GRAD_OP,
                        ST_STRAT_NO_SHARD};
    for (int si = 0; si < 4; si++)
        for (int pf = 0; pf <= 2; pf++)
            for (int ck = 0; ck <= 1; ck++) {
                base_config(&cfg, gpt2_124m, 16 * 4);
                cfg.parallel.strategy = strategies[si];
                cfg.parallel.prefetch = pf;
                cfg.train.activation_checkpointing = ck ? ST_ACKPT_FULL : ST_ACKPT_NONE;
                st_cluster c;
                ideal_cluster(&c, 2, 8, 123.0);
                st_projection p;
                int rc = project(&cfg, &c, &p);
                double want = hand_compute(&cfg, 16, 123.0);
                tap_ok(!rc && near(p.compute_s, want, 1e-12) && near(p.step_s, want, 1e-12) &&
                           p.scaling_efficiency == 1.0 && p.exposed_comm_s == 0.0 &&
                           p.accum == 4,
                       "ideal network, gpt2-124m 2x8 %s prefetch %d ckpt %d: step %.6g s = "
                       "compute %.6g s, efficiency %.3f",
                       strat_name(strategies[si]), pf, ck, p.step_s, want, p.scaling_efficiency);
                st_config_free(&cfg);
            }

    /* One GPU, no_shard, a slow network and no optimizer term: nothing to
     * communicate, so the step is its compute. */
    base_config(&cfg, gpt2_124m, 2);
    cfg.parallel.strategy = ST_STRAT_NO_SHARD;
    st_cluster c;
    st_cluster_defaults(&c);
    c.nodes = c.gpus_per_node = 1;
    c.tflops = 50.0;
    c.intra_bw_gbs = c.inter_bw_gbs = 1e-3;
    c.hbm_bw_gbs = INFINITY;
    st_projection p;
    int rc = project(&cfg, &c, &p);
    double want = hand_compute(&cfg, 1, 50.0);
    tap_ok(!rc && p.ag_bytes == 0.0 && p.rs_bytes == 0.0 && p.ar_bytes == 0.0 &&
               near(p.step_s, want, 1e-12) && p.shard_size == 1 && p.replicate_size == 1,
           "no_shard on 1 GPU: no bytes moved, step %.6g s = compute %.6g s", p.step_s, want);

    /* The optimizer update: 28 bytes per stored element of the rank's
     * shards. */
    c.hbm_bw_gbs = 2000.0;
    rc = project(&cfg, &c, &p);
    double sz1[3];
    stored_unit_sizes(&cfg, sz1);
    double elems = sz1[0] + 12 * sz1[1] + sz1[2];
    tap_ok(!rc && near(p.optimizer_s, 28 * elems / 2e12, 1e-12) &&
               near(p.step_s, want + p.optimizer_s, 1e-12),
           "optimizer update = 28 B x %.0f elements / 2 TB/s = %.3g s", elems, p.optimizer_s);
    st_config_free(&cfg);
}

/* A one-block Llama on 2 GPUs of one node: embedding E, block B, head H
 * (untied).  Gathers a_u, reduce-scatters r_u, compute c_f, c_h, c_b. */
static void toy_config(st_config *cfg)
{
    if (st_config_defaults(cfg))
        st_die(1, "st_config_defaults failed");
    set_shape(cfg, ST_ARCH_LLAMA, 1, 4, 2, 64, 128, 256, 16, 0);
    cfg->train.micro_batch = 1;
    cfg->train.global_batch = 2;
    cfg->train.precision = ST_PREC_BF16;
    cfg->parallel.reduce_dtype = ST_PREC_FP32;
    cfg->parallel.strategy = ST_STRAT_FULL_SHARD;
}

static void check_toy(void)
{
    const double X = 1e-3;   /* the block's all-gather, seconds */
    const double CF = 2.5e-3; /* the block's forward, seconds */
    st_config cfg;
    toy_config(&cfg);
    double sz[3], blk, head;
    stored_unit_sizes(&cfg, sz);
    matrix_params(&cfg, &blk, &head);
    const double T = 16, C = 64;
    /* bf16 gathers over S = 2 send half the unit: a_B = 2 sz[1] / 2 / bw. */
    const double bw = sz[1] / X;
    const double fb = 6 * blk + 12 * C * T;  /* block FLOPs per token */
    const double tflops = fb / 3 * T / CF / 1e12;
    double a[3], r[3];
    for (int u = 0; u < 3; u++) {
        a[u] = pad(sz[u], 2) * 2 / 2 / bw;
        r[u] = pad(sz[u], 2) * 4 / 2 / bw;
    }
    const double cf = CF, cb = 2 * CF, ch = 6 * head * T / (tflops * 1e12);

    st_cluster c;
    st_cluster_defaults(&c);
    c.nodes = 1;
    c.gpus_per_node = 2;
    c.tflops = tflops;
    c.intra_bw_gbs = bw / 1e9;
    c.intra_lat_us = 0.0;
    c.hbm_bw_gbs = INFINITY;
    st_projection p;

    cfg.parallel.prefetch = 0;
    int rc = project(&cfg, &c, &p);
    double serial = a[0] + a[1] + cf + a[2] + ch + r[2] + a[1] + cb + r[1] + r[0];
    tap_ok(!rc && near(p.step_s, serial, 1e-12) && near(a[1], X, 1e-12),
           "toy full_shard prefetch 0: step %.6g s = serial sum %.6g s (block gather %.3g s)",
           p.step_s, serial, a[1]);
    tap_ok(near(p.ag_bytes, (sz[0] + 2 * sz[1] + sz[2]) * 2 / 2, 1e-12) &&
               near(p.rs_bytes, (sz[0] + sz[1] + sz[2]) * 4 / 2, 1e-12) && p.ar_bytes == 0,
           "toy bytes: ag %.0f, rs %.0f", p.ag_bytes, p.rs_bytes);

    cfg.parallel.prefetch = 1;
    rc = project(&cfg, &c, &p);
    double overlap = a[0] + a[1] + fmax(cf, a[2]) + fmax(ch, a[1]) + fmax(cb, r[2]) + r[1] +
                     r[0];
    tap_ok(!rc && near(p.step_s, overlap, 1e-12) && p.step_s < serial,
           "toy full_shard prefetch 1: step %.6g s = overlapped %.6g s (< serial %.6g)",
           p.step_s, overlap, serial);

    /* The same with a quarter of the GPU held by each running collective:
     * a compute step c that starts with a collective d ends with it when
     * d (1 - f) >= c, else at c + f d.  At this bandwidth every collective
     * is the shorter: the head's gather beside the block's forward, the
     * block's gather beside the head and the head's reduce-scatter beside
     * the block's backward each stretch their compute by f d.  At a fifth
     * of it the block's gather (d = 5 ms) outlasts the stretched head. */
    const double f = 0.25;
    c.comm_sm_share = f;
#define BESIDE(cc, d) ((d) * (1 - f) < (cc) ? (cc) + f * (d) : (d))
    for (int slow = 1; slow <= 5; slow += 4) {
        c.intra_bw_gbs = bw / slow / 1e9;
        rc = project(&cfg, &c, &p);
        const double k = slow;
        double shared = k * (a[0] + a[1]) + BESIDE(cf, k * a[2]) + BESIDE(ch, k * a[1]) +
                        BESIDE(cb, k * r[2]) + k * (r[1] + r[0]);
        const int head_hidden = k * a[1] * (1 - f) >= ch;
        tap_ok(!rc && near(p.step_s, shared, 1e-12) && k * a[2] * (1 - f) < cf &&
                   head_hidden == (slow == 5) && k * r[2] * (1 - f) < cb,
               "toy full_shard prefetch 1 at 1/%d the bandwidth, comm_sm_share %.2f: step "
               "%.6g s = %.6g s (the head %s)", slow, f, p.step_s, shared,
               head_hidden ? "hidden behind the block's gather" : "stretched");
    }
#undef BESIDE
    c.intra_bw_gbs = bw / 1e9;
    c.comm_sm_share = 0.0;

    /* shard_grad_op keeps the block from forward to backward: with no
     * gather queued behind the head's reduce-scatter, the block's backward
     * starts at once and overlaps it, even without prefetch. */
    cfg.parallel.strategy = ST_STRAT_SHARD_GRAD_OP;
    cfg.parallel.prefetch = 0;
    rc = project(&cfg, &c, &p);
    double kept = a[0] + a[1] + cf + a[2] + ch + fmax(cb, r[2]) + r[1] + r[0];
    tap_ok(!rc && near(p.step_s, kept, 1e-12) &&
               near(p.ag_bytes, sz[0] + sz[1] + sz[2], 1e-12),
           "toy shard_grad_op prefetch 0: no backward gather, step %.6g s = %.6g s", p.step_s,
           kept);

    /* no_shard over 2 nodes: with no reduce-scatter to wait for, the
     * engine issues a unit's all-reduce as soon as its backward ends and
     * waits for it after the next unit's backward (fsdp.c's reduce_start).
     * One block: the head's all-reduce runs while the block's backward
     * computes (it is far shorter here); the block's and the embedding's
     * come after the last compute, so those two are exposed. */
    cfg.parallel.strategy = ST_STRAT_NO_SHARD;
    cfg.parallel.prefetch = 1;
    c.nodes = 2;
    c.gpus_per_node = 1;
    c.inter_bw_gbs = 7.0;
    c.inter_lat_us = 3.0;
    rc = project(&cfg, &c, &p);
    double ar[3];
    for (int u = 0; u < 3; u++)
        ar[u] = 2 * (3e-6 + sz[u] * 4 / 2 / 7e9);
    double ddp = cf + ch + cb + ar[1] + ar[0];
    tap_ok(!rc && ar[2] < cb && near(p.step_s, ddp, 1e-12) && p.replicate_size == 2,
           "toy no_shard 2x1: step %.6g s = compute + the block's and the embedding's "
           "all-reduces %.6g s (the head's, %.3g s, behind the block's backward)", p.step_s,
           ddp, ar[2]);

    /* Three blocks: the head's all-reduce runs behind block 2's backward,
     * block 2's behind block 1's and block 1's behind block 0's; only
     * block 0's and the embedding's are exposed: compute + ar_B + ar_E
     * (the engine that issued each a unit later exposed 2 ar_B + ar_E). */
    cfg.model.n_layer = 3;
    rc = project(&cfg, &c, &p);
    double ddp3 = 3 * cf + ch + 3 * cb + ar[1] + ar[0];
    tap_ok(!rc && ar[1] < cb && ar[2] < cb && near(p.step_s, ddp3, 1e-12),
           "toy no_shard 2x1, 3 blocks: step %.6g s = compute + block 0's and the "
           "embedding's all-reduces %.6g s (%.3g s hidden behind backward)", p.step_s, ddp3,
           ar[2] + 2 * ar[1]);
    /* With comm_sm_share f each of the three hidden all-reduces stretches
     * the backward it runs beside by f times its length. */
    c.comm_sm_share = f;
    rc = project(&cfg, &c, &p);
    double ddp3_f = ddp3 + f * (ar[2] + 2 * ar[1]);
    tap_ok(!rc && ar[1] * (1 - f) < cb && near(p.step_s, ddp3_f, 1e-12),
           "toy no_shard 2x1, 3 blocks, comm_sm_share %.2f: step %.6g s = %.6g s + %.2f x "
           "the hidden all-reduces", f, p.step_s, ddp3, f);
    st_config_free(&cfg);
}

static double step_of(int strategy, int N, int G, double intra, double inter)
{
    st_config cfg;
    base_config(&cfg, llama_8b, N * G);
    cfg.parallel.strategy = strategy;
    st_cluster c;
    st_cluster_defaults(&c);
    c.nodes = N;
    c.gpus_per_node = G;
    c.tflops = 400.0;
    c.intra_bw_gbs = intra;
    c.inter_bw_gbs = inter;
    st_projection p;
    int rc = project(&cfg, &c, &p);
    st_config_free(&cfg);
    return rc ? NAN : p.step_s;
}

static void check_monotonic(void)
{
    const double scale[] = {0.1, 0.25, 0.5, 1, 2, 4, 1e6};
    int strategies[] = {ST_STRAT_FULL_SHARD, ST_STRAT_HYBRID_SHARD, ST_STRAT_SHARD_GRAD_OP,
                        ST_STRAT_NO_SHARD};
    const int nodes[] = {1, 2, 4};
    for (int si = 0; si < 4; si++)
        for (int ni = 0; ni < 3; ni++)
            for (int which = 0; which < 2; which++) {
                int ok = 1;
                double prev = INFINITY, first = 0;
                for (int k = 0; k < 7; k++) {
                    double intra = which ? 360.0 : 360.0 * scale[k];
                    double t = step_of(strategies[si], nodes[ni], 8, intra, 40.0 * scale[k]);
                    ok = ok && t <= prev * (1 + 1e-12);
                    prev = t;
                    if (k == 0)
                        first = t;
                }
                tap_ok(ok, "llama-8b %s %dx8: step never grows with %s bandwidth "
                       "(%.3f s -> %.3f s)", strat_name(strategies[si]), nodes[ni],
                       which ? "inter-node" : "all", first, prev);
            }
    for (int N = 2; N <= 16; N *= 2) {
        double fs = step_of(ST_STRAT_FULL_SHARD, N, 8, 360.0, 40.0);
        double hs = step_of(ST_STRAT_HYBRID_SHARD, N, 8, 360.0, 40.0);
        tap_ok(hs <= fs, "llama-8b %dx8: hybrid_shard %.3f s <= full_shard %.3f s", N, hs, fs);
    }
}

static void check_rates(void)
{
    st_config cfg;
    base_config(&cfg, llama_8b, 16 * 3);
    cfg.parallel.strategy = ST_STRAT_HYBRID_SHARD;
    st_cluster c;
    st_cluster_defaults(&c);
    c.nodes = 2;
    c.tflops = 400.0;
    st_projection p;
    int rc = project(&cfg, &c, &p);
    double sz[3];
    unit_sizes(&cfg, sz);
    double elems = ceil(sz[0] / 8) + 32 * ceil(sz[1] / 8) + ceil(sz[2] / 8);
    double compute = hand_compute(&cfg, 16, 400.0) + 28 * elems / 2e12;
    tap_ok(!rc && p.accum == 3 && near(p.compute_s, compute, 1e-12),
           "llama-8b 2x8 hybrid: compute %.4f s = hand count (3 micro-steps + optimizer)",
           p.compute_s);
    tap_ok(near(p.tokens_per_s_per_gpu, 48.0 * 8192 / p.step_s / 16, 1e-12) &&
               near(p.scaling_efficiency, p.compute_s / p.step_s, 1e-12) &&
               near(p.exposed_comm_s, p.step_s - p.compute_s, 1e-12) &&
               p.step_s >= p.compute_s,
           "llama-8b 2x8 hybrid: %.1f tokens/s/GPU = global_batch x T / step / ranks, "
           "efficiency %.3f", p.tokens_per_s_per_gpu, p.scaling_efficiency);
    /* Hybrid over 2 nodes: S = 8 on NVLink, R = 2 over the network. */
    double ag = 0, rs = 0, ar = 0;
    for (int u = 0; u < 3; u++) {
        double k = u == 1 ? 32 : 1, P = pad(sz[u], 8);
        ag += k * (u == 1 ? 2 : 1) * P * 2 * 7 / 8;
        rs += k * P * 4 * 7 / 8;
        ar += k * 2 * (P / 8) * 4 / 2;
    }
    tap_ok(p.shard_size == 8 && p.replicate_size == 2 && near(p.ag_bytes, 3 * ag, 1e-12) &&
               near(p.rs_bytes, 3 * rs, 1e-12) && near(p.ar_bytes, 3 * ar, 1e-12),
           "llama-8b 2x8 hybrid bytes per rank: ag %.3g, rs %.3g, ar %.3g", p.ag_bytes,
           p.rs_bytes, p.ar_bytes);

    /* no_sync: gathers every micro-step, reductions only in the last. */
    st_projection q;
    cfg.parallel.no_sync = 1;
    rc = project(&cfg, &c, &q);
    tap_ok(!rc && near(q.ag_bytes, p.ag_bytes, 1e-12) && near(q.rs_bytes, p.rs_bytes / 3, 1e-12) &&
               near(q.ar_bytes, p.ar_bytes / 3, 1e-12) && q.step_s <= p.step_s,
           "no_sync reduces once per step: rs %.3g of %.3g, step %.3f <= %.3f s", q.rs_bytes,
           p.rs_bytes, q.step_s, p.step_s);
    st_config_free(&cfg);
}

static void check_bad(const char *what, st_config *cfg, const st_cluster *c)
{
    st_model m;
    if (st_model_init(&m, &cfg->model))
        st_die(1, "st_model_init failed");
    st_projection p;
    char err[512] = "";
    int rc = st_project_step(&m, cfg, c, &p, err, sizeof err);
    tap_ok(rc == ST_EXIT_USAGE && err[0] && strstr(err, "hint"), "%s: refused (%s)", what, err);
    st_model_free(&m);
}

static void check_bad_inputs(void)
{
    st_config cfg;
    base_config(&cfg, gpt2_124m, 8);
    st_cluster c, good;
    st_cluster_defaults(&good);
    good.tflops = 100.0;

    c = good;
    c.tflops = 0.0;
    check_bad("tflops 0 (the default)", &cfg, &c);
    c.tflops = NAN;
    check_bad("tflops NaN", &cfg, &c);
    c = good;
    c.nodes = 0;
    check_bad("0 nodes", &cfg, &c);
    c = good;
    c.inter_bw_gbs = 0.0;
    check_bad("inter bandwidth 0", &cfg, &c);
    c = good;
    c.intra_lat_us = -1.0;
    check_bad("negative latency", &cfg, &c);
    c = good;
    c.comm_sm_share = -0.1;
    check_bad("comm_sm_share -0.1", &cfg, &c);
    c.comm_sm_share = 1.0;
    check_bad("comm_sm_share 1 (compute would never run beside a collective)", &cfg, &c);
    c.comm_sm_share = NAN;
    check_bad("comm_sm_share NaN", &cfg, &c);
    c = good;
    cfg.train.global_batch = 12;
    check_bad("global_batch 12 on 8 ranks", &cfg, &c);
    cfg.train.global_batch = 8;
    cfg.parallel.strategy = ST_STRAT_HYBRID_SHARD;
    cfg.parallel.shard_size = 3;
    check_bad("hybrid shard_size 3 on 8 ranks", &cfg, &c);
    cfg.parallel.shard_size = 0;
    st_projection p;
    tap_ok(project(&cfg, &c, &p) == 0, "the same config with a good cluster projects");
    st_config_free(&cfg);
}

/* The numbers for the README: Llama 3 8B, bf16 compute, fp32 reductions
 * (both as torchtitan's defaults), prefetch 1, one 8192-token sequence per
 * GPU per step, 400 TFLOP/s achieved, default H100 cluster. */
static void print_llama(void)
{
    const int nodes[] = {1, 8, 16};
    tap_diag("llama-8b, seq 8192, micro_batch 1, global_batch = ranks, bf16, reduce fp32, "
             "prefetch 1, 400 TFLOP/s, NVLink 360 GB/s, IB 40 GB/s per GPU");
    tap_diag("%-8s %-13s %-5s %9s %9s %9s %8s %12s", "ranks", "strategy", "ckpt", "step s",
             "compute", "exposed", "eff", "tok/s/GPU");
    for (int ck = 0; ck <= 1; ck++)
        for (int ni = 0; ni < 3; ni++)
            for (int s = 0; s < 2; s++) {
                int strat = s ? ST_STRAT_HYBRID_SHARD : ST_STRAT_FULL_SHARD;
                st_config cfg;
                base_config(&cfg, llama_8b, nodes[ni] * 8);
                cfg.parallel.strategy = strat;
                cfg.train.activation_checkpointing = ck ? ST_ACKPT_FULL : ST_ACKPT_NONE;
                st_cluster c;
                st_cluster_defaults(&c);
                c.nodes = nodes[ni];
                c.tflops = 400.0;
                st_projection p;
                if (project(&cfg, &c, &p) == 0)
                    tap_diag("%2dx8     %-13s %-5s %9.4f %9.4f %9.4f %8.3f %12.0f", nodes[ni],
                             strat_name(strat), ck ? "full" : "none", p.step_s, p.compute_s,
                             p.exposed_comm_s, p.scaling_efficiency, p.tokens_per_s_per_gpu);
                st_config_free(&cfg);
            }
    /* The ring-over-the-slowest-link rule charges a multi-node ring one
     * NIC; NCCL runs several rings (channels) that leave a node through
     * different NICs, so a ring of whole nodes sees up to G x the per-GPU
     * NIC bandwidth.  For comparison, full_shard with that bus bandwidth. */
    for (int ni = 1; ni < 3; ni++) {
        st_config cfg;
        base_config(&cfg, llama_8b, nodes[ni] * 8);
        st_cluster c;
        st_cluster_defaults(&c);
        c.nodes = nodes[ni];
        c.tflops = 400.0;
        c.inter_bw_gbs = 8 * 40.0;
        st_projection p;
        if (project(&cfg, &c, &p) == 0)
            tap_diag("%2dx8     %-13s %-5s %9.4f %9.4f %9.4f %8.3f %12.0f  (inter 320 GB/s: "
                     "8 rails)", nodes[ni], "full_shard", "none", p.step_s, p.compute_s,
                     p.exposed_comm_s, p.scaling_efficiency, p.tokens_per_s_per_gpu);
        st_config_free(&cfg);
    }
}

int main(void)
{
    check_pure_compute();
    check_toy();
    check_monotonic();
    check_rates();
    check_bad_inputs();
    print_llama();
    return tap_done();
}
