/* `shardtrain train CONFIG`: the training run, on every rank the launcher
 * started (train/train.c does the work). */
#include "cli/commands.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "train/train.h"

static int train_job(const st_config *cfg, st_runtime *rt, const void *unused)
{
    (void)unused;
    return st_train(cfg, rt);
}

int st_cmd_train(int argc, char **argv)
{
    st_args a;
    int rc = st_args_parse(&st_cli_config_args, argc, argv, NULL, &a);
    return rc ? rc : st_cli_run_job(argc, argv, &a, train_job, NULL);
}
