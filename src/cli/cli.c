/* Command-line front end: the usage text and the table that hands each
 * subcommand to its entry point (commands.h, one cli/cmd_NAME.c each).
 * Every bad argument is one `shardtrain: error: command line:N:` line and
 * exit status 2 (N is the argument's position). */
#include "st_build.h"

#include "cli/cli.h"
#include "cli/args.h"
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static const char usage_text[] =
    "usage: shardtrain train [-s SECTION.KEY=VALUE]... CONFIG\n"
    "       shardtrain check [-s SECTION.KEY=VALUE]... [--inputs] [--ranks N] CONFIG\n"
    "       shardtrain sample [-s SECTION.KEY=VALUE]... [--weights FILE] [--prompt TEXT]\n"
    "                         [--tokens N] [--temperature X] [--top-k K] [--seed S]\n"
    "                         [--tokenizer PATH] [--ids] CONFIG\n"
    "       shardtrain prepare [--val-fraction F] [--shard-tokens N] [--tokenizer PATH]\n"
    "                          [--format text|jsonl] INPUT OUT_PREFIX\n"
    "       shardtrain estimate [-s SECTION.KEY=VALUE]... [--nodes N] [--tasks-per-node G]\n"
    "                           [--device-mem GIB] [--json] [--time --tflops X [--intra-bw GBS]\n"
    "                           [--intra-lat US] [--inter-bw GBS] [--inter-lat US]\n"
    "                           [--comm-sm-share F]] CONFIG\n"
    "       shardtrain bench-comm [-s SECTION.KEY=VALUE]... [--min-bytes B] [--max-bytes B]\n"
    "                             [--iters N] [--warmup N] [--group world|shard|replicate] CONFIG\n"
    "       shardtrain export [--tokenizer PATH] [--adapter] [--base PATH] CHECKPOINT OUT_DIR\n"
    "       shardtrain plot LOG_DIR... [-o FILE]\n"
    "       shardtrain keys [--man]\n"
    "       shardtrain --version | --help\n"
    "See shardtrain(1) and shardtrain.ini(5).\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"train", st_cmd_train},
    {"check", st_cmd_check},
    {"sample", st_cmd_sample},
    {"prepare", st_cmd_prepare},
    {"export", st_cmd_export},
    {"plot", st_cmd_plot},
    {"keys", st_cmd_keys},
    {"estimate", st_cmd_estimate},
    {"bench-comm", st_cmd_bench_comm},
    {"runtime-info", st_cmd_runtime_info}, /* hidden: not in the usage */
};

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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].run(argc, argv);
    return st_arg_error(1, "unknown subcommand '%s'", cmd);
}

const st_args_spec st_cli_config_args = {
    .overrides = 1,
    .positionals = {"CONFIG"},
    .n_positionals = 1,
    .n_required = 1,
};

int st_cli_run_job(int argc, char **argv, const st_args *a, st_cli_job job,
                   const void *job_arg)
{
    st_runtime rt;
    int rc = st_runtime_init(&rt, &argc, &argv);
    if (rc == 0) {
        st_config cfg;
        /* Agreed, so that a configuration only some ranks cannot read (a
         * file missing on one node) stops every rank here. */
        rc = st_runtime_agree(st_config_load(&cfg, a->positional[0], a->overrides,
                                             a->n_overrides));
        if (rc == 0)
            rc = job(&cfg, &rt, job_arg);
        st_config_free(&cfg);
    }
    st_runtime_finalize();
    return rc;
}
