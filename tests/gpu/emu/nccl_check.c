/* The emulated NCCL's check of NCCL's contract (nccl_mpi.c, agree) on
 * small two- and three-rank programs: every rank of a communicator must
 * issue the same collectives in the same order, with the same count, type
 * and reduction, and ranks must not wait for each other in a cycle across
 * communicators (nccl_waits.c).  Each case below is one way to break that
 * (or a form that keeps it, however late some rank is), so that
 * tests/cuda_races_emu.sh can show the check names every kind with one
 * line where a GPU would hang or move the wrong bytes.  Built by
 * tests/cuda_races_emu.sh with shim_c.h force-included, as comm_nccl.c is for
 * the emulated shardtrain, and linked with nccl_mpi.c, devmem.c, streams.c,
 * nccl_waits.c, nccl_wait_cycle.c and races.c.  Communicators are made the way comm_nccl.c
 * makes them: group rank 0's ncclUniqueId sent to the group over MPI.
 *
 *   nccl_check --list   one line per case: NAME RANKS EXPECT WHAT, where
 *                       EXPECT is ok (every rank runs to its end, with the
 *                       sums right) or abort (a "cuda emulation: nccl...:"
 *                       line on stderr holding each word of WHAT, '|' for a
 *                       space)
 *   nccl_check NAME     runs that case; start it on RANKS ranks (mpirun -np)
 */
#include <mpi.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 8 /* elements per rank */

static int world_rank, world_size;
static cudaStream_t stream;

static void must(int failed, const char *what)
{
    if (failed) {
        fprintf(stderr, "nccl_check: %s failed\n", what);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* A communicator over every rank. */
static ncclComm_t new_comm(void)
{
    ncclUniqueId id;
    if (world_rank == 0)
        must(ncclGetUniqueId(&id) != ncclSuccess, "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c;
    must(ncclCommInitRank(&c, world_size, id, world_rank) != ncclSuccess, "ncclCommInitRank");
    return c;
}

/* A communicator over world ranks lo < hi.  Every other rank makes one of
 * its own at the same time, because the emulated ncclCommInitRank splits
 * the world; each group's root is its lowest rank, whose id every rank
 * receives. */
static ncclComm_t pair_comm(int lo, int hi)
{
    const int in = world_rank == lo || world_rank == hi;
    ncclUniqueId own, *ids = malloc(sizeof *ids * (size_t)world_size);
    must(!ids, "malloc");
    must(ncclGetUniqueId(&own) != ncclSuccess, "ncclGetUniqueId");
    MPI_Allgather(&own, sizeof own, MPI_BYTE, ids, sizeof own, MPI_BYTE, MPI_COMM_WORLD);
    ncclComm_t c;
    must(ncclCommInitRank(&c, in ? 2 : 1, ids[in ? lo : world_rank], world_rank == hi) !=
             ncclSuccess,
         "ncclCommInitRank");
    free(ids);
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

/* Waits for the stream, then aborts unless each of the first n elements
 * of the device buffer is want. */
static void expect_every(const float *buf, int n, float want)
{
    float host[4 * N];
    must(cudaStreamSynchronize(stream) != cudaSuccess, "cudaStreamSynchronize");
    must(cudaMemcpy(host, buf, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost) !=
             cudaSuccess,
         "cudaMemcpy");
    for (int i = 0; i < n; i++)
        if (host[i] != want) {
            fprintf(stderr, "nccl_check: element %d is %g, not %g\n", i, (double)host[i],
                    (double)want);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
}

/* Rank `late` computes for a second and a half: long enough for the
 * board's quarter-second looks to see the others wait several times. */
static void make_late(int late)
{
    if (world_rank == late) {
        struct timespec pause = {1, 500000000};
        nanosleep(&pause, NULL);
    }
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
    all_reduce(a, buf, N, ncclFloat32);
    must(ncclAllGather(buf, gathered, N, ncclFloat32, a, stream) != ncclSuccess,
         "ncclAllGather");
    must(ncclReduceScatter(gathered, scattered, N / 2, ncclFloat32, ncclSum, a, stream) !=
             ncclSuccess,
         "ncclReduceScatter");
    /* 1 + 2 = 3 everywhere after the all-reduce and the gather; the
     * reduce-scatter sums the two ranks' copies: 6. */
    expect_every(scattered, N / 2, 6.0f);
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

/* Three pair communicators, each rank in two, each rank issuing its two in
 * an order that closes a cycle: 0 waits for 1 on {0,1}, 1 for 2 on {1,2},
 * 2 for 0 on {0,2}.  No two ranks cross each other; only the whole is a
 * deadlock. */
static void case_cycle3(ncclComm_t a)
{
    (void)a;
    ncclComm_t ab = pair_comm(0, 1), bc = pair_comm(1, 2), ca = pair_comm(0, 2);
    float *buf = device_floats(N, 1);
    ncclComm_t first[3] = {ab, bc, ca}, second[3] = {ca, ab, bc};
    all_reduce(first[world_rank], buf, N, ncclFloat32);
    all_reduce(second[world_rank], buf, N, ncclFloat32);
}

/* A chain of waits that resolves: 0 waits for 1 on {0,1}, 1 waits for 2 on
 * {1,2}, and 2 computes for a second and a half before it issues.  The
 * board sees the chain several times; it is no cycle, so every rank runs to
 * its end.  The sums: {1,2} adds 1 + 1, then {0,1} adds 1 + 2. */
static void case_chain(ncclComm_t a)
{
    (void)a;
    ncclComm_t ab = pair_comm(0, 1), bc = pair_comm(1, 2);
    float *buf = device_floats(N, 1);
    make_late(2);
    if (world_rank >= 1)
        all_reduce(bc, buf, N, ncclFloat32);
    if (world_rank <= 1)
        all_reduce(ab, buf, N, ncclFloat32);
    expect_every(buf, N, world_rank == 2 ? 2.0f : 3.0f);
}

/* Ranks 0 and 1 issue an all-reduce over all three ranks at once, and
 * both wait while rank 2 computes for a second and a half.  Each of them
 * waits on a communicator that holds the other, but the other has issued
 * its collective already: no wait between them, no cycle (a board that
 * ignored what a rank has issued would see 0 and 1 waiting for each
 * other).  The sum is 3. */
static void case_one_late(ncclComm_t a)
{
    float *buf = device_floats(N, 1);
    make_late(2);
    all_reduce(a, buf, N, ncclFloat32);
    expect_every(buf, N, 3.0f);
}

/* Rank 1 never issues the all-reduce: it waits in an MPI barrier, which is
 * not on the board, so only the wait limit can end rank 0's wait. */
static void case_never(ncclComm_t a)
{
    float *buf = device_floats(N, 1);
    if (world_rank == 0)
        all_reduce(a, buf, N, ncclFloat32);
    MPI_Barrier(MPI_COMM_WORLD);
}

static const struct {
    const char *name;
    int ranks;
    const char *expect, *what;
    void (*run)(ncclComm_t);
} cases[] = {
    {"same_calls", 2, "ok", "", case_match},
    {"count_differs", 2, "abort", "differs|between|ranks all_reduce|of|8 all_reduce|of|9",
     case_count},
    {"op_differs", 2, "abort", "differs|between|ranks all_gather reduce_scatter", case_op},
    {"type_differs", 2, "abort", "differs|between|ranks fp32 bf16", case_type},
    {"communicators_crossed", 2, "abort",
     "can|never|run world|rank|0 world|rank|1 different|orders deadlock", case_order},
    {"cycle_of_three", 3, "abort",
     "can|never|run world|rank|0 world|rank|1 world|rank|2 different|orders", case_cycle3},
    {"chain_resolves", 3, "ok", "", case_chain},
    {"two_wait_for_one", 3, "ok", "", case_one_late},
    {"never_issued", 2, "abort", "waited never|issues", case_never},
};

int main(int argc, char **argv)
{
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < n_cases; i++)
            printf("%s %d %s %s\n", cases[i].name, cases[i].ranks, cases[i].expect,
                   cases[i].what);
        return 0;
    }
    int which = -1;
    for (int i = 0; argc == 2 && i < n_cases; i++)
        if (!strcmp(argv[1], cases[i].name))
            which = i;
    if (which < 0) {
        fprintf(stderr, "usage: nccl_check --list | nccl_check NAME (on its ranks)\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size != cases[which].ranks) {
        fprintf(stderr, "nccl_check: run %s on %d ranks, not %d\n", cases[which].name,
                cases[which].ranks, world_size);
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
