/* The mpi communication backend (see comm.h): host buffers and MPI's
 * non-blocking collectives.  bf16 travels as 16-bit words and is summed by
 * a user-defined MPI operation that accumulates each pair in fp32 and
 * rounds the result back, as a bf16 reduction on a GPU would.
 *
 * Every wait goes through the collective watchdog (watchdog.h): it polls
 * with the deadline parallel.timeout_s and, when a rank never arrives,
 * reports the collective in the words of the request's st_comm_desc and
 * ends the process.  A collective that cannot start because MPI reports an
 * error (a broken link to a dead peer) takes the same way out.
 *
 * Staged (st_comm_mpi_create_staged): the buffers are GPU memory, which
 * this MPI cannot read, so each collective copies its input to host memory
 * (enqueued on the compute stream behind the work that wrote it), runs on
 * the copies, and its wait copies the result back.  Slow, with a wait for
 * the compute stream at each copy (never for the whole device), but it
 * lets ranks share one GPU and checks the sharded path on GPU memory where
 * only one GPU exists; nccl is the production path. */
#include "comm/comm_backends.h"
#include "base/alloc.h"
#include "runtime/device.h"
#include "base/log.h"
#include "runtime/progress.h"
#include "runtime/watchdog.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    MPI_Comm comm;
    int wd;                /* watchdog id */
    int staged;            /* buffers are device memory: stage through host */
    void *stream;          /* staged: the compute stream (cudaStream_t) */
    int poll;              /* requests progress during compute (group_polls) */
} mpi_state;

/* A request's handle: the MPI request and what the watchdog needs; when
 * staged, the host copies and where the result goes back to. */
typedef struct {
    MPI_Request r;
    uint64_t seq;
    const char *op;
    void *hsend, *hrecv;
    void *drecv;
    size_t recv_bytes;
} mpi_req;

static st_wd_op wd_op(const st_comm_req *req, const char *op)
{
    st_wd_op w = {op, req->desc.what, req->desc.unit, req->comm->label, req->step};
    return w;
}

static MPI_Op bf16_sum_op = MPI_OP_NULL;

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

static MPI_Datatype mpi_type(st_dtype dt)
{
    switch (dt) {
    case ST_DT_BF16: return MPI_UINT16_T;
    case ST_DT_F64: return MPI_DOUBLE;
    case ST_DT_F32:
    default: return MPI_FLOAT;
    }
}

static MPI_Op sum_op(st_dtype dt)
{
    return dt == ST_DT_BF16 ? bf16_sum_op : MPI_SUM;
}

/* MPI counts are int: a unit shard past 2^31 elements is refused rather
 * than silently truncated. */
static int check_count(st_comm *c, int64_t count, const char *what)
{
    if (count < 0 || count > INT_MAX / (c->size > 0 ? c->size : 1)) {
        st_error(NULL, "%s of %lld elements on the %s group exceeds MPI's count "
                 "limit; hint: use more ranks per shard group or backend = nccl",
                 what, (long long)count, c->label);
        return ST_EXIT_FAILURE;
    }
    return 0;
}

/* Requests in flight, for the progress poller (runtime/progress.h).  A
 * request past the first IN_FLIGHT_MAX is simply not polled: it still
 * completes in its wait. */
enum { IN_FLIGHT_MAX = 64 };
static MPI_Request *in_flight[IN_FLIGHT_MAX];
static int n_in_flight;

static void in_flight_add(MPI_Request *r)
{
    if (n_in_flight < IN_FLIGHT_MAX)
        in_flight[n_in_flight++] = r;
}

static void in_flight_remove(MPI_Request *r)
{
    for (int i = 0; i < n_in_flight; i++)
        if (in_flight[i] == r) {
            in_flight[i] = in_flight[--n_in_flight];
            return;
        }
}

/* MPI_Test drives Open MPI's progress engine; a request it completes
 * becomes MPI_REQUEST_NULL, which the later wait's MPI_Test reports done.
 * An error is left for that wait to report through the watchdog. */
static void mpi_progress(void)
{
    for (int i = 0; i < n_in_flight; i++) {
        int done = 0;
        MPI_Test(in_flight[i], &done, MPI_STATUS_IGNORE);
    }
}

/* Every collective: count it for the watchdog, allocate its handle. */
static mpi_req *begin(st_comm *c, st_comm_req *req, const char *op)
{
    mpi_state *s = c->impl;
    mpi_req *h = malloc(sizeof *h);
    if (!h) {
        st_error(NULL, "out of memory for a %s request on the %s group", op, c->label);
        return NULL;
    }
    memset(h, 0, sizeof *h);
    h->seq = st_watchdog_enter(s->wd);
    h->op = op;
    req->comm = c;
    req->handle = h;
    return h;
}

/* Staged collectives: host copies of send (send_bytes; NULL for in place)
 * and recv (recv_bytes, filled from the device when in place), swapped in
 * for the device pointers.  Returns an exit status. */
static int stage(st_comm *c, mpi_req *h, const void **send, size_t send_bytes, void **recv,
                 size_t recv_bytes)
{
    if (!((mpi_state *)c->impl)->staged)
        return 0;
    h->hsend = send ? malloc(send_bytes ? send_bytes : 1) : NULL;
    h->hrecv = malloc(recv_bytes ? recv_bytes : 1);
    if ((send && !h->hsend) || !h->hrecv) {
        st_error(NULL, "out of host memory staging a %s of %zu bytes on the %s group",
                 h->op, recv_bytes, c->label);
        return ST_EXIT_FAILURE;
    }
    void *stream = ((mpi_state *)c->impl)->stream;
    int rc = send ? st_device_copy_to_host(h->hsend, *send, send_bytes, stream)
                  : st_device_copy_to_host(h->hrecv, *recv, recv_bytes, stream);
    if (rc)
        return rc;
    h->drecv = *recv;
    h->recv_bytes = recv_bytes;
    if (send)
        *send = h->hsend;
    *recv = h->hrecv;
    return 0;
}

static void release_handle(st_comm_req *req)
{
    mpi_req *h = req->handle;
    if (h) {
        in_flight_remove(&h->r);
        free(h->hsend);
        free(h->hrecv);
        free(h);
    }
    req->handle = NULL;
    req->active = 0;
}

static int start(st_comm *c, st_comm_req *req, int mpi_rc)
{
    mpi_req *h = req->handle;
    if (mpi_rc != MPI_SUCCESS) {
        st_wd_op w = wd_op(req, h->op);
        st_watchdog_fail(((mpi_state *)c->impl)->wd, h->seq, &w, mpi_rc);
    }
    if (((mpi_state *)c->impl)->poll)
        in_flight_add(&h->r);
    req->active = 1;
    return 0;
}

static int mpi_allgather(st_comm *c, const void *send, void *recv, int64_t count,
                         st_dtype dt, st_comm_req *req)
{
    if (check_count(c, count, "all-gather"))
        return ST_EXIT_FAILURE;
    mpi_state *s = c->impl;
    mpi_req *h = begin(c, req, "all_gather");
    if (!h)
        return ST_EXIT_FAILURE;
    const size_t b = st_dtype_size(dt) * (size_t)count;
    if (stage(c, h, &send, b, &recv, b * (size_t)c->size)) {
        release_handle(req);
        return ST_EXIT_FAILURE;
    }
    return start(c, req, MPI_Iallgather(send, (int)count, mpi_type(dt), recv, (int)count,
                                        mpi_type(dt), s->comm, &h->r));
}

static int mpi_reduce_scatter(st_comm *c, const void *send, void *recv, int64_t count,
                              st_dtype dt, st_comm_req *req)
{
    if (check_count(c, count, "reduce-scatter"))
        return ST_EXIT_FAILURE;
    mpi_state *s = c->impl;
    mpi_req *h = begin(c, req, "reduce_scatter");
    if (!h)
        return ST_EXIT_FAILURE;
    const size_t b = st_dtype_size(dt) * (size_t)count;
    if (stage(c, h, &send, b * (size_t)c->size, &recv, b)) {
        release_handle(req);
        return ST_EXIT_FAILURE;
    }
    return start(c, req, MPI_Ireduce_scatter_block(send, recv, (int)count, mpi_type(dt),
                                                   sum_op(dt), s->comm, &h->r));
}

static int mpi_allreduce(st_comm *c, void *buf, int64_t count, st_dtype dt,
                         st_comm_req *req)
{
    if (check_count(c, count, "all-reduce"))
        return ST_EXIT_FAILURE;
    mpi_state *s = c->impl;
    mpi_req *h = begin(c, req, "all_reduce");
    if (!h)
        return ST_EXIT_FAILURE;
    if (stage(c, h, NULL, 0, &buf, st_dtype_size(dt) * (size_t)count)) {
        release_handle(req);
        return ST_EXIT_FAILURE;
    }
    return start(c, req, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dt),
                                        sum_op(dt), s->comm, &h->r));
}

/* Returns only when the collective completed (see watchdog.h). */
static int mpi_wait(st_comm_req *req)
{
    mpi_req *h = req->handle;
    st_wd_op w = wd_op(req, h->op);
    st_watchdog_wait(&h->r, ((mpi_state *)req->comm->impl)->wd, h->seq, &w);
    int rc = h->drecv ? st_device_copy_from_host(h->drecv, h->hrecv, h->recv_bytes,
                                                 ((mpi_state *)req->comm->impl)->stream)
                      : 0;
    release_handle(req);
    return rc;
}

static void mpi_destroy(st_comm *c)
{
    mpi_state *s = c->impl;
    st_watchdog_unregister(s->wd);
    MPI_Comm_free(&s->comm);
    free(s);
    free(c);
}

static const st_comm_ops mpi_ops = {
    "mpi", mpi_allgather, mpi_reduce_scatter, mpi_allreduce, mpi_wait, mpi_destroy,
};

/* Whether a group's collectives are polled during compute: only when the
 * group spans nodes, where a network card can move data while the CPU
 * computes and the poll lets the protocol take its next step.  Within one
 * node the copies are CPU work either way, and polling measured 3-5%
 * slower at gpt2-124m on 2 ranks (docs/benchmarks.md).  The testing aid
 * SHARDTRAIN_TEST_MPI_POLL=1 polls every group, so the suite runs the
 * polled path on one machine.  MPI_Comm_split_type is collective over the
 * group, as creation is. */
static int group_polls(MPI_Comm comm, int size)
{
    const char *force = getenv("SHARDTRAIN_TEST_MPI_POLL");
    if (force && strcmp(force, "1") == 0)
        return 1;
    MPI_Comm node;
    st_watchdog_blocking_begin("MPI_Comm_split_type (a group's node)", 0);
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    st_watchdog_blocking_end();
    if (rc != MPI_SUCCESS)
        return 0; /* polling is an optimisation: without it, waits still complete */
    int node_size = size;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    return node_size < size;
}

st_comm *st_comm_mpi_create(MPI_Comm group, const char *label)
{
    return st_comm_mpi_create_staged(group, label, 0, NULL);
}

st_comm *st_comm_mpi_create_staged(MPI_Comm group, const char *label, int staged,
                                   void *compute_stream)
{
    if (bf16_sum_op == MPI_OP_NULL)
        MPI_Op_create(bf16_sum, 1, &bf16_sum_op);
    st_comm *c = calloc(1, sizeof *c);
    mpi_state *s = calloc(1, sizeof *s);
    int dup_rc = MPI_ERR_OTHER;
    if (c && s) {
        /* Blocks inside MPI until every member calls it: bounded. */
        st_watchdog_blocking_begin("MPI_Comm_dup", 0);
        dup_rc = MPI_Comm_dup(group, &s->comm);
        st_watchdog_blocking_end();
    }
    if (dup_rc != MPI_SUCCESS) {
        st_error(NULL, "cannot create the %s communicator", label);
        free(c);
        free(s);
        return NULL;
    }
    MPI_Comm_rank(s->comm, &c->rank);
    MPI_Comm_size(s->comm, &c->size);
    /* Same creation order on every rank, so the same id on every member. */
    s->wd = st_watchdog_register(s->comm);
    s->staged = staged;
    s->stream = compute_stream;
    s->poll = group_polls(s->comm, c->size);
    if (s->poll)
        st_progress_set(mpi_progress);
    c->ops = &mpi_ops;
    c->label = label;
    c->impl = s;
    return c;
}
