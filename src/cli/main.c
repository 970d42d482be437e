/* shardtrain: train GPT-2 and Llama-style models under Slurm, mpirun or
 * alone.  main() only hands over to the command-line layer. */
#include "cli/cli.h"

int main(int argc, char **argv) { return st_cli_main(argc, argv); }
