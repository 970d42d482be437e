/* `shardtrain sample CONFIG`: generate text from trained weights
 * (train/sample.c does the work).  The options are checked after the
 * positionals are counted, last occurrence only, in the table's order. */
#include "cli/commands.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "train/sample.h"

#include <limits.h>
#include <stddef.h>

static const st_arg_option sample_options[] = {
    {.name = "--weights", .kind = ST_ARG_STRING, .path = 1,
     .offset = offsetof(st_sample_options, weights)},
    {.name = "--prompt", .kind = ST_ARG_STRING, .offset = offsetof(st_sample_options, prompt)},
    {.name = "--tokenizer", .kind = ST_ARG_STRING, .path = 1,
     .offset = offsetof(st_sample_options, tokenizer)},
    {.name = "--ids", .kind = ST_ARG_FLAG, .offset = offsetof(st_sample_options, ids)},
    {.name = "--tokens", .kind = ST_ARG_INT, .offset = offsetof(st_sample_options, tokens),
     .check = ST_ARG_CHECK_AT_END, .min = 0, .max = 1000000,
     .bad = "--tokens '%s' is not an integer in [0, 1000000]"},
    {.name = "--temperature", .kind = ST_ARG_NUMBER,
     .offset = offsetof(st_sample_options, temperature), .check = ST_ARG_CHECK_AT_END,
     .lo = 0.0, .hi = 100.0,
     .bad = "--temperature '%s' is not a number in [0, 100]"},
    {.name = "--top-k", .kind = ST_ARG_INT, .offset = offsetof(st_sample_options, top_k),
     .check = ST_ARG_CHECK_AT_END, .min = 0, .max = INT_MAX,
     .bad = "--top-k '%s' is not a non-negative integer"},
    {.name = "--seed", .kind = ST_ARG_INT, .offset = offsetof(st_sample_options, seed),
     .check = ST_ARG_CHECK_AT_END, .min = 0, .max = LLONG_MAX,
     .bad = "--seed '%s' is not a non-negative integer"},
};

static const st_args_spec sample_spec = {
    .overrides = 1,
    ST_ARGS_OPTIONS(sample_options),
    .positionals = {"CONFIG"},
    .n_positionals = 1,
    .n_required = 1,
};

static int sample_job(const st_config *cfg, st_runtime *rt, const void *options)
{
    return st_sample(cfg, rt, options);
}

int st_cmd_sample(int argc, char **argv)
{
    /* --seed is stored as an int64_t: the unsigned field may be written
     * through its signed type, and the range keeps it non-negative. */
    st_sample_options so = {.weights = NULL, .prompt = "", .tokens = 200,
                            .temperature = 0.8, .top_k = 0, .seed = 1};
    st_args a;
    int rc = st_args_parse(&sample_spec, argc, argv, &so, &a);
    return rc ? rc : st_cli_run_job(argc, argv, &a, sample_job, &so);
}
