/* MPI start-up and identity (see runtime.h). */
#include "runtime.h"
#include "log.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int runtime_up;

int st_runtime_init(st_runtime *rt, int *argc, char ***argv)
{
    memset(rt, 0, sizeof *rt);
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        st_error(NULL, "MPI_Init_thread failed; hint: check the MPI installation");
        return ST_EXIT_FAILURE;
    }
    runtime_up = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt->world);
    if (gethostname(rt->host, sizeof rt->host - 1) != 0)
        strcpy(rt->host, "?");
    st_log_set_rank(rt->rank);
    if (provided < MPI_THREAD_FUNNELED) {
        st_error(NULL, "MPI provides thread level %d, shardtrain needs "
                 "MPI_THREAD_FUNNELED", provided);
        return ST_EXIT_FAILURE;
    }
    return 0;
}

void st_runtime_finalize(void)
{
    if (runtime_up)
        MPI_Finalize();
    runtime_up = 0;
}

void st_runtime_abort(int status)
{
    if (runtime_up) {
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size > 1)
            MPI_Abort(MPI_COMM_WORLD, status);
        MPI_Finalize();
    }
    exit(status);
}
