/* `shardtrain check CONFIG`: load the configuration as train would and
 * print it resolved, every value with where it came from.  No MPI. */
#include "cli/commands.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "config/config.h"
#include "config/origin.h"

#include <stdio.h>

int st_cmd_check(int argc, char **argv)
{
    st_args a;
    int rc = st_args_parse(&st_cli_config_args, argc, argv, NULL, &a);
    if (rc)
        return rc;
    st_config cfg;
    rc = st_config_load(&cfg, a.positional[0], a.overrides, a.n_overrides);
    if (rc == 0)
        st_config_print(&cfg, stdout);
    st_config_free(&cfg);
    return rc;
}
