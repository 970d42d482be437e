/* The mpi communication backend (see comm.h): host buffers and MPI's
 * non-blocking collectives.  bf16 travels as 16-bit words and is summed by
 * a user-defined MPI operation that accumulates each pair in fp32 and
 * rounds the result back, as a bf16 reduction on a GPU would.
 *
 * Every wait goes through the collective watchdog (watchdog.h): it polls
 * with the deadline parallel.timeout_s and, when a rank never arrives,
 * reports the collective in the words of the request's st_comm_desc and
 * ends the process.  A collective that cannot start because MPI reports an
 * error (a broken link to a dead peer) takes the same way out. */
#include "comm_backends.h"
#include "alloc.h"
#include "log.h"
#include "watchdog.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    MPI_Comm comm;
    int wd;                /* watchdog id */
} mpi_state;

/* A request's handle: the MPI request and what the watchdog needs. */
typedef struct {
    MPI_Request r;
    uint64_t seq;
    const char *op;
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

/* Every collective: count it for the watchdog, allocate its handle. */
static mpi_req *begin(st_comm *c, st_comm_req *req, const char *op)
{
    mpi_state *s = c->impl;
    mpi_req *h = malloc(sizeof *h);
    if (!h) {
        st_error(NULL, "out of memory for a %s request on the %s group", op, c->label);
        return NULL;
    }
    h->seq = st_watchdog_enter(s->wd);
    h->op = op;
    req->comm = c;
    req->handle = h;
    return h;
}

static int start(st_comm *c, st_comm_req *req, int mpi_rc)
{
    mpi_req *h = req->handle;
    if (mpi_rc != MPI_SUCCESS) {
        st_wd_op w = wd_op(req, h->op);
        st_watchdog_fail(((mpi_state *)c->impl)->wd, h->seq, &w, mpi_rc);
    }
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
    return start(c, req, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dt),
                                        sum_op(dt), s->comm, &h->r));
}

/* Returns only when the collective completed (see watchdog.h). */
static int mpi_wait(st_comm_req *req)
{
    mpi_req *h = req->handle;
    st_wd_op w = wd_op(req, h->op);
    st_watchdog_wait(&h->r, ((mpi_state *)req->comm->impl)->wd, h->seq, &w);
    free(h);
    req->handle = NULL;
    req->active = 0;
    return 0;
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

st_comm *st_comm_mpi_create(MPI_Comm group, const char *label)
{
    if (bf16_sum_op == MPI_OP_NULL)
        MPI_Op_create(bf16_sum, 1, &bf16_sum_op);
    st_comm *c = calloc(1, sizeof *c);
    mpi_state *s = calloc(1, sizeof *s);
    if (!c || !s || MPI_Comm_dup(group, &s->comm) != MPI_SUCCESS) {
        st_error(NULL, "cannot create the %s communicator", label);
        free(c);
        free(s);
        return NULL;
    }
    MPI_Comm_rank(s->comm, &c->rank);
    MPI_Comm_size(s->comm, &c->size);
    /* Same creation order on every rank, so the same id on every member. */
    s->wd = st_watchdog_register(s->comm);
    c->ops = &mpi_ops;
    c->label = label;
    c->impl = s;
    return c;
}
