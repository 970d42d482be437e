/* `shardtrain keys [--man]`: every configuration key from the schema, as a
 * list or as the key reference of shardtrain.ini(5) (the build generates
 * the page from it).  Whatever is wrong with its arguments, the error is
 * the usage line at the first of them: it has too few to point at one. */
#include "cli/commands.h"
#include "cli/args.h"
#include "config/schema.h"

#include <stdio.h>
#include <string.h>

int st_cmd_keys(int argc, char **argv)
{
    if (argc == 2) {
        st_schema_print_keys(stdout);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[2], "--man")) {
        st_schema_print_man(stdout);
        return 0;
    }
    return st_arg_error(2, "usage: shardtrain keys [--man]");
}
