/* Host emulation of the CUDA runtime calls of the C files of src/ that talk
 * to the device (kernels_cuda.c, device.c, comm_nccl.c), for the emulated
 * shardtrain of build_shardtrain.sh: force-included (cc -include) ahead of
 * the file, it includes the real runtime headers (types, enums) and then
 * maps every runtime call those files make onto host memory, in order
 * (the host runs each call to completion; races.c checks that streams
 * and events would order the same calls on a GPU).  Only
 * cudaGetErrorString stays the real libcudart's, which needs no device;
 * build_shardtrain.sh checks that the binary imports no other cuda*
 * symbol, so a call this header does not map is a link-time failure there.
 *
 * Device memory is host memory here, so the emulation also checks what a
 * GPU would fault on or silently get wrong, and dies naming the call:
 *   - every block from cudaMalloc / cudaMallocAsync comes from devmem.c's
 *     arena, which host code cannot touch outside the emulated runtime
 *     calls and kernels (PROT_NONE: a direct host access faults), is
 *     recorded, filled with 0xff bytes (a NaN pattern: cudaMallocAsync does
 *     not zero), and poisoned the same way when freed (never reused);
 *   - cudaMemcpy(Async) with an explicit direction must have its device
 *     side inside one recorded block and its host side outside all of them;
 *     cudaMemsetAsync must stay inside a recorded block; cudaFreeAsync must
 *     free a recorded block.
 * The table lives in devmem.c, shared by every translation unit and by
 * the kernels' side: shim.h registers the cudaMalloc blocks of the .cu
 * files and checks that every non-null pointer argument of a kernel launch
 * (and gemm_host.cpp every matrix) points into a device block, so a host
 * pointer handed to a kernel fails there.  cudaMemcpyDefault (by address)
 * is not checked.
 *
 * Streams, events and synchronisation are modelled by streams.c: distinct
 * handles checked on every use, stream priorities within an H100's range,
 * and a trace of every synchronisation (ST_EMU_TRACE, streams.c says what
 * it holds); and by races.c, which every device operation and ordering
 * call here also goes to: an access from one stream that nothing orders
 * after a conflicting access from another aborts, as a race on a GPU.  The NCCL calls of comm_nccl.c go to nccl_mpi.c, an NCCL made
 * of blocking MPI collectives, so the emulated binary runs
 * parallel.backend = nccl too. */
#ifndef ST_EMU_SHIM_C_H
#define ST_EMU_SHIM_C_H

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device memory and its block table (devmem.c), shared with the
 * kernels' side: shim.h checks every pointer argument of a launch against
 * it, and opens the arena around each launch. */
void *emu_dev_alloc_raw(size_t n);
void emu_dev_open(void);
void emu_dev_close(void);
void emu_dev_register(void *p, size_t n);
size_t emu_dev_unregister(void *p);
long emu_dev_find(const void *p, size_t n);
/* devmem.c's launch record (ST_EMU_RECORD, ST_EMU_RECORD_ONLY) */
int emu_rec_only(void);
void emu_rec(const char *fmt, ...);
static int emu_device;

/* Streams, events and the trace (streams.c). */
void emu_trace(const char *fmt, ...);
int emu_stream_new(int priority);
int emu_stream_known(uintptr_t s);
void emu_stream_gone(uintptr_t s);
int emu_event_new(void);
int emu_event_known(uintptr_t e);
void emu_event_gone(uintptr_t e);

/* The race check (races.c): each device operation enqueued on its stream
 * with the blocks it reads and writes, and every ordering call. */
#include "races.h"

static inline void emu_die(const char *call, const char *what)
{
    fprintf(stderr, "cuda emulation: %s: %s\n", call, what);
    abort();
}

static inline void *emu_dev_alloc(size_t n, const char *call)
{
    (void)call;
    return emu_dev_alloc_raw(n);
}

#define emu_find emu_dev_find
static inline void emu_dev_range(const void *p, size_t n, const char *call, const char *which)
{
    long i = emu_find(p, n);
    if (i >= 0)
        return;
    char msg[160];
    snprintf(msg, sizeof msg, "%s %p (+%zu bytes) is %s", which, p, n,
             i == -2 ? "past the end of its device block" : "not device memory");
    emu_die(call, msg);
}

static inline void emu_host_range(const void *p, size_t n, const char *call, const char *which)
{
    if (n && emu_find(p, 1) == -1 && emu_find((const char *)p + n - 1, 1) == -1)
        return;
    char msg[160];
    snprintf(msg, sizeof msg, "%s %p (+%zu bytes) is device memory", which, p, n);
    emu_die(call, msg);
}

static inline void emu_dev_free(void *p, const char *call)
{
    size_t n = emu_dev_unregister(p);
    if (!n)
        emu_die(call, "not the start of a device block");
    if (emu_rec_only())
        return;
    emu_dev_open();
    memset(p, 0xff, n); /* poisoned; the arena never hands it out again */
    emu_dev_close();
}

/* One device, or ST_EMU_DEVICES of them (up to 16), so ranks that need a
 * device each (parallel.backend = nccl) can run on one machine: every
 * process has its own arena, so each rank's device is its own anyway.  16
 * lets bench/step_walk.sh walk two nodes' worth of ranks on one host. */
static inline int emu_device_count(void)
{
    const char *e = getenv("ST_EMU_DEVICES");
    int n = e ? atoi(e) : 1;
    return n >= 1 && n <= 16 ? n : 1;
}
static inline cudaError_t emu_c_cudaGetDeviceCount(int *n)
{
    *n = emu_device_count();
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaSetDevice(int d)
{
    if (d < 0 || d >= emu_device_count())
        return cudaErrorInvalidDevice;
    emu_device = d;
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaGetDevice(int *d) { *d = emu_device; return cudaSuccess; }
static inline void emu_stream_check(cudaStream_t s, const char *call)
{
    if (!emu_stream_known((uintptr_t)s))
        emu_die(call, "not a live stream");
}
static inline void emu_event_check(cudaEvent_t e, const char *call)
{
    if (!emu_event_known((uintptr_t)e))
        emu_die(call, "not a live event");
}
/* An H100's range; lower numbers are higher priorities. */
enum { EMU_PRIORITY_LEAST = 0, EMU_PRIORITY_GREATEST = -5 };
static inline cudaError_t emu_c_cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    if (least)
        *least = EMU_PRIORITY_LEAST;
    if (greatest)
        *greatest = EMU_PRIORITY_GREATEST;
    emu_trace("priority_range %d %d", EMU_PRIORITY_LEAST, EMU_PRIORITY_GREATEST);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaStreamCreateWithPriority(cudaStream_t *s, unsigned f,
                                                            int priority)
{
    if (f & ~(unsigned)cudaStreamNonBlocking)
        return cudaErrorInvalidValue;
    /* The runtime clamps a priority outside the range into it. */
    if (priority > EMU_PRIORITY_LEAST)
        priority = EMU_PRIORITY_LEAST;
    if (priority < EMU_PRIORITY_GREATEST)
        priority = EMU_PRIORITY_GREATEST;
    *s = (cudaStream_t)(uintptr_t)emu_stream_new(priority);
    emu_race_stream_new((uintptr_t)*s, !(f & cudaStreamNonBlocking));
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
    return emu_c_cudaStreamCreateWithPriority(s, f, 0);
}
static inline cudaError_t emu_c_cudaStreamDestroy(cudaStream_t s)
{
    if (!s || !emu_stream_known((uintptr_t)s))
        emu_die("cudaStreamDestroy", "not a live stream");
    emu_stream_gone((uintptr_t)s);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaStreamSynchronize(cudaStream_t s)
{
    emu_stream_check(s, "cudaStreamSynchronize");
    emu_trace("sync_stream %d", (int)(uintptr_t)s);
    emu_race_sync_stream((uintptr_t)s);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaDeviceSynchronize(void)
{
    emu_trace("sync_device");
    emu_race_sync_device();
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
    (void)f;
    *e = (cudaEvent_t)(uintptr_t)emu_event_new();
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaEventDestroy(cudaEvent_t e)
{
    emu_event_check(e, "cudaEventDestroy");
    emu_event_gone((uintptr_t)e);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    emu_event_check(e, "cudaEventRecord");
    emu_stream_check(s, "cudaEventRecord");
    emu_trace("record %d %d", (int)(uintptr_t)e, (int)(uintptr_t)s);
    emu_rec("record\t%d\t%d", (int)(uintptr_t)e, (int)(uintptr_t)s);
    emu_race_record((uintptr_t)e, (uintptr_t)s);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
    (void)f;
    emu_stream_check(s, "cudaStreamWaitEvent");
    emu_event_check(e, "cudaStreamWaitEvent");
    emu_trace("wait %d %d", (int)(uintptr_t)s, (int)(uintptr_t)e);
    emu_rec("wait\t%d\t%d", (int)(uintptr_t)s, (int)(uintptr_t)e);
    emu_race_wait((uintptr_t)s, (uintptr_t)e);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev)
{
    if (dev != emu_device)
        return cudaErrorInvalidDevice;
    *pool = (cudaMemPool_t)(uintptr_t)0x9001;
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMemPoolSetAttribute(cudaMemPool_t pool,
                                                       enum cudaMemPoolAttr a, void *v)
{
    (void)pool, (void)a, (void)v;
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMalloc(void **p, size_t n)
{
    *p = emu_dev_alloc(n, "cudaMalloc");
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t emu_c_cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
    emu_stream_check(s, "cudaMallocAsync");
    *p = emu_dev_alloc(n, "cudaMallocAsync");
    if (!*p)
        return cudaErrorMemoryAllocation;
    /* The block is the stream's: another stream may use it once ordered
     * after this point, as after a write. */
    emu_race_op((uintptr_t)s, "cudaMallocAsync");
    emu_race_access(*p, 1);
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaFree(void *p)
{
    if (p) {
        emu_race_sync_device(); /* cudaFree waits for the whole device */
        emu_dev_free(p, "cudaFree");
    }
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaFreeAsync(void *p, cudaStream_t s)
{
    emu_stream_check(s, "cudaFreeAsync");
    /* Every use of the block must be ordered before the free. */
    emu_race_op((uintptr_t)s, "cudaFreeAsync");
    emu_race_access(p, 1);
    emu_dev_free(p, "cudaFreeAsync");
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    emu_stream_check(s, "cudaMemsetAsync");
    emu_dev_range(p, n, "cudaMemsetAsync", "destination");
    emu_race_op((uintptr_t)s, "cudaMemsetAsync");
    emu_race_access(p, 1);
    emu_rec("memset\t%zu", n);
    emu_trace("memset %zu", n);
    if (emu_rec_only())
        return cudaSuccess;
    emu_dev_open();
    memset(p, v, n);
    emu_dev_close();
    return cudaSuccess;
}
static inline void emu_c_copy(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                              const char *call)
{
    switch (k) {
    case cudaMemcpyHostToDevice:
        emu_host_range(s, n, call, "host source");
        emu_dev_range(d, n, call, "device destination");
        break;
    case cudaMemcpyDeviceToHost:
        emu_dev_range(s, n, call, "device source");
        emu_host_range(d, n, call, "host destination");
        break;
    case cudaMemcpyDeviceToDevice:
        emu_dev_range(s, n, call, "device source");
        emu_dev_range(d, n, call, "device destination");
        break;
    case cudaMemcpyDefault:
        break;
    default:
        emu_die(call, "host-to-host copy");
    }
    /* The race check: the device side(s), read at the source and written
     * at the destination (the caller enqueued the operation). */
    if (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice
        || (k == cudaMemcpyDefault && emu_find(s, 1) >= 0))
        emu_race_access(s, 0);
    if (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice
        || (k == cudaMemcpyDefault && emu_find(d, 1) >= 0))
        emu_race_access(d, 1);
    static const char *const kind[] = {"h2h", "h2d", "d2h", "d2d", "default"};
    emu_rec("memcpy\t%s\t%zu", kind[k], n);
    if (emu_rec_only()) {
        if (k == cudaMemcpyDeviceToHost)
            memset(d, 0, n); /* nothing was computed: a zero loss and norm keep the run going */
        return;
    }
    emu_dev_open();
    memmove(d, s, n);
    emu_dev_close();
}
static inline cudaError_t emu_c_cudaMemcpyAsync(void *d, const void *s, size_t n,
                                               enum cudaMemcpyKind k, cudaStream_t st)
{
    emu_stream_check(st, "cudaMemcpyAsync");
    emu_race_op((uintptr_t)st, "cudaMemcpyAsync");
    emu_c_copy(d, s, n, k, "cudaMemcpyAsync");
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMemcpy(void *d, const void *s, size_t n,
                                          enum cudaMemcpyKind k)
{
    /* On the legacy stream, and the host waits for it. */
    emu_race_op(0, "cudaMemcpy");
    emu_c_copy(d, s, n, k, "cudaMemcpy");
    emu_race_sync_stream(0);
    return cudaSuccess;
}
#define cudaGetDeviceCount emu_c_cudaGetDeviceCount
#define cudaSetDevice emu_c_cudaSetDevice
#define cudaGetDevice emu_c_cudaGetDevice
#define cudaStreamCreateWithFlags emu_c_cudaStreamCreateWithFlags
#define cudaStreamDestroy emu_c_cudaStreamDestroy
#define cudaStreamSynchronize emu_c_cudaStreamSynchronize
#define cudaDeviceSynchronize emu_c_cudaDeviceSynchronize
#define cudaDeviceGetDefaultMemPool emu_c_cudaDeviceGetDefaultMemPool
#define cudaMemPoolSetAttribute emu_c_cudaMemPoolSetAttribute
#define cudaMalloc emu_c_cudaMalloc
#define cudaMallocAsync emu_c_cudaMallocAsync
#define cudaFree emu_c_cudaFree
#define cudaFreeAsync emu_c_cudaFreeAsync
#define cudaMemsetAsync emu_c_cudaMemsetAsync
#define cudaMemcpyAsync emu_c_cudaMemcpyAsync
#define cudaMemcpy emu_c_cudaMemcpy
#define cudaDeviceGetStreamPriorityRange emu_c_cudaDeviceGetStreamPriorityRange
#define cudaStreamCreateWithPriority emu_c_cudaStreamCreateWithPriority
#define cudaEventCreateWithFlags emu_c_cudaEventCreateWithFlags
#define cudaEventRecord emu_c_cudaEventRecord
#define cudaEventDestroy emu_c_cudaEventDestroy
#define cudaStreamWaitEvent emu_c_cudaStreamWaitEvent

/* NCCL (nccl_mpi.c): nccl.h, included after this header, then declares
 * these names with NCCL's own prototypes. */
#define ncclGetErrorString emu_ncclGetErrorString
#define ncclGetUniqueId emu_ncclGetUniqueId
#define ncclCommInitRank emu_ncclCommInitRank
#define ncclCommDestroy emu_ncclCommDestroy
#define ncclCommGetAsyncError emu_ncclCommGetAsyncError
#define ncclAllGather emu_ncclAllGather
#define ncclReduceScatter emu_ncclReduceScatter
#define ncclAllReduce emu_ncclAllReduce

#endif
