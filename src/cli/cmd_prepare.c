/* `shardtrain prepare INPUT OUT_PREFIX`: text to token shards, byte level
 * or with --tokenizer's tokenizer.json (data/prepare.c does the work).  No MPI, no configuration.  The options
 * are checked after the positionals are counted, last occurrence only. */
#include "cli/commands.h"
#include "cli/args.h"
#include "data/data.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    double val_fraction;
    int64_t shard_tokens;
    const char *tokenizer;
    const char *format;
} prepare_args;

static const char *const formats[] = {"text", "jsonl", NULL};

static const st_arg_option prepare_options[] = {
    {.name = "--val-fraction", .kind = ST_ARG_NUMBER,
     .offset = offsetof(prepare_args, val_fraction), .check = ST_ARG_CHECK_AT_END,
     .lo = 0.0, .hi = 1.0, .hi_open = 1,
     .bad = "--val-fraction '%s' must be a number in [0, 1)"},
    {.name = "--shard-tokens", .kind = ST_ARG_INT,
     .offset = offsetof(prepare_args, shard_tokens), .check = ST_ARG_CHECK_AT_END,
     .min = 1, .max = LLONG_MAX, .bad = "--shard-tokens '%s' must be a positive integer"},
    {.name = "--tokenizer", .kind = ST_ARG_STRING, .path = 1,
     .offset = offsetof(prepare_args, tokenizer)},
    {.name = "--format", .kind = ST_ARG_STRING, .offset = offsetof(prepare_args, format),
     .check = ST_ARG_CHECK_AT_END, .choices = formats,
     .bad = "--format '%s' is not text or jsonl"},
};

static const st_args_spec prepare_spec = {
    ST_ARGS_OPTIONS(prepare_options),
    .positionals = {"INPUT", "OUT_PREFIX"},
    .n_positionals = 2,
    .n_required = 2,
};

int st_cmd_prepare(int argc, char **argv)
{
    prepare_args o = {.val_fraction = 0.1, .shard_tokens = 100000000, .format = "text"};
    st_args a;
    int rc = st_args_parse(&prepare_spec, argc, argv, &o, &a);
    if (rc)
        return rc;
    st_prepare_options po = {.val_fraction = o.val_fraction, .shard_tokens = o.shard_tokens,
                             .tokenizer = o.tokenizer, .jsonl = strcmp(o.format, "jsonl") == 0};
    return st_prepare_text(a.positional[0], a.positional[1], &po);
}
