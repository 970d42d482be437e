/* `shardtrain check [--inputs] [--ranks N] CONFIG`: load the configuration
 * as train would and print it resolved, every value with where it came
 * from.  --inputs also makes train's start-up checks (train/preflight.h):
 * the rules on the configuration, with --ranks the batch layout, and the
 * inputs opened (data shards, model.init, the checkpoint a resume loads),
 * what they hold appended as INI comments.  No MPI, nothing written. */
#include "cli/commands.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "config/config.h"
#include "base/log.h"
#include "config/origin.h"
#include "train/preflight.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int inputs;
    int64_t ranks;
} check_args;

static const st_arg_option check_options[] = {
    {.name = "--inputs", .kind = ST_ARG_FLAG, .offset = offsetof(check_args, inputs)},
    {.name = "--ranks", .kind = ST_ARG_INT, .offset = offsetof(check_args, ranks),
     .check = ST_ARG_CHECK_AT_END, .min = 1, .max = 1 << 20,
     .bad = "--ranks '%s' is not a number of ranks in [1, 1048576]"},
};

static const st_args_spec check_spec = {
    .overrides = 1,
    ST_ARGS_OPTIONS(check_options),
    .positionals = {"CONFIG"},
    .n_positionals = 1,
    .n_required = 1,
};

int st_cmd_check(int argc, char **argv)
{
    check_args o = {0};
    st_args a;
    int rc = st_args_parse(&check_spec, argc, argv, &o, &a);
    if (rc)
        return rc;
    st_config cfg;
    rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
    /* Either option applies train's rules on the configuration (the batch
     * layout only with --ranks); --inputs then opens the inputs. */
    if (!rc && (o.inputs || o.ranks))
        rc = st_preflight_config(&cfg, (int)o.ranks);
    /* What the inputs hold is printed after the configuration, and
     * neither when an input is bad: the error line is the whole answer. */
    char *notes = NULL;
    size_t n_notes = 0;
    FILE *f = rc == 0 && o.inputs ? open_memstream(&notes, &n_notes) : NULL;
    if (rc == 0 && o.inputs && !f) {
        st_error(NULL, "out of memory");
        rc = ST_EXIT_FAILURE;
    }
    if (f) {
        rc = st_preflight_inputs(&cfg, f);
        fclose(f);
    }
    if (rc == 0) {
        st_config_print(&cfg, stdout);
        fputs(notes ? notes : "", stdout);
    }
    free(notes);
    st_config_free(&cfg);
    return rc;
}
