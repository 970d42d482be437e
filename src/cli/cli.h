/* The command line: st_cli_main hands each subcommand to its entry point
 * (commands.h); the argument table and the run frame that several
 * commands share. */
#ifndef ST_CLI_H
#define ST_CLI_H

#include "cli/args.h"
#include "config/config.h"
#include "runtime/runtime.h"

/* Run the command line; returns the process exit status. */
int st_cli_main(int argc, char **argv);

/* The arguments of train, check and runtime-info: [-s SECTION.KEY=VALUE]...
 * CONFIG. */
extern const st_args_spec st_cli_config_args;

/* The work of a command that runs on every rank with a configuration. */
typedef int (*st_cli_job)(const st_config *cfg, st_runtime *rt, const void *job_arg);

/* Start the runtime, load the configuration a->positional[0] with a's
 * overrides, run job on it, and shut the runtime down whatever happened.
 * Returns the first failure's exit status, or the job's. */
int st_cli_run_job(int argc, char **argv, const st_args *a, st_cli_job job,
                   const void *job_arg);

#endif
