/* The progress hook of progress.h: one function pointer, set by the mpi
 * communication backend and read by the CPU kernels. */
#include "runtime/progress.h"

st_progress_fn st_progress_poller;

void st_progress_set(st_progress_fn fn) { st_progress_poller = fn; }
