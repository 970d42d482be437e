/* Process runtime: MPI start-up and shutdown and this process's identity.
 * The distributed issue extends it with Slurm/PMIx identity, process groups
 * and GPU binding; everything above asks it, never MPI directly. */
#ifndef ST_RUNTIME_H
#define ST_RUNTIME_H

typedef struct {
    int rank, world;
    char host[256];
} st_runtime;

/* MPI_Init_thread (FUNNELED: only the main thread calls MPI; OpenMP threads
 * compute).  Returns an exit status. */
int st_runtime_init(st_runtime *rt, int *argc, char ***argv);
void st_runtime_finalize(void);
/* Abort every rank with status (a rank that fails alone must not leave the
 * others waiting). */
void st_runtime_abort(int status) __attribute__((noreturn));

#endif
