/* `shardtrain export [--tokenizer PATH] [--adapter] [--base PATH]
 * CHECKPOINT OUT_DIR`: a checkpoint of any world size and strategy, or a
 * run's final weights, to a Hugging Face model directory, or a LoRA run's
 * adapters to a PEFT adapter directory (ckpt/export.c does the work).  One process, no MPI:
 * it only reads files. */
#include "cli/commands.h"
#include "cli/args.h"
#include "ckpt/checkpoint.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *tokenizer;
    int adapter;
    const char *base;
} export_args;

static const st_arg_option export_options[] = {
    {.name = "--tokenizer", .kind = ST_ARG_STRING, .path = 1,
     .offset = offsetof(export_args, tokenizer)},
    {.name = "--adapter", .kind = ST_ARG_FLAG, .offset = offsetof(export_args, adapter)},
    {.name = "--base", .kind = ST_ARG_STRING, .path = 1,
     .offset = offsetof(export_args, base)},
};

static const st_args_spec export_spec = {
    ST_ARGS_OPTIONS(export_options),
    .positionals = {"CHECKPOINT", "OUT_DIR"},
    .n_positionals = 2,
    .n_required = 2,
};

int st_cmd_export(int argc, char **argv)
{
    export_args o = {0};
    st_args a;
    int rc = st_args_parse(&export_spec, argc, argv, &o, &a);
    if (rc)
        return rc;
    char dir[8192];
    int64_t step = 0;
    rc = st_ckpt_export_hf(a.positional[0], a.positional[1], o.tokenizer, o.adapter, o.base,
                           dir, sizeof dir, &step);
    if (rc == 0 && step >= 0)
        printf("shardtrain: exported %s (step %lld) to %s\n", dir, (long long)step,
               a.positional[1]);
    else if (rc == 0)
        printf("shardtrain: exported %s (final weights) to %s\n", dir, a.positional[1]);
    return rc;
}
