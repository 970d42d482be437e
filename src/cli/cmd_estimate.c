/* `shardtrain estimate`: the memory table per strategy (DeepSpeed's
 * estimate_zero3_model_states_mem_needs_all_live is the model for its
 * shape), the largest micro-batch that fits a device, and with --time the
 * projected step time from projection.c.  Needs no MPI and no data: it
 * reads only the configuration. */
#include "cli/commands.h"
#include "cli/args.h"
#include "plan/estimate.h"
#include "base/log.h"
#include "model/model.h"
#include "plan/projection.h"
#include "config/origin.h"
#include "train/preflight.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int strategies[4] = {ST_STRAT_NO_SHARD, ST_STRAT_SHARD_GRAD_OP,
                                  ST_STRAT_FULL_SHARD, ST_STRAT_HYBRID_SHARD};

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

typedef struct {
    double nodes, tasks, device_gib;
    int json, time;
    st_cluster cluster;
} options;

/* Every value is checked as it is read, in command-line order; all share
 * the two messages. */
#define NUMBER_OPTION(opt, field, low, high)                                            \
    {.name = opt, .kind = ST_ARG_NUMBER, .offset = offsetof(options, field), .lo = low,   \
     .hi = high, .bad = "'%s' is not a valid number here"}
#define WHOLE_OPTION(opt, field, low, high)                                             \
    {.name = opt, .kind = ST_ARG_NUMBER, .offset = offsetof(options, field), .lo = low,   \
     .hi = high, .bad = "'%s' is not a valid number here",                                \
     .not_whole = "'%s' is not a whole number"}

static const st_arg_option estimate_options[] = {
    {.name = "--json", .kind = ST_ARG_FLAG, .offset = offsetof(options, json)},
    {.name = "--time", .kind = ST_ARG_FLAG, .offset = offsetof(options, time)},
    WHOLE_OPTION("--nodes", nodes, 1, 1e6),
    WHOLE_OPTION("--tasks-per-node", tasks, 1, 1e4),
    NUMBER_OPTION("--device-mem", device_gib, 1e-6, 1e12),
    NUMBER_OPTION("--tflops", cluster.tflops, 1e-6, 1e12),
    NUMBER_OPTION("--intra-bw", cluster.intra_bw_gbs, 1e-6, 1e12),
    NUMBER_OPTION("--inter-bw", cluster.inter_bw_gbs, 1e-6, 1e12),
    NUMBER_OPTION("--intra-lat", cluster.intra_lat_us, 0, 1e12),
    NUMBER_OPTION("--inter-lat", cluster.inter_lat_us, 0, 1e12),
    NUMBER_OPTION("--comm-sm-share", cluster.comm_sm_share, 0, 0.99),
};

/* CONFIG is counted here rather than by st_args_parse: estimate has always
 * reported it missing at the last argument, not one past it. */
static const st_args_spec estimate_spec = {
    .overrides = 1,
    ST_ARGS_OPTIONS(estimate_options),
    .positionals = {"CONFIG"},
    .n_positionals = 1,
};

static int hybrid_S(const st_config *cfg, const options *o)
{
    return cfg->parallel.shard_size > 0 ? (int)cfg->parallel.shard_size : (int)o->tasks;
}

static void print_table(const st_model *m, const st_config *cfg, const options *o)
{
    const int world = (int)(o->nodes * o->tasks);
    printf("Memory per rank: %s, %.1fM parameters, %g node(s) x %g task(s) = %d ranks, "
           "micro_batch %lld, seq_len %lld, %s compute, prefetch %lld\n",
           cfg->model.arch == ST_ARCH_GPT2 ? "gpt2" : "llama", (double)m->n_params / 1e6,
           o->nodes, o->tasks, world, (long long)cfg->train.micro_batch,
           (long long)m->T, cfg->train.precision == ST_PREC_BF16 ? "bf16" : "fp32",
           (long long)cfg->parallel.prefetch);
    printf("%-14s %-8s %10s %10s %10s %10s %10s %11s %10s", "strategy", "act_ckpt", "params",
           "grads", "optim", "gathered", "grad_buf", "activations", "peak");
    if (o->device_gib > 0)
        printf("  max_micro_batch(%g GiB)", o->device_gib);
    printf("\n");
    for (int i = 0; i < 4; i++)
        for (int ck = 0; ck < 2; ck++) {
            st_mem_estimate e;
            st_estimate_memory(m, cfg, strategies[i], world, hybrid_S(cfg, o), ck,
                               cfg->train.micro_batch, &e);
            printf("%-14s %-8s %9.3fG %9.3fG %9.3fG %9.3fG %9.3fG %10.3fG %9.3fG",
                   st_enum_name("parallel", "strategy", strategies[i]), ck ? "full" : "none",
                   gib(e.params), gib(e.grads), gib(e.optim), gib(e.gathered),
                   gib(e.grad_buffers), gib(e.activations), gib(e.peak));
            if (o->device_gib > 0)
                printf("  %lld", (long long)st_estimate_max_micro_batch(
                                     m, cfg, strategies[i], world, hybrid_S(cfg, o), ck,
                                     o->device_gib * 1024.0 * 1024.0 * 1024.0));
            printf("\n");
        }
    printf("(G = GiB.  params, grads, optim: this rank's fp32 shards%s.  gathered: units "
           "gathered and in flight at the peak; grad_buf: full-size gradient buffers then.)\n",
           m->lora.rank ? " of the LoRA adapters, params also the frozen base in the compute "
                          "dtype" : "");
}

static json_t *json_estimate(const st_model *m, const st_config *cfg, const options *o,
                             int strategy, int ck)
{
    const int world = (int)(o->nodes * o->tasks);
    st_mem_estimate e;
    st_estimate_memory(m, cfg, strategy, world, hybrid_S(cfg, o), ck, cfg->train.micro_batch, &e);
    json_t *j = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "params", e.params, "grads",
                          e.grads, "optim", e.optim, "gathered", e.gathered, "grad_buffers",
                          e.grad_buffers, "activations", e.activations, "other", e.other,
                          "peak", e.peak);
    if (o->device_gib > 0)
        json_object_set_new(j, "max_micro_batch",
                            json_integer((json_int_t)st_estimate_max_micro_batch(
                                m, cfg, strategy, world, hybrid_S(cfg, o), ck,
                                o->device_gib * 1024.0 * 1024.0 * 1024.0)));
    return j;
}

static int print_time(const st_model *m, const st_config *cfg, const options *o, json_t *js)
{
    if (!js)
        printf("\nProjected step time: %g node(s) x %g GPU(s), %.0f TFLOP/s per GPU, "
               "intra %.0f GB/s + %.1f us, inter %.0f GB/s + %.1f us, compute at %.0f%% "
               "beside a collective\n",
               o->nodes, o->tasks, o->cluster.tflops, o->cluster.intra_bw_gbs,
               o->cluster.intra_lat_us, o->cluster.inter_bw_gbs, o->cluster.inter_lat_us,
               100.0 * (1.0 - o->cluster.comm_sm_share));
    if (!js)
        printf("%-14s %10s %10s %12s %14s %10s\n", "strategy", "step_s", "compute_s",
               "exposed_s", "tokens/s/gpu", "efficiency");
    for (int i = 0; i < 4; i++) {
        st_config c = *cfg;
        c.parallel.strategy = strategies[i];
        if (strategies[i] == ST_STRAT_HYBRID_SHARD)
            c.parallel.shard_size = hybrid_S(cfg, o);
        st_projection p;
        char err[512];
        if (st_project_step(m, &c, &o->cluster, &p, err, sizeof err)) {
            st_error(NULL, "%s", err);
            return ST_EXIT_USAGE;
        }
        const char *name = st_enum_name("parallel", "strategy", strategies[i]);
        if (js) {
            json_t *t = json_pack("{s:f,s:f,s:f,s:f,s:f}", "step_s", p.step_s, "compute_s",
                                  p.compute_s, "exposed_comm_s", p.exposed_comm_s,
                                  "tokens_per_s_per_gpu", p.tokens_per_s_per_gpu,
                                  "scaling_efficiency", p.scaling_efficiency);
            json_object_set_new(json_object_get(js, name), "time", t);
        } else {
            printf("%-14s %10.4f %10.4f %12.4f %14.0f %9.1f%%\n", name, p.step_s,
                   p.compute_s, p.exposed_comm_s, p.tokens_per_s_per_gpu,
                   100.0 * p.scaling_efficiency);
        }
    }
    return 0;
}

/* The estimate of configuration cfg, as a table or as JSON. */
static int report(const st_config *cfg, options *o)
{
    const int world = (int)(o->nodes * o->tasks);
    o->cluster.nodes = (int)o->nodes;
    o->cluster.gpus_per_node = (int)o->tasks;
    /* The configuration's own problems at the ranks assumed, at the line
     * that set the key, and before any of the table is printed. */
    if (cfg->parallel.shard_size > 0 && world % cfg->parallel.shard_size)
        return st_config_error(cfg, "parallel", "shard_size", "parallel.shard_size %lld does "
                               "not divide %d ranks; hint: change --nodes/--tasks-per-node "
                               "or shard_size", (long long)cfg->parallel.shard_size, world);
    /* Only the projection divides the global batch among the ranks. */
    int rc = o->time ? st_preflight_batch(cfg, world) : 0;
    if (rc)
        return rc;
    st_model m;
    rc = st_model_init(&m, &cfg->model);
    rc = rc ? rc : st_model_add_lora(&m, &cfg->lora);
    if (rc)
        return rc;
    if (o->json) {
        json_t *js = json_object();
        for (int i = 0; i < 4; i++) {
            json_t *s = json_object();
            json_object_set_new(s, "none", json_estimate(&m, cfg, o, strategies[i], 0));
            json_object_set_new(s, "full", json_estimate(&m, cfg, o, strategies[i], 1));
            json_object_set_new(js, st_enum_name("parallel", "strategy", strategies[i]), s);
        }
        if (o->time)
            rc = print_time(&m, cfg, o, js);
        if (!rc) {
            char *text = json_dumps(js, JSON_COMPACT);
            printf("%s\n", text);
            free(text);
        }
        json_decref(js);
    } else {
        print_table(&m, cfg, o);
        if (o->time)
            rc = print_time(&m, cfg, o, NULL);
    }
    st_model_free(&m);
    return rc;
}

int st_cmd_estimate(int argc, char **argv)
{
    options o = {.nodes = 1, .tasks = 8};
    st_cluster_defaults(&o.cluster);
    st_args a;
    int rc = st_args_parse(&estimate_spec, argc, argv, &o, &a);
    if (rc)
        return rc;
    if ((rc = st_args_missing(&estimate_spec, &a, 1, argc - 1)))
        return rc;
    if (o.time && o.cluster.tflops <= 0)
        return st_arg_error(argc - 1, "--time needs --tflops, the compute rate achieved per GPU");
    st_config cfg;
    rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
    if (rc == 0)
        rc = report(&cfg, &o);
    st_config_free(&cfg);
    return rc;
}
