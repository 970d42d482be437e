/* `shardtrain export CHECKPOINT OUT_DIR`: a checkpoint of any world size
 * and strategy to a Hugging Face model directory (io/export.c does the
 * work).  One process, no MPI: it only reads files. */
#include "cli/commands.h"
#include "cli/args.h"
#include "io/checkpoint.h"

#include <stdint.h>
#include <stdio.h>

static const st_args_spec export_spec = {
    .positionals = {"CHECKPOINT", "OUT_DIR"},
    .n_positionals = 2,
    .n_required = 2,
};

int st_cmd_export(int argc, char **argv)
{
    st_args a;
    int rc = st_args_parse(&export_spec, argc, argv, NULL, &a);
    if (rc)
        return rc;
    char dir[8192];
    int64_t step = 0;
    rc = st_ckpt_export_hf(a.positional[0], a.positional[1], dir, sizeof dir, &step);
    if (rc == 0)
        printf("shardtrain: exported %s (step %lld) to %s\n", dir, (long long)step,
               a.positional[1]);
    return rc;
}
