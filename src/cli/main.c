/* shardtrain: train GPT-2 and Llama-style models under Slurm, mpirun or
 * alone.  main() installs the preemption signal handlers, first, so that a
 * signal at any moment of the process has the documented effect
 * (runtime/signals.h), then hands over to the command-line layer. */
#include "base/test_faults.h"
#include "cli/cli.h"
#include "runtime/signals.h"

int main(int argc, char **argv)
{
    st_signals_install();
    st_fault_pause("start");
    return st_cli_main(argc, argv);
}
