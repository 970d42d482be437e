/* `shardtrain estimate`: the memory table per strategy (DeepSpeed's
 * estimate_zero3_model_states_mem_needs_all_live is the model for its
 * shape), the largest micro-batch that fits a device, and with --time the
 * projected step time from projection.c.  Needs no MPI and no data: it
 * reads only the configuration. */
#include "cli/args.h"
#include "plan/estimate.h"
#include "base/log.h"
#include "model/model.h"
#include "plan/projection.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
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
    printf("(G = GiB.  params, grads, optim: this rank's fp32 shards.  gathered: units "
           "gathered and in flight at the peak; grad_buf: full-size gradient buffers then.)\n");
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
               "intra %.0f GB/s + %.1f us, inter %.0f GB/s + %.1f us\n",
               o->nodes, o->tasks, o->cluster.tflops, o->cluster.intra_bw_gbs,
               o->cluster.intra_lat_us, o->cluster.inter_bw_gbs, o->cluster.inter_lat_us);
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

int st_estimate_main(int argc, char **argv)
{
    options o = {1, 8, 0, 0, 0, {0}};
    st_cluster_defaults(&o.cluster);
    st_override ov[ST_MAX_OVERRIDES];
    int n_ov = 0;
    const char *path = NULL;
    /* argv[0] is "estimate"; argument i is argument i + 1 of the command line. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int argno = i + 1;
        double *target = NULL, lo = 0, hi = 1e12;
        if (!strcmp(a, "--json")) { o.json = 1; continue; }
        if (!strcmp(a, "--time")) { o.time = 1; continue; }
        int taken = st_arg_override(argc, argv, &i, 1, ov, &n_ov);
        if (taken >= 0) {
            if (taken)
                return taken;
            continue;
        }
        if (!strcmp(a, "--nodes")) target = &o.nodes, lo = 1, hi = 1e6;
        else if (!strcmp(a, "--tasks-per-node")) target = &o.tasks, lo = 1, hi = 1e4;
        else if (!strcmp(a, "--device-mem")) target = &o.device_gib, lo = 1e-6;
        else if (!strcmp(a, "--tflops")) target = &o.cluster.tflops, lo = 1e-6;
        else if (!strcmp(a, "--intra-bw")) target = &o.cluster.intra_bw_gbs, lo = 1e-6;
        else if (!strcmp(a, "--inter-bw")) target = &o.cluster.inter_bw_gbs, lo = 1e-6;
        else if (!strcmp(a, "--intra-lat")) target = &o.cluster.intra_lat_us;
        else if (!strcmp(a, "--inter-lat")) target = &o.cluster.inter_lat_us;
        else if (a[0] == '-' && a[1])
            return st_arg_error(argno, "unknown option '%s'", a);
        else if (path)
            return st_arg_error(argno, "unexpected argument '%s'", a);
        else {
            path = a;
            continue;
        }
        if (i + 1 >= argc)
            return st_arg_error(argno, "%s needs a value", a);
        if (st_arg_double(argv[i + 1], lo, hi, target))
            return st_arg_error(argno + 1, "'%s' is not a valid number here", argv[i + 1]);
        if ((target == &o.nodes || target == &o.tasks) && *target != floor(*target))
            return st_arg_error(argno + 1, "'%s' is not a whole number", argv[i + 1]);
        i++;
    }
    if (!path)
        return st_arg_error(argc, "missing CONFIG");
    if (o.time && o.cluster.tflops <= 0)
        return st_arg_error(argc, "--time needs --tflops, the compute rate achieved per GPU");
    st_config cfg;
    int rc = st_config_load(&cfg, path, ov, n_ov);
    if (rc) {
        st_config_free(&cfg);
        return rc;
    }
    const int world = (int)(o.nodes * o.tasks);
    o.cluster.nodes = (int)o.nodes;
    o.cluster.gpus_per_node = (int)o.tasks;
    if (cfg.parallel.shard_size > 0 && world % cfg.parallel.shard_size) {
        st_error(NULL, "parallel.shard_size %lld does not divide %d ranks; hint: change "
                 "--nodes/--tasks-per-node or shard_size", (long long)cfg.parallel.shard_size,
                 world);
        st_config_free(&cfg);
        return ST_EXIT_USAGE;
    }
    st_model m;
    if ((rc = st_model_init(&m, &cfg.model))) {
        st_config_free(&cfg);
        return rc;
    }
    if (o.json) {
        json_t *js = json_object();
        for (int i = 0; i < 4; i++) {
            json_t *s = json_object();
            json_object_set_new(s, "none", json_estimate(&m, &cfg, &o, strategies[i], 0));
            json_object_set_new(s, "full", json_estimate(&m, &cfg, &o, strategies[i], 1));
            json_object_set_new(js, st_enum_name("parallel", "strategy", strategies[i]), s);
        }
        if (o.time)
            rc = print_time(&m, &cfg, &o, js);
        if (!rc) {
            char *text = json_dumps(js, JSON_COMPACT);
            printf("%s\n", text);
            free(text);
        }
        json_decref(js);
    } else {
        print_table(&m, &cfg, &o);
        if (o.time)
            rc = print_time(&m, &cfg, &o, NULL);
    }
    st_model_free(&m);
    st_config_free(&cfg);
    return rc;
}
