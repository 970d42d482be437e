/* The command line: subcommands and their options. */
#ifndef ST_CLI_H
#define ST_CLI_H

/* Run the command line; returns the process exit status. */
int st_cli_main(int argc, char **argv);

#endif
