/* The subcommands' entry points, one src/cli/cmd_NAME.c each.  Every one
 * takes the whole command line (argv[0] "shardtrain", argv[1] the
 * subcommand), so the positions its errors name are indexes of argv; parses
 * its arguments with args.h (keys, with its two fixed forms, compares them
 * itself) before anything else starts, so a typo costs one line, not one
 * per rank after a launcher round trip; calls into the modules below the
 * cli for the work; and returns the process exit status (see
 * shardtrain(1), EXIT STATUS). */
#ifndef ST_COMMANDS_H
#define ST_COMMANDS_H

/* train [-s SECTION.KEY=VALUE]... CONFIG */
int st_cmd_train(int argc, char **argv);

/* check [-s SECTION.KEY=VALUE]... CONFIG: print the resolved configuration. */
int st_cmd_check(int argc, char **argv);

/* sample [-s ...]... [--weights FILE] [--prompt TEXT] [--tokens N]
 * [--temperature X] [--top-k K] [--seed S] CONFIG */
int st_cmd_sample(int argc, char **argv);

/* prepare [--val-fraction F] [--shard-tokens N] INPUT OUT_PREFIX */
int st_cmd_prepare(int argc, char **argv);

/* estimate [-s ...]... [--nodes N] [--tasks-per-node G] [--device-mem GIB]
 * [--json] [--time --tflops X [--intra-bw GBS] [--intra-lat US]
 * [--inter-bw GBS] [--inter-lat US]] CONFIG.  Needs no MPI. */
int st_cmd_estimate(int argc, char **argv);

/* bench-comm [-s ...]... [--min-bytes B] [--max-bytes B] [--iters N]
 * [--warmup N] [--group world|shard|replicate] CONFIG.  Returns 1 when any
 * result was wrong. */
int st_cmd_bench_comm(int argc, char **argv);

/* export CHECKPOINT OUT_DIR.  One process, no MPI. */
int st_cmd_export(int argc, char **argv);

/* plot LOG_DIR... [-o FILE]: the loss plot (SVG) of one run or several
 * overlaid.  One process, no MPI. */
int st_cmd_plot(int argc, char **argv);

/* keys [--man]: the configuration keys, or the ini(5) page's key list. */
int st_cmd_keys(int argc, char **argv);

/* runtime-info [[-s ...]... CONFIG] (hidden): each rank's identity, device
 * and groups, for tests and for checking a launcher set-up. */
int st_cmd_runtime_info(int argc, char **argv);

#endif
