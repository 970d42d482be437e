/* Collective communication within one process group, behind one
 * interface with two backends:
 *   mpi  - host buffers; MPI's non-blocking collectives, so a gather issued
 *          ahead of time (prefetch) proceeds while the unit before it
 *          computes;
 *   nccl - device buffers; one NCCL communicator per group, bootstrapped by
 *          broadcasting the group rank 0's ncclUniqueId over the group's MPI
 *          communicator; collectives run on a dedicated CUDA stream and
 *          completion is an event the compute stream waits on.
 * The engine sees only this header: it never knows which backend runs.
 *
 * Every collective is non-blocking: it starts the operation and fills a
 * request; st_comm_wait makes the result visible to the caller (for nccl,
 * to work later enqueued on the compute stream, without a host sync).
 * Reductions are sums; the engine folds the mean into its gradient scale.
 *
 * Every collective carries a description in words (st_comm_desc) and the
 * caller's step (st_comm.step), so that a backend that gives up on a
 * collective (the mpi backend's watchdog, watchdog.h) can say which one;
 * nothing is formatted unless that happens. */
#ifndef ST_COMM_H
#define ST_COMM_H

#include <stdint.h>

#include "base/dtype.h"

typedef struct st_comm st_comm;

/* What a collective carries, for messages: {"unit", 3} reads "unit 3",
 * {"the loss", -1} reads "the loss". */
typedef struct {
    const char *what;
    int unit;      /* >= 0: printed after what */
} st_comm_desc;

static inline st_comm_desc st_desc(const char *what, int unit)
{
    st_comm_desc d = {what, unit};
    return d;
}

typedef struct {
    st_comm *comm;
    void *handle;  /* backend's: MPI_Request* or cudaEvent_t */
    int active;
    st_comm_desc desc;   /* set by the wrappers below */
    int64_t step;        /* comm->step when the collective started */
} st_comm_req;

/* Backend operations; each backend fills one table (comm_mpi.c,
 * comm_nccl.c). */
typedef struct {
    const char *name;
    int (*allgather)(st_comm *c, const void *send, void *recv, int64_t count,
                     st_dtype dt, st_comm_req *req);
    int (*reduce_scatter)(st_comm *c, const void *send, void *recv, int64_t count,
                          st_dtype dt, st_comm_req *req);
    int (*allreduce)(st_comm *c, void *buf, int64_t count, st_dtype dt,
                     st_comm_req *req);
    int (*wait)(st_comm_req *req);
    void (*destroy)(st_comm *c);
} st_comm_ops;

struct st_comm {
    const st_comm_ops *ops;
    int rank, size;
    const char *label;     /* "world", "shard", "replicate": for messages */
    int64_t step;          /* the caller's training step (1-based; 0 before the
                            * first), copied into each request for messages */
    void *impl;            /* backend state */
};

static inline void st_comm_describe(st_comm *c, st_comm_req *req, st_comm_desc d)
{
    req->desc = d;
    req->step = c->step;
}

/* recv[size * count] = concatenation of every rank's send[count]. */
static inline int st_comm_allgather(st_comm *c, const void *send, void *recv,
                                    int64_t count, st_dtype dt, st_comm_req *req,
                                    st_comm_desc d)
{
    st_comm_describe(c, req, d);
    return c->ops->allgather(c, send, recv, count, dt, req);
}
/* recv[count] = sum over ranks of send[rank * count .. (rank + 1) * count). */
static inline int st_comm_reduce_scatter(st_comm *c, const void *send, void *recv,
                                         int64_t count, st_dtype dt, st_comm_req *req,
                                         st_comm_desc d)
{
    st_comm_describe(c, req, d);
    return c->ops->reduce_scatter(c, send, recv, count, dt, req);
}
/* buf[count] = sum over ranks, in place. */
static inline int st_comm_allreduce(st_comm *c, void *buf, int64_t count,
                                    st_dtype dt, st_comm_req *req, st_comm_desc d)
{
    st_comm_describe(c, req, d);
    return c->ops->allreduce(c, buf, count, dt, req);
}
/* Complete a request; a request never started (active 0) is a no-op. */
static inline int st_comm_wait(st_comm_req *req)
{
    return req->active ? req->comm->ops->wait(req) : 0;
}
static inline void st_comm_destroy(st_comm *c)
{
    if (c)
        c->ops->destroy(c);
}

/* Blocking all-reduce (start and wait); returns an exit status. */
static inline int st_comm_allreduce_now(st_comm *c, void *buf, int64_t count,
                                        st_dtype dt, st_comm_desc d)
{
    st_comm_req r = {0};
    int rc = st_comm_allreduce(c, buf, count, dt, &r, d);
    return rc ? rc : st_comm_wait(&r);
}

#endif
