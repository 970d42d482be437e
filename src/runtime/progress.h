/* Progress for communication that is in flight while the CPU computes.
 * Open MPI moves a non-blocking collective forward only while the process
 * is inside an MPI call, so an all-gather prefetched for the next unit
 * would otherwise sit still until the engine waits for it.  The mpi
 * backend registers a poller here (comm_mpi.c: MPI_Test on each request
 * in flight, for groups that span nodes) and the CPU kernels call
 * st_progress_poll between pieces of work (matrix tiles, attention
 * heads), from the main thread only, as MPI_THREAD_FUNNELED requires.  The layers stay apart: kernels know only
 * this hook, not comm.  docs/benchmarks.md measures what it buys. */
#ifndef ST_RUNTIME_PROGRESS_H
#define ST_RUNTIME_PROGRESS_H

typedef void (*st_progress_fn)(void);

/* The poller, or NULL for none.  Set before any compute starts. */
void st_progress_set(st_progress_fn fn);

extern st_progress_fn st_progress_poller;

/* Call only from the process's main thread (OpenMP thread 0 of a region
 * the main thread started).  Costs a load and a branch when nothing is
 * registered. */
static inline void st_progress_poll(void)
{
    if (st_progress_poller)
        st_progress_poller();
}

#endif
