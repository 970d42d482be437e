/* `shardtrain plot LOG_DIR... [-o FILE]`: the loss plot of one run, or of
 * several overlaid, from their metrics.jsonl (report/plot.c draws it).
 * One process, no MPI: it only reads the logs, so it can run beside a job
 * that is still writing them. */
#include "cli/commands.h"
#include "cli/args.h"
#include "report/plot.h"
#include "base/log.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *out;
} plot_options;

static const st_arg_option plot_options_table[] = {
    {.name = "-o", .kind = ST_ARG_STRING, .path = 1, .offset = offsetof(plot_options, out),
     .check = ST_ARG_CHECK_WHEN_READ},
};

static const st_args_spec plot_spec = {
    ST_ARGS_OPTIONS(plot_options_table),
    .positionals = {"LOG_DIR"},
    .n_positionals = 1,
    .n_required = 1,
    .last_repeats = 1,
};

int st_cmd_plot(int argc, char **argv)
{
    plot_options o = {0};
    st_args a;
    int rc = st_args_parse(&plot_spec, argc, argv, &o, &a);
    if (rc)
        return rc;
    /* One run's plot lives with its logs, where the end of training writes
     * it too; an overlay belongs to no one run, so it lands here. */
    char out[4096];
    int n;
    if (o.out)
        n = snprintf(out, sizeof out, "%s", o.out);
    else if (a.n_positional == 1)
        n = snprintf(out, sizeof out, "%s/plot.svg", a.positional[0]);
    else
        n = snprintf(out, sizeof out, "plot.svg");
    if (n < 0 || (size_t)n >= sizeof out) {
        st_error(o.out ? o.out : a.positional[0], "the plot's path is longer than %zu bytes; "
                 "hint: give a shorter -o", sizeof out - 1);
        return ST_EXIT_USAGE;
    }
    rc = st_plot_write(out, a.positional, a.n_positional);
    if (rc == 0)
        printf("shardtrain: wrote %s\n", out);
    return rc;
}
