/* Command-line front end.  Parses subcommands and options, loads the
 * configuration and hands over to the train loop, the data preparer or the
 * sampler.  Every bad argument is one `shardtrain: error: command line:N:`
 * line and exit status 2 (N is the argument's position). */
#include "st_build.h"

#include "io/checkpoint.h"
#include "cli/cli.h"
#include "cli/args.h"
#include "config/config.h"
#include "cli/cmd_bench_comm.h"
#include "io/data.h"
#include "plan/estimate.h"
#include "base/log.h"
#include "runtime/runtime.h"
#include "train/sample.h"
#include "comm/groups.h"
#include "config/schema.h"
#include "train/train.h"
#include "config/origin.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: shardtrain train [-s SECTION.KEY=VALUE]... CONFIG\n"
    "       shardtrain check [-s SECTION.KEY=VALUE]... CONFIG\n"
    "       shardtrain sample [-s SECTION.KEY=VALUE]... [--weights FILE] [--prompt TEXT]\n"
    "                         [--tokens N] [--temperature X] [--top-k K] [--seed S] CONFIG\n"
    "       shardtrain prepare [--val-fraction F] [--shard-tokens N] INPUT OUT_PREFIX\n"
    "       shardtrain estimate [-s SECTION.KEY=VALUE]... [--nodes N] [--tasks-per-node G]\n"
    "                           [--device-mem GIB] [--json] [--time --tflops X [--intra-bw GBS]\n"
    "                           [--intra-lat US] [--inter-bw GBS] [--inter-lat US]] CONFIG\n"
    "       shardtrain bench-comm [-s SECTION.KEY=VALUE]... [--min-bytes B] [--max-bytes B]\n"
    "                             [--iters N] [--warmup N] [--group world|shard|replicate] CONFIG\n"
    "       shardtrain export CHECKPOINT OUT_DIR\n"
    "       shardtrain keys [--man]\n"
    "       shardtrain --version | --help\n"
    "See shardtrain(1) and shardtrain.ini(5).\n";

/* Parsed arguments common to the subcommands. */
typedef struct {
    st_override overrides[ST_MAX_OVERRIDES];
    int n_overrides;
    const char *positional[2];
    int positional_argno[2];
    int n_positional;
} cli_args;

/* Option spec for one subcommand: which flags take a value. */
typedef struct {
    const char *name;
    const char **value;
    int *argno;
} value_opt;

/* Parse -s and the given value options; everything else is positional. */
static int parse_args(int argc, char **argv, int first, cli_args *a,
                      value_opt *opts, int n_opts, int allow_s, int max_positional)
{
    memset(a, 0, sizeof *a);
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (allow_s) {
            int rc = st_arg_override(argc, argv, &i, 0, a->overrides, &a->n_overrides);
            if (rc >= 0) {
                if (rc)
                    return rc;
                continue;
            }
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            int found = 0;
            for (int k = 0; k < n_opts; k++)
                if (!strcmp(arg, opts[k].name)) {
                    if (i + 1 >= argc)
                        return st_arg_error(i, "%s needs a value", arg);
                    *opts[k].value = argv[++i];
                    *opts[k].argno = i;
                    found = 1;
                    break;
                }
            if (!found)
                return st_arg_error(i, "unknown option '%s'", arg);
            continue;
        }
        if (a->n_positional == max_positional)
            return st_arg_error(i, "unexpected argument '%s'", arg);
        a->positional_argno[a->n_positional] = i;
        a->positional[a->n_positional++] = arg;
    }
    if (a->n_positional < max_positional)
        return st_arg_error(argc, "missing %s", max_positional == 2 ? "arguments" : "CONFIG");
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args(argc, argv, 2, &a, NULL, 0, 1, 1);
    if (rc)
        return rc;
    st_config cfg;
    rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
    if (rc == 0)
        st_config_print(&cfg, stdout);
    st_config_free(&cfg);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args(argc, argv, 2, &a, NULL, 0, 1, 1);
    if (rc)
        return rc;
    st_runtime rt;
    if ((rc = st_runtime_init(&rt, &argc, &argv)) == 0) {
        st_config cfg;
        rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
        if (rc == 0)
            rc = st_train(&cfg, &rt);
        st_config_free(&cfg);
    }
    st_runtime_finalize();
    return rc;
}

static int cmd_sample(int argc, char **argv)
{
    const char *weights = NULL, *prompt = "", *tokens = NULL, *temp = NULL,
               *topk = NULL, *seed = NULL;
    int aw, ap, an, at, ak, as;
    value_opt opts[] = {{"--weights", &weights, &aw}, {"--prompt", &prompt, &ap},
                        {"--tokens", &tokens, &an},   {"--temperature", &temp, &at},
                        {"--top-k", &topk, &ak},      {"--seed", &seed, &as}};
    cli_args a;
    int rc = parse_args(argc, argv, 2, &a, opts, 6, 1, 1);
    if (rc)
        return rc;
    st_sample_options so = {weights, prompt, 200, 0.8, 0, 1};
    long long v;
    if (tokens) {
        if (st_arg_int(tokens, 0, 1000000, &v))
            return st_arg_error(an, "--tokens '%s' is not an integer in [0, 1000000]", tokens);
        so.tokens = v;
    }
    if (temp && st_arg_double(temp, 0.0, 100.0, &so.temperature))
        return st_arg_error(at, "--temperature '%s' is not a number in [0, 100]", temp);
    if (topk) {
        if (st_arg_int(topk, 0, INT_MAX, &v))
            return st_arg_error(ak, "--top-k '%s' is not a non-negative integer", topk);
        so.top_k = v;
    }
    if (seed) {
        if (st_arg_int(seed, 0, LLONG_MAX, &v))
            return st_arg_error(as, "--seed '%s' is not a non-negative integer", seed);
        so.seed = (uint64_t)v;
    }
    st_runtime rt;
    if ((rc = st_runtime_init(&rt, &argc, &argv)) == 0) {
        st_config cfg;
        rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
        if (rc == 0)
            rc = st_sample(&cfg, &rt, &so);
        st_config_free(&cfg);
    }
    st_runtime_finalize();
    return rc;
}

static int cmd_prepare(int argc, char **argv)
{
    const char *frac = NULL, *shard = NULL;
    int af, as;
    value_opt opts[] = {{"--val-fraction", &frac, &af}, {"--shard-tokens", &shard, &as}};
    cli_args a;
    int rc = parse_args(argc, argv, 2, &a, opts, 2, 0, 2);
    if (rc)
        return rc;
    double f = 0.1;
    long long n = 100000000;
    if (frac && (st_arg_double(frac, 0.0, 1.0, &f) || f >= 1.0))
        return st_arg_error(af, "--val-fraction '%s' must be a number in [0, 1)", frac);
    if (shard && st_arg_int(shard, 1, LLONG_MAX, &n))
        return st_arg_error(as, "--shard-tokens '%s' must be a positive integer", shard);
    return st_prepare_text(a.positional[0], a.positional[1], f, n);
}

/* No MPI: export is a single process reading files. */
static int cmd_export(int argc, char **argv)
{
    cli_args a;
    int rc = parse_args(argc, argv, 2, &a, NULL, 0, 0, 2);
    return rc ? rc : st_export_main(a.positional[0], a.positional[1]);
}

static int cmd_keys(int argc, char **argv)
{
    if (argc == 2) {
        st_schema_print_keys(stdout);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[2], "--man")) {
        st_schema_print_man(stdout);
        return 0;
    }
    return st_arg_error(argc > 2 ? 2 : 1, "usage: shardtrain keys [--man]");
}

int st_cli_main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return st_arg_error(1, "missing subcommand");
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("shardtrain %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "train"))
        return cmd_train(argc, argv);
    if (!strcmp(cmd, "check"))
        return cmd_check(argc, argv);
    if (!strcmp(cmd, "sample"))
        return cmd_sample(argc, argv);
    if (!strcmp(cmd, "prepare"))
        return cmd_prepare(argc, argv);
    if (!strcmp(cmd, "export"))
        return cmd_export(argc, argv);
    if (!strcmp(cmd, "keys"))
        return cmd_keys(argc, argv);
    /* Both take argv from their own name on, so they report argument
     * positions relative to it (see their headers). */
    if (!strcmp(cmd, "estimate"))
        return st_estimate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-comm"))
        return st_bench_comm_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "runtime-info")) {
        /* Hidden: identity, device and groups of each rank, for tests and
         * for checking a launcher set-up. */
        cli_args a;
        int rc = parse_args(argc, argv, 2, &a, NULL, 0, 1, argc > 2 ? 1 : 0);
        if (rc)
            return rc;
        return st_runtime_info_main(a.n_positional ? a.positional[0] : NULL, a.overrides,
                                    a.n_overrides);
    }
    return st_arg_error(1, "unknown subcommand '%s'", cmd);
}
