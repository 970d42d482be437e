/* The nccl communication backend (see comm.h): device buffers, one NCCL
 * communicator per process group, and one communication stream that all
 * of them share.
 *
 * One stream, so no deadlock between groups.  NCCL does not promise that
 * two communicators make progress at the same time: a collective of one
 * can occupy the device until its peers arrive, while a peer waits in a
 * collective of the other.  With hybrid_shard a unit's gradient goes
 * through two groups, the reduce-scatter over the shard group and then the
 * all-reduce of the result over the replicate group (engine/fsdp.c,
 * reduce_start and reduce_finish), and the next unit's all-gather or
 * reduce-scatter is issued meanwhile.  Every communicator of the process
 * enqueues on the same stream, so the device runs this process's
 * collectives one at a time in the order the host issued them, and every
 * rank issues the engine's schedule in the same order: the reduce-scatter
 * of unit u (shard group) before the all-reduce of unit u (replicate
 * group), each before any collective issued after it.  No collective can
 * then wait on a peer that is stuck in another group's collective.  The
 * price: a gather issued ahead (prefetch) does not overlap a reduction in
 * flight on the device; both still overlap compute.  docs/gpu.md says the
 * same for users.
 *
 * Priority.  The stream is created with the device's greatest priority
 * (cudaDeviceGetStreamPriorityRange), above the compute stream (created
 * with the default, the least), so the scheduler starts a collective's
 * blocks as soon as its inputs are ready instead of behind queued compute.
 *
 * Ordering with compute.  Before each collective an event is recorded on
 * the compute stream and the communication stream waits on it, so the
 * collective sees everything enqueued earlier on the compute stream.  After
 * the collective an event is recorded on the communication stream;
 * st_comm_wait makes the compute stream wait on that event (no host
 * synchronisation) and returns the event to the communicator's pool.  The
 * caller must not reuse or free the buffers of a collective before waiting
 * on its request.
 *
 * The compute stream is each communicator's, given to its constructor: the
 * stream of the kernels instance computing on the same memory, or the
 * legacy default stream (NULL) where nothing else computes (bench-comm
 * without a kernels instance, runtime-info).  This backend is not
 * thread-safe: one thread drives all communicators of a process, which is
 * also what makes the issue order the stream's order. */
#include "st_build.h"

#include "comm/comm_backends.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

#if defined(HAVE_NCCL) && defined(HAVE_CUDA)

#include <cuda_runtime_api.h>
#include <nccl.h>

/* The communication stream of every communicator of the process, created
 * with the first and destroyed with the last. */
static cudaStream_t comm_stream;
static int comm_stream_users;

typedef struct {
    ncclComm_t nccl;
    cudaStream_t stream;     /* comm_stream once acquired, else NULL */
    cudaStream_t compute;    /* produces collective inputs, consumes their results */
    cudaEvent_t ready;       /* recorded on the compute stream per collective */
    cudaEvent_t *all;        /* every pooled event created, for destroy */
    cudaEvent_t *idle;       /* pooled events not held by a request */
    int nall, nidle, cap;
} nccl_state;

static int cuda_failed(cudaError_t e, const char *call, const char *label)
{
    if (e == cudaSuccess)
        return 0;
    st_error(NULL, "%s for the %s group failed: %s; hint: check the CUDA device "
             "and driver (nvidia-smi)", call, label, cudaGetErrorString(e));
    return 1;
}

static int nccl_failed(ncclResult_t r, const char *call, const char *label)
{
    if (r == ncclSuccess)
        return 0;
    st_error(NULL, "%s on the %s group failed: %s; hint: rerun with NCCL_DEBUG=WARN "
             "for details", call, label, ncclGetErrorString(r));
    return 1;
}

static ncclDataType_t nccl_type(st_dtype dt)
{
    switch (dt) {
    case ST_DT_BF16: return ncclBfloat16;
    case ST_DT_F64: return ncclFloat64;
    case ST_DT_F32:
    default: return ncclFloat32;
    }
}

/* A timing-free event from the pool, created on demand.  0 on success. */
static int event_get(st_comm *c, cudaEvent_t *ev)
{
    nccl_state *s = c->impl;
    if (s->nidle > 0) {
        *ev = s->idle[--s->nidle];
        return 0;
    }
    if (s->nall == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        cudaEvent_t *all = realloc(s->all, (size_t)cap * sizeof *all);
        if (!all)
            goto oom;
        s->all = all;
        cudaEvent_t *idle = realloc(s->idle, (size_t)cap * sizeof *idle);
        if (!idle)
            goto oom;
        s->idle = idle;
        s->cap = cap;
    }
    if (cuda_failed(cudaEventCreateWithFlags(ev, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags", c->label))
        return 1;
    s->all[s->nall++] = *ev;
    return 0;
oom:
    st_error(NULL, "out of memory for the events of the %s group", c->label);
    return 1;
}

/* Every idle event is also in all[], and cap >= nall, so this never
 * overflows. */
static void event_put(st_comm *c, cudaEvent_t ev)
{
    nccl_state *s = c->impl;
    s->idle[s->nidle++] = ev;
}

/* Make the communication stream wait for the work enqueued so far on the
 * compute stream.  The ready event may be re-recorded at once: a wait
 * already enqueued is not affected by later records. */
static int order_after_compute(st_comm *c)
{
    nccl_state *s = c->impl;
    if (cuda_failed(cudaEventRecord(s->ready, s->compute), "cudaEventRecord",
                    c->label))
        return 1;
    return cuda_failed(cudaStreamWaitEvent(s->stream, s->ready, 0),
                       "cudaStreamWaitEvent", c->label);
}

/* After the collective was enqueued (r): record its completion event and
 * fill the request. */
static int finish(st_comm *c, st_comm_req *req, cudaEvent_t ev, ncclResult_t r,
                  const char *call)
{
    nccl_state *s = c->impl;
    if (nccl_failed(r, call, c->label)
        || cuda_failed(cudaEventRecord(ev, s->stream), "cudaEventRecord", c->label)) {
        event_put(c, ev);
        return ST_EXIT_FAILURE;
    }
    req->comm = c;
    req->handle = (void *)ev;
    req->active = 1;
    return 0;
}

/* Common prologue: count check, completion event, ordering.  0 on
 * success. */
static int begin(st_comm *c, int64_t count, const char *what, cudaEvent_t *ev)
{
    if (count < 0) {
        st_error(NULL, "%s of %lld elements on the %s group: negative count",
                 what, (long long)count, c->label);
        return 1;
    }
    if (event_get(c, ev))
        return 1;
    if (order_after_compute(c)) {
        event_put(c, *ev);
        return 1;
    }
    return 0;
}

static int nccl_allgather(st_comm *c, const void *send, void *recv, int64_t count,
                          st_dtype dt, st_comm_req *req)
{
    nccl_state *s = c->impl;
    cudaEvent_t ev;
    if (begin(c, count, "all-gather", &ev))
        return ST_EXIT_FAILURE;
    ncclResult_t r = ncclAllGather(send, recv, (size_t)count, nccl_type(dt), s->nccl,
                                   s->stream);
    return finish(c, req, ev, r, "ncclAllGather");
}

static int nccl_reduce_scatter(st_comm *c, const void *send, void *recv, int64_t count,
                               st_dtype dt, st_comm_req *req)
{
    nccl_state *s = c->impl;
    cudaEvent_t ev;
    if (begin(c, count, "reduce-scatter", &ev))
        return ST_EXIT_FAILURE;
    ncclResult_t r = ncclReduceScatter(send, recv, (size_t)count, nccl_type(dt), ncclSum,
                                       s->nccl, s->stream);
    return finish(c, req, ev, r, "ncclReduceScatter");
}

static int nccl_allreduce(st_comm *c, void *buf, int64_t count, st_dtype dt,
                          st_comm_req *req)
{
    nccl_state *s = c->impl;
    cudaEvent_t ev;
    if (begin(c, count, "all-reduce", &ev))
        return ST_EXIT_FAILURE;
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, nccl_type(dt), ncclSum,
                                   s->nccl, s->stream);
    return finish(c, req, ev, r, "ncclAllReduce");
}

static int nccl_wait(st_comm_req *req)
{
    st_comm *c = req->comm;
    nccl_state *s = c->impl;
    cudaEvent_t ev = (cudaEvent_t)req->handle;
    int rc = 0;
    if (cuda_failed(cudaStreamWaitEvent(s->compute, ev, 0), "cudaStreamWaitEvent",
                    c->label))
        rc = ST_EXIT_FAILURE;
    /* The wait is enqueued: the event may be recorded again. */
    event_put(c, ev);
    req->handle = NULL;
    req->active = 0;
    /* A network failure is reported asynchronously; a cheap host query. */
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(s->nccl, &async);
    if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        r = async;
    if (nccl_failed(r, "collective (ncclCommGetAsyncError)", c->label))
        rc = ST_EXIT_FAILURE;
    return rc;
}

/* The shared communication stream, at the device's greatest priority
 * (numerically the least: CUDA counts priorities downwards). */
static int comm_stream_acquire(nccl_state *s, const char *label)
{
    if (!comm_stream_users) {
        int least = 0, greatest = 0;
        if (cuda_failed(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                        "cudaDeviceGetStreamPriorityRange", label)
            || cuda_failed(cudaStreamCreateWithPriority(&comm_stream, cudaStreamNonBlocking,
                                                        greatest),
                           "cudaStreamCreateWithPriority", label)) {
            comm_stream = NULL;
            return 1;
        }
    }
    comm_stream_users++;
    s->stream = comm_stream;
    return 0;
}

static void comm_stream_release(nccl_state *s)
{
    if (!s->stream)
        return;
    s->stream = NULL;
    if (--comm_stream_users == 0) {
        cudaStreamDestroy(comm_stream);
        comm_stream = NULL;
    }
}

/* Frees whatever of the state exists; nccl may be NULL. */
static void state_free(nccl_state *s, const char *label)
{
    if (!s)
        return;
    /* Teardown, not a step: what was enqueued finishes before the NCCL
     * communicator goes. */
    if (s->stream)
        cuda_failed(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize", label);
    if (s->nccl)
        nccl_failed(ncclCommDestroy(s->nccl), "ncclCommDestroy", label);
    for (int i = 0; i < s->nall; i++)
        cudaEventDestroy(s->all[i]);
    if (s->ready)
        cudaEventDestroy(s->ready);
    comm_stream_release(s);
    free(s->all);
    free(s->idle);
    free(s);
}

static void nccl_destroy(st_comm *c)
{
    state_free(c->impl, c->label);
    free(c);
}

static const st_comm_ops nccl_ops = {
    "nccl", nccl_allgather, nccl_reduce_scatter, nccl_allreduce, nccl_wait, nccl_destroy,
};

int st_comm_nccl_available(void)
{
    return 1;
}

st_comm *st_comm_nccl_create(MPI_Comm group, const char *label, void *compute_stream)
{
    st_comm *c = calloc(1, sizeof *c);
    nccl_state *s = calloc(1, sizeof *s);
    MPI_Comm dup = MPI_COMM_NULL;
    if (!c || !s || MPI_Comm_dup(group, &dup) != MPI_SUCCESS) {
        st_error(NULL, "cannot create the %s communicator (MPI_Comm_dup or out of "
                 "memory)", label);
        free(c);
        free(s);
        return NULL;
    }
    MPI_Comm_rank(dup, &c->rank);
    MPI_Comm_size(dup, &c->size);
    c->ops = &nccl_ops;
    c->label = label;
    c->impl = s;
    s->compute = (cudaStream_t)compute_stream;

    /* Local setup; rank 0 also makes the unique id. */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int ok = !comm_stream_acquire(s, label);
    if (ok && cuda_failed(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming),
                          "cudaEventCreateWithFlags", label)) {
        s->ready = NULL;
        ok = 0;
    }
    if (ok && c->rank == 0 && nccl_failed(ncclGetUniqueId(&id), "ncclGetUniqueId", label))
        ok = 0;

    /* Agree before anyone blocks in ncclCommInitRank, so a rank that failed
     * above does not leave the others waiting for it. */
    int all_ok = 0;
    int mrc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, dup);
    if (mrc != MPI_SUCCESS) {
        st_error(NULL, "MPI_Allreduce while creating the NCCL %s communicator failed "
                 "(MPI error %d)", label, mrc);
        goto fail;
    }
    if (!all_ok) {
        if (ok)
            st_error(NULL, "cannot create the NCCL %s communicator: another rank of "
                     "the group failed; hint: see that rank's error", label);
        goto fail;
    }
    mrc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, dup);
    if (mrc != MPI_SUCCESS) {
        st_error(NULL, "MPI_Bcast of the ncclUniqueId for the %s group failed "
                 "(MPI error %d)", label, mrc);
        goto fail;
    }
    if (nccl_failed(ncclCommInitRank(&s->nccl, c->size, id, c->rank), "ncclCommInitRank",
                    label)) {
        s->nccl = NULL;
        goto fail;
    }
    MPI_Comm_free(&dup);
    return c;

fail:
    MPI_Comm_free(&dup);
    state_free(s, label);
    free(c);
    return NULL;
}

#else /* no NCCL or no CUDA */

int st_comm_nccl_available(void)
{
    return 0;
}

st_comm *st_comm_nccl_create(MPI_Comm group, const char *label, void *compute_stream)
{
    (void)group;
    (void)label;
    (void)compute_stream;
    st_error(NULL, "parallel.backend = nccl, but this build has no NCCL; "
             "hint: install NCCL and reconfigure, or use backend = mpi");
    return NULL;
}

#endif
