/* An NCCL for the emulated shardtrain (build_shardtrain.sh): the NCCL calls
 * of comm_nccl.c, renamed by shim_c.h, run as blocking MPI collectives on
 * the emulated device memory.  The emulation executes each call when it is
 * issued, so a collective is complete when its enqueueing call returns;
 * with every rank issuing the same sequence, that is also the order the
 * one communication stream imposes on a GPU.  So parallel.backend = nccl
 * trains end to end without a GPU (the numbers are checked against the mpi
 * backend by tests/cuda_nccl_emu.sh), and every collective is traced
 * (streams.c) with its communicator and stream, which is how the test
 * checks the order and the stream that comm_nccl.c promises.
 *
 * Communicators: ncclGetUniqueId names the group by its root's world rank
 * and a count, and ncclCommInitRank splits MPI_COMM_WORLD by that name.
 * The split is collective over the world, so this needs every process to
 * create its communicators in the same sequence, as groups.c does ("world",
 * "shard", "replicate" on every rank).  Not modelled: NCCL's concurrency
 * and its failures (a peer that never arrives blocks here as in MPI). */
#include <mpi.h>
#include <nccl.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

struct ncclComm {
    MPI_Comm comm;
    int index;     /* this process's index-th communicator, for the trace */
    int lo, hi;    /* the lowest and highest world rank of the group: which
                      nodes it spans, for bench/step_overlap.py's link */
};

static int n_ids, n_comms;
static MPI_Op bf16_sum = MPI_OP_NULL;

const char *emu_ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "emulated NCCL error";
}

ncclResult_t emu_ncclGetUniqueId(ncclUniqueId *id)
{
    int v[2] = {0, n_ids++};
    MPI_Comm_rank(MPI_COMM_WORLD, &v[0]);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, v, sizeof v);
    return ncclSuccess;
}

ncclResult_t emu_ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    int v[2];
    memcpy(v, id.internal, sizeof v);
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    /* Groups split in one call have distinct roots, so distinct colours. */
    if (MPI_Comm_split(MPI_COMM_WORLD, v[0] * 4096 + v[1], rank, &c->comm) != MPI_SUCCESS) {
        free(c);
        return ncclSystemError;
    }
    int size = 0;
    MPI_Comm_size(c->comm, &size);
    if (size != nranks)
        emu_die("ncclCommInitRank", "the group's size is not nranks");
    c->index = n_comms++;
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Allreduce(&me, &c->lo, 1, MPI_INT, MPI_MIN, c->comm);
    MPI_Allreduce(&me, &c->hi, 1, MPI_INT, MPI_MAX, c->comm);
    emu_trace("comm %d size %d", c->index, size);
    *out = c;
    return ncclSuccess;
}

ncclResult_t emu_ncclCommDestroy(ncclComm_t c)
{
    MPI_Comm_free(&c->comm);
    free(c);
    return ncclSuccess;
}

ncclResult_t emu_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    (void)c;
    *e = ncclSuccess;
    return ncclSuccess;
}

/* bf16 words summed in fp32 and rounded to nearest even, as NCCL's bf16
 * reduction does per pair. */
static float widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t narrow(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = narrow(widen(a[i]) + widen(b[i]));
}

static size_t elem_size(ncclDataType_t t)
{
    switch (t) {
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    case ncclBfloat16: return 2;
    default: return 0;
    }
}

static MPI_Datatype mpi_type(ncclDataType_t t)
{
    return t == ncclFloat64 ? MPI_DOUBLE : t == ncclBfloat16 ? MPI_UINT16_T : MPI_FLOAT;
}

static MPI_Op sum_of(ncclDataType_t t)
{
    if (t != ncclBfloat16)
        return MPI_SUM;
    if (bf16_sum == MPI_OP_NULL)
        MPI_Op_create(bf16_sum_fn, 1, &bf16_sum);
    return bf16_sum;
}

/* The checks every collective makes before it runs: a type this shim
 * knows, a live stream, device buffers of the right sizes, and the race
 * check's record of what it reads and writes.  Then the
 * trace line, and the launch record's (devmem.c)
 *   nccl OP STREAM COUNT ELEM RANKS LO HI
 * with NCCL's count (per rank for all_gather and reduce_scatter) and the
 * group's lowest and highest world rank, so bench/step_overlap.py can
 * place the collective on its stream and price it on the link it crosses
 * (ranks are placed on nodes in blocks, as Slurm's default distribution
 * does: a group lies inside one node when LO and HI do).  Returns 1 when the collective must not move data: in
 * record-only mode no device page exists to move. */
static int prologue(const char *call, const char *op, size_t count, ncclComm_t c,
                    cudaStream_t s, ncclDataType_t t, ncclRedOp_t red, const void *send,
                    size_t send_n, const void *recv, size_t recv_n)
{
    if (!elem_size(t))
        emu_die(call, "a data type the emulation does not model");
    if (red != ncclSum)
        emu_die(call, "a reduction other than ncclSum");
    emu_stream_check(s, call);
    if (send_n)
        emu_dev_range(send, send_n * elem_size(t), call, "send buffer");
    if (recv_n)
        emu_dev_range(recv, recv_n * elem_size(t), call, "receive buffer");
    /* The race check (races.c): the collective is an operation on s that
     * reads the send buffer and writes the receive buffer. */
    emu_race_op((uintptr_t)s, call);
    if (send_n)
        emu_race_access(send, 0);
    if (recv_n)
        emu_race_access(recv, 1);
    emu_trace("nccl %s %d %d %zu %zu", op, c->index, (int)(uintptr_t)s, count, elem_size(t));
    int size = 0;
    MPI_Comm_size(c->comm, &size);
    emu_rec("nccl\t%s\t%d\t%zu\t%zu\t%d\t%d\t%d", op, (int)(uintptr_t)s, count,
            elem_size(t), size, c->lo, c->hi);
    return emu_rec_only();
}

static ncclResult_t done(int mpi_rc)
{
    emu_dev_close();
    return mpi_rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t emu_ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclComm_t c, cudaStream_t s)
{
    int size = 0, rank = 0;
    MPI_Comm_size(c->comm, &size);
    MPI_Comm_rank(c->comm, &rank);
    if (prologue("ncclAllGather", "all_gather", count, c, s, t, ncclSum, send, count, recv,
                 count * (size_t)size))
        return ncclSuccess;
    const size_t b = count * elem_size(t);
    emu_dev_open();
    /* NCCL's in place: send is this rank's slice of recv. */
    const void *in = send == (const char *)recv + (size_t)rank * b ? MPI_IN_PLACE : send;
    return done(MPI_Allgather(in, (int)count, mpi_type(t), recv, (int)count, mpi_type(t),
                              c->comm));
}

ncclResult_t emu_ncclReduceScatter(const void *send, void *recv, size_t count,
                                   ncclDataType_t t, ncclRedOp_t red, ncclComm_t c,
                                   cudaStream_t s)
{
    int size = 0, rank = 0;
    MPI_Comm_size(c->comm, &size);
    MPI_Comm_rank(c->comm, &rank);
    if (prologue("ncclReduceScatter", "reduce_scatter", count, c, s, t, red, send,
                 count * (size_t)size, recv, count))
        return ncclSuccess;
    const size_t b = count * elem_size(t);
    if ((const char *)recv < (const char *)send + b * (size_t)size &&
        (const char *)send < (const char *)recv + b &&
        recv != (const char *)send + (size_t)rank * b)
        emu_die("ncclReduceScatter", "receive buffer overlaps the send buffer");
    emu_dev_open();
    int rc;
    if (recv == (const char *)send + (size_t)rank * b) {
        /* NCCL's in place; MPI has none for this shape. */
        void *tmp = malloc(b ? b : 1);
        rc = MPI_Reduce_scatter_block(send, tmp, (int)count, mpi_type(t), sum_of(t), c->comm);
        memcpy(recv, tmp, b);
        free(tmp);
    } else {
        rc = MPI_Reduce_scatter_block(send, recv, (int)count, mpi_type(t), sum_of(t), c->comm);
    }
    return done(rc);
}

ncclResult_t emu_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t red, ncclComm_t c, cudaStream_t s)
{
    if (prologue("ncclAllReduce", "all_reduce", count, c, s, t, red, send, count, recv, count))
        return ncclSuccess;
    emu_dev_open();
    return done(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count,
                              mpi_type(t), sum_of(t), c->comm));
}
