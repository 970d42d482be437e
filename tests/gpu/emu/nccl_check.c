/* The emulated NCCL's check of NCCL's contract (nccl_mpi.c, agree) on
 * small two-rank programs: every rank of a communicator must issue the same
 * collectives in the same order, with the same count, type and reduction.
 * Each case below is one way to break that (or the form that keeps it), so
 * that tests/cuda_races_emu.sh can show the check names every kind with
 * one line where a GPU would hang or move the wrong bytes.  Built by
 * tests/cuda_races_emu.sh with shim_c.h force-included, as comm_nccl.c is for
 * the emulated shardtrain, and linked with nccl_mpi.c, devmem.c, streams.c
 * and races.c.  Communicators are made the way comm_nccl.c makes them:
 * group rank 0's ncclUniqueId broadcast over MPI.
 *
 *   nccl_check --list   one line per case: NAME EXPECT WHAT, where EXPECT is
 *                       ok (both ranks run to their end, with the sums
 *                       right) or abort (a "cuda emulation: nccl...:" line
 *                       on stderr holding each word of WHAT, '|' for a
 *                       space)
 *   nccl_check NAME     runs that case; start it on two ranks (mpirun -np 2)
 */
#include <mpi.h>
#include <nccl.h>

#include <stdio.h>
#include <string.h>

#define N 8 /* elements per rank */

static int world_rank;
static cudaStream_t stream;

static void must(int failed, const char *what)
{
    if (failed) {
        fprintf(stderr, "nccl_check: %s failed\n", what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* A communicator over both ranks. */
static ncclComm_t new_comm(void)
{
    ncclUniqueId id;
    if (world_rank == 0)
        must(ncclGetUniqueId(&id) != ncclSuccess, "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c;
    must(ncclCommInitRank(&c, 2, id, world_rank) != ncclSuccess, "ncclCommInitRank");
    return c;
}

/* A device buffer of n fp32 (room for bf16 too), every element v. */
static float *device_floats(int n, float v)
{
    float host[4 * N], *d;
    for (int i = 0; i < n; i++)
        host[i] = v;
    must(cudaMalloc((void **)&d, sizeof(float) * (size_t)n) != cudaSuccess, "cudaMalloc");
    must(cudaMemcpy(d, host, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess,
         "cudaMemcpy");
    return d;
}

static void all_reduce(ncclComm_t c, float *buf, size_t count, ncclDataType_t t)
{
    must(ncclAllReduce(buf, buf, count, t, ncclSum, c, stream) != ncclSuccess, "ncclAllReduce");
}

/* The two ranks issue the same three collectives; the sums must be right. */
static void case_match(ncclComm_t a)
{
    float *buf = device_floats(N, (float)(world_rank + 1));
    float *gathered = device_floats(2 * N, 0);
    float *scattered = device_floats(N, 0);
    float host[2 * N];
    all_reduce(a, buf, N, ncclFloat32);
    must(ncclAllGather(buf, gathered, N, ncclFloat32, a, stream) != ncclSuccess,
         "ncclAllGather");
    must(ncclReduceScatter(gathered, scattered, N / 2, ncclFloat32, ncclSum, a, stream) !=
             ncclSuccess,
         "ncclReduceScatter");
    must(cudaStreamSynchronize(stream) != cudaSuccess, "cudaStreamSynchronize");
    must(cudaMemcpy(host, scattered, sizeof(float) * N / 2, cudaMemcpyDeviceToHost) !=
             cudaSuccess,
         "cudaMemcpy");
    /* 1 + 2 = 3 everywhere after the all-reduce and the gather; the
     * reduce-scatter sums the two ranks' copies: 6. */
    for (int i = 0; i < N / 2; i++)
        if (host[i] != 6.0f) {
            fprintf(stderr, "nccl_check: element %d is %g, not 6\n", i, (double)host[i]);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
}

/* Rank 1 reduces one element more than rank 0. */
static void case_count(ncclComm_t a)
{
    float *buf = device_floats(N + 1, 1);
    all_reduce(a, buf, N + (size_t)world_rank, ncclFloat32);
}

/* Rank 0 gathers where rank 1 reduce-scatters: buffers sized for each. */
static void case_op(ncclComm_t a)
{
    float *small = device_floats(N, 1), *large = device_floats(2 * N, 1);
    if (world_rank == 0)
        ncclAllGather(small, large, N, ncclFloat32, a, stream);
    else
        ncclReduceScatter(large, small, N, ncclFloat32, ncclSum, a, stream);
}

/* Rank 1 sends bf16 where rank 0 sends fp32. */
static void case_type(ncclComm_t a)
{
    float *buf = device_floats(N, 1);
    all_reduce(a, buf, N, world_rank ? ncclBfloat16 : ncclFloat32);
}

/* Two communicators over the same ranks, used in opposite orders. */
static void case_order(ncclComm_t a)
{
    ncclComm_t b = new_comm();
    float *buf = device_floats(N, 1);
    ncclComm_t first = world_rank ? b : a, second = world_rank ? a : b;
    all_reduce(first, buf, N, ncclFloat32);
    all_reduce(second, buf, N, ncclFloat32);
}

static const struct {
    const char *name, *expect, *what;
    void (*run)(ncclComm_t);
} cases[] = {
    {"same_calls", "ok", "", case_match},
    {"count_differs", "abort", "differs|between|ranks all_reduce|of|8 all_reduce|of|9", case_count},
    {"op_differs", "abort", "differs|between|ranks all_gather reduce_scatter", case_op},
    {"type_differs", "abort", "differs|between|ranks fp32 bf16", case_type},
    {"communicators_crossed", "abort", "waited another|order deadlock", case_order},
};

int main(int argc, char **argv)
{
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < n_cases; i++)
            printf("%s %s %s\n", cases[i].name, cases[i].expect, cases[i].what);
        return 0;
    }
    int which = -1;
    for (int i = 0; argc == 2 && i < n_cases; i++)
        if (!strcmp(argv[1], cases[i].name))
            which = i;
    if (which < 0) {
        fprintf(stderr, "usage: nccl_check --list | nccl_check NAME (on two ranks)\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        fprintf(stderr, "nccl_check: run it on two ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    must(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess,
         "cudaStreamCreateWithFlags");
    cases[which].run(new_comm());
    must(cudaStreamSynchronize(stream) != cudaSuccess, "cudaStreamSynchronize");
    printf("nccl_check: %s ran to the end on rank %d\n", cases[which].name, world_rank);
    MPI_Finalize();
    return 0;
}
