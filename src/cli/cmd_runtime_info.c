/* `shardtrain runtime-info [[-s SECTION.KEY=VALUE]... CONFIG]` (hidden):
 * start the runtime, bind the device, build the process groups and print
 * each rank's identity line, then shut down - for tests and for checking a
 * launcher set-up.  Without arguments it uses the default configuration;
 * with any, CONFIG is required. */
#include "cli/commands.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "comm/groups.h"
#include "config/config.h"
#include "runtime/device.h"
#include "runtime/runtime.h"

#include <string.h>

/* The identity line of this rank, from the configuration at path (NULL:
 * the defaults). */
static int report(const char *path, const st_args *a)
{
    st_runtime rt;
    st_config cfg;
    st_groups g;
    int loaded = 0;
    memset(&g, 0, sizeof g);
    int rc = st_runtime_init(&rt, NULL, NULL);
    if (rc == 0) {
        /* Agreed: the file may be missing on one node only. */
        rc = st_runtime_agree(path ? st_config_load(&cfg, path, a->overrides, a->n_overrides)
                                   : st_config_defaults(&cfg));
        loaded = 1;
    }
    /* The device differs between ranks, so agree before the collectives
     * of st_groups_create.  Sharing a GPU is allowed here: the command
     * reports, it does not train. */
    if (rc == 0)
        rc = st_runtime_agree(st_device_bind(&rt, &cfg, 1));
    if (rc == 0)
        rc = st_groups_create(&g, &rt, &cfg, NULL);
    if (rc == 0) {
        char shard[160], rep[160];
        st_groups_describe(&g, shard, rep, sizeof shard);
        st_runtime_log_identity(&rt, shard, rep);
    }
    st_groups_destroy(&g);
    if (loaded)
        st_config_free(&cfg);
    st_runtime_finalize();
    return rc;
}

int st_cmd_runtime_info(int argc, char **argv)
{
    st_args a;
    memset(&a, 0, sizeof a);
    if (argc > 2) {
        int rc = st_args_parse(&st_cli_config_args, argc, argv, NULL, &a);
        if (rc)
            return rc;
    }
    return report(a.n_positional ? a.positional[0] : NULL, &a);
}
