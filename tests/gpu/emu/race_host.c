/* The runtime side of race_check.cu: streams, events, synchronisation,
 * allocation and copies made through shim_c.h (force-included, as for the
 * emulated shardtrain's src/ files), so the race check sees each of them
 * exactly as it sees shardtrain's own calls.  Each helper dies on an
 * error: a test program has nothing to recover. */
#include <stdint.h>

#include "race_host.h"

static void ok(cudaError_t e, const char *call)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "race_check: %s failed: %d\n", call, (int)e);
        exit(2);
    }
}

uintptr_t rh_stream(int blocking)
{
    cudaStream_t s;
    ok(cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking),
       "cudaStreamCreateWithFlags");
    return (uintptr_t)s;
}

uintptr_t rh_event(void)
{
    cudaEvent_t e;
    ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return (uintptr_t)e;
}

void rh_record(uintptr_t e, uintptr_t s)
{
    ok(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s), "cudaEventRecord");
}

void rh_wait(uintptr_t s, uintptr_t e)
{
    ok(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0), "cudaStreamWaitEvent");
}

void rh_sync_stream(uintptr_t s)
{
    ok(cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize");
}

void rh_sync_device(void) { ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

void *rh_malloc(size_t n)
{
    void *p;
    ok(cudaMalloc(&p, n), "cudaMalloc");
    return p;
}

void *rh_malloc_async(size_t n, uintptr_t s)
{
    void *p;
    ok(cudaMallocAsync(&p, n, (cudaStream_t)s), "cudaMallocAsync");
    return p;
}

void rh_free(void *p) { ok(cudaFree(p), "cudaFree"); }

void rh_free_async(void *p, uintptr_t s)
{
    ok(cudaFreeAsync(p, (cudaStream_t)s), "cudaFreeAsync");
}

void rh_memset_async(void *p, size_t n, uintptr_t s)
{
    ok(cudaMemsetAsync(p, 0, n, (cudaStream_t)s), "cudaMemsetAsync");
}

void rh_to_host_async(void *host, const void *dev, size_t n, uintptr_t s)
{
    ok(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, (cudaStream_t)s),
       "cudaMemcpyAsync");
}

void rh_to_host(void *host, const void *dev, size_t n)
{
    ok(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
}
