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
 * "shard", "replicate" on every rank).
 *
 * NCCL's contract, checked before every collective (agree): each rank of
 * a communicator issues the same collectives in the same order, with the
 * same count, type and reduction.  On a GPU a rank that breaks it hangs
 * the group or moves the wrong bytes without a word, and MPI underneath
 * would hang, truncate or mix two collectives.  So the ranks first compare
 * what they are about to issue, and a difference aborts with one line
 * naming both ranks' calls.  Ranks that issue their communicators'
 * collectives in different orders, which NCCL may deadlock on, wait for
 * each other forever: while a rank waits for its peers it reads the board
 * of waits (nccl_waits.c), and a cycle of waits that stands aborts with a
 * line naming every rank on it.  Peers that never issue the collective at
 * all are caught by a limit on the wait (ST_EMU_NCCL_WAIT_S seconds,
 * default 300).  Not modelled: NCCL's concurrency and its failures. */
#include <mpi.h>
#include <nccl.h>

#include "nccl_waits.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

struct ncclComm {
    MPI_Comm comm;
    int index;     /* this process's index-th communicator, for the trace */
    int colour;    /* its name in every process: the split's colour */
    int size, rank; /* the group's size and this process's rank in it */
    long issued;   /* collectives issued on it so far, for agree's lines */
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
    /* The board of waits is collective over the world too, and the first
     * communicator is made on every rank. */
    if (!n_comms)
        emu_waits_init();
    /* Groups split in one call have distinct roots, so distinct colours. */
    c->colour = v[0] * 4096 + v[1];
    if (MPI_Comm_split(MPI_COMM_WORLD, c->colour, rank, &c->comm) != MPI_SUCCESS) {
        free(c);
        return ncclSystemError;
    }
    MPI_Comm_size(c->comm, &c->size);
    MPI_Comm_rank(c->comm, &c->rank);
    if (c->size != nranks)
        emu_die("ncclCommInitRank", "the group's size is not nranks");
    c->index = n_comms++;
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Allreduce(&me, &c->lo, 1, MPI_INT, MPI_MIN, c->comm);
    MPI_Allreduce(&me, &c->hi, 1, MPI_INT, MPI_MAX, c->comm);
    emu_waits_comm(c->colour, c->index);
    emu_trace("comm %d size %d", c->index, c->size);
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

/* What one rank is about to issue on a communicator, as agree compares
 * it: fixed-width fields, so that ranks exchange it as bytes. */
struct coll_call {
    char op[16];      /* all_gather, reduce_scatter, all_reduce */
    int32_t type;     /* ncclDataType_t */
    int32_t red;      /* ncclRedOp_t */
    uint64_t count;   /* NCCL's count: per rank for all_gather, reduce_scatter */
};

static const char *type_name(int32_t t)
{
    return t == ncclFloat32 ? "fp32" : t == ncclFloat64 ? "fp64" : t == ncclBfloat16 ? "bf16" : "?";
}

/* Seconds agree waits for a communicator's other ranks. */
static double wait_limit(void)
{
    const char *e = getenv("ST_EMU_NCCL_WAIT_S");
    double v = e ? atof(e) : 0;
    return v > 0 ? v : 300;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every rank of c says what it is about to issue; any difference, or
 * peers that do not come within wait_limit(), aborts (see the top). */
static void agree(const char *call, const char *op, size_t count, ncclComm_t c,
                  ncclDataType_t t, ncclRedOp_t red)
{
    const int size = c->size, rank = c->rank;
    long nth = ++c->issued;
    struct coll_call mine;
    memset(&mine, 0, sizeof mine);
    snprintf(mine.op, sizeof mine.op, "%s", op);
    mine.type = (int32_t)t;
    mine.red = (int32_t)red;
    mine.count = count;
    struct coll_call *all = calloc((size_t)size, sizeof *all);
    if (!all)
        emu_die(call, "out of host memory");
    MPI_Request req;
    emu_waits_begin(c->colour, nth);
    MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                   c->comm, &req);
    /* Poll, sleeping a little once the peers are late, so that waiting
     * ranks leave the cores to the ones still computing. */
    const double limit = wait_limit(), start = seconds_now();
    double next_look = start + 0.25;
    for (long spins = 0;; spins++) {
        int done_flag = 0;
        MPI_Test(&req, &done_flag, MPI_STATUS_IGNORE);
        if (done_flag)
            break;
        const double now = seconds_now();
        char cycle[1024];
        if (now >= next_look) {
            next_look = now + 0.25;
            if (emu_waits_cycle(cycle, sizeof cycle)) {
                char msg[1400];
                snprintf(msg, sizeof msg,
                         "collective %ld on communicator %d (%s of %zu %s) can never run: %s; "
                         "the ranks issue their communicators' collectives in different orders, "
                         "which NCCL may deadlock on",
                         nth, c->index, op, count, type_name(t), cycle);
                emu_die(call, msg);
            }
        }
        if (now - start > limit) {
            char msg[320];
            snprintf(msg, sizeof msg,
                     "collective %ld on communicator %d (%s of %zu %s, group rank %d of %d) "
                     "waited %g s for its peers: a rank never issues this collective, or "
                     "waits elsewhere in a way the board of waits cannot see; NCCL would hang "
                     "(ST_EMU_NCCL_WAIT_S sets the wait)",
                     nth, c->index, op, count, type_name(t), rank, size, limit);
            emu_die(call, msg);
        }
        if (spins > 1000) {
            struct timespec nap = {0, 100000};
            nanosleep(&nap, NULL);
        }
    }
    emu_waits_end();
    for (int r = 0; r < size; r++) {
        const struct coll_call *o = &all[r];
        if (!strncmp(o->op, mine.op, sizeof mine.op) && o->type == mine.type &&
            o->red == mine.red && o->count == mine.count)
            continue;
        char msg[400];
        snprintf(msg, sizeof msg,
                 "collective %ld on communicator %d differs between ranks: group rank %d "
                 "issues %.15s of %llu %s, group rank %d issues %.15s of %llu %s%s; NCCL needs "
                 "every rank of a communicator to issue the same collectives in the same order",
                 nth, c->index, rank, mine.op, (unsigned long long)mine.count,
                 type_name(mine.type), r, o->op, (unsigned long long)o->count,
                 type_name(o->type), o->red != mine.red ? " with another reduction" : "");
        free(all);
        emu_die(call, msg);
    }
    free(all);
}

/* The checks every collective makes before it runs: the ranks' agreement
 * on the call (agree), a type this shim knows, a live stream, device
 * buffers of the right sizes, and the race check's record of what it reads
 * and writes.  Then the trace line, and the launch record's (devmem.c)
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
    agree(call, op, count, c, t, red);
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
    emu_rec("nccl\t%s\t%d\t%zu\t%zu\t%d\t%d\t%d", op, (int)(uintptr_t)s, count,
            elem_size(t), c->size, c->lo, c->hi);
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
    const int size = c->size, rank = c->rank;
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
    const int size = c->size, rank = c->rank;
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
