/* Host emulation of the CUDA runtime calls of the C files of src/ that talk
 * to the device (kernels_cuda.c, device.c, comm_nccl.c), for the emulated
 * shardtrain of build_shardtrain.sh: force-included (cc -include) ahead of
 * the file, it includes the real runtime headers (types, enums) and then
 * maps every runtime call those files make onto host memory, in order
 * (streams are ignored: the host runs each call to completion).  Only
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
 * Event and stream-wait calls (the nccl backend's) abort: the emulated
 * binary runs only parallel.backend = mpi. */
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
static int emu_device;

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
    emu_dev_open();
    memset(p, 0xff, n); /* poisoned; the arena never hands it out again */
    emu_dev_close();
}

static inline cudaError_t emu_c_cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t emu_c_cudaSetDevice(int d)
{
    if (d != 0)
        return cudaErrorInvalidDevice;
    emu_device = d;
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaGetDevice(int *d) { *d = emu_device; return cudaSuccess; }
static inline cudaError_t emu_c_cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
    (void)f;
    *s = (cudaStream_t)(uintptr_t)0x5eed; /* any non-null handle: never dereferenced */
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t emu_c_cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t emu_c_cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t emu_c_cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev)
{
    if (dev != 0)
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
    (void)s;
    *p = emu_dev_alloc(n, "cudaMallocAsync");
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t emu_c_cudaFree(void *p)
{
    if (p)
        emu_dev_free(p, "cudaFree");
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaFreeAsync(void *p, cudaStream_t s)
{
    (void)s;
    emu_dev_free(p, "cudaFreeAsync");
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    (void)s;
    emu_dev_range(p, n, "cudaMemsetAsync", "destination");
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
    emu_dev_open();
    memmove(d, s, n);
    emu_dev_close();
}
static inline cudaError_t emu_c_cudaMemcpyAsync(void *d, const void *s, size_t n,
                                               enum cudaMemcpyKind k, cudaStream_t st)
{
    (void)st;
    emu_c_copy(d, s, n, k, "cudaMemcpyAsync");
    return cudaSuccess;
}
static inline cudaError_t emu_c_cudaMemcpy(void *d, const void *s, size_t n,
                                          enum cudaMemcpyKind k)
{
    emu_c_copy(d, s, n, k, "cudaMemcpy");
    return cudaSuccess;
}
static inline cudaError_t emu_c_unsupported(const char *call)
{
    emu_die(call, "not emulated (the emulated shardtrain runs backend = mpi)");
    return cudaErrorNotSupported;
}
#define EMU_C_UNSUPPORTED(name) emu_c_unsupported(#name)

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
#define cudaEventCreateWithFlags(...) EMU_C_UNSUPPORTED(cudaEventCreateWithFlags)
#define cudaEventRecord(...) EMU_C_UNSUPPORTED(cudaEventRecord)
#define cudaEventDestroy(...) EMU_C_UNSUPPORTED(cudaEventDestroy)
#define cudaStreamWaitEvent(...) EMU_C_UNSUPPORTED(cudaStreamWaitEvent)

#endif
