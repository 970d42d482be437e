/* GPU binding (see device.h).  The only file that asks the CUDA runtime
 * which devices exist; everything else reads rt->device. */
#include "st_build.h"

#include "runtime/device.h"
#include "config/config.h"
#include "base/log.h"
#include "config/origin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

#ifdef HAVE_CUDA
/* Number of entries in CUDA_VISIBLE_DEVICES ("0,1", "GPU-uuid"), -1 when
 * unset.  One entry means the launcher already bound this task to a GPU
 * (srun --gpus-per-task, a per-rank wrapper): it is device 0 for us
 * whatever our local rank. */
static int visible_listed(void)
{
    const char *s = getenv("CUDA_VISIBLE_DEVICES");
    if (!s)
        return -1;
    if (!*s)
        return 0;
    int n = 1;
    for (; *s; s++)
        n += *s == ',';
    return n;
}
#endif

int st_device_bind(st_runtime *rt, const st_config *cfg, int allow_shared)
{
    const int requested = cfg->train.device;
    rt->device = -1;
    if (requested == ST_DEVICE_CPU)
        return 0;
#ifdef HAVE_CUDA
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        if (requested == ST_DEVICE_AUTO)
            return 0;
        return st_config_error(cfg, "train", "device", "train.device = cuda but no CUDA "
                               "device is visible (%s); hint: run on a GPU node or set "
                               "train.device = cpu",
                               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    int dev = 0;
    /* With one listed device the launcher has bound us; several tasks given
     * the same single device cannot be told apart from here. */
    if (visible_listed() != 1) {
        if (rt->local_size > count && !allow_shared) {
            return st_config_error(cfg, "train", "device", "%d ranks on host %s but %d "
                                   "CUDA device%s; hint: run one rank per GPU, set "
                                   "parallel.backend = mpi to share it, or set "
                                   "train.device = cpu", rt->local_size, rt->host,
                                   count, count == 1 ? "" : "s");
        }
        dev = rt->local_rank % count;
    }
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        if (requested == ST_DEVICE_AUTO)
            return 0;
        return st_config_error(cfg, "train", "device", "cudaSetDevice(%d) failed: %s; hint: "
                               "check the GPU with nvidia-smi or set train.device = cpu",
                               dev, cudaGetErrorString(e));
    }
    rt->device = dev;
    return 0;
#else
    (void)allow_shared;
    if (requested == ST_DEVICE_AUTO)
        return 0;
    return st_config_error(cfg, "train", "device", "train.device = cuda but this build has "
                           "no CUDA backend; hint: set train.device = cpu or rebuild with "
                           "the CUDA toolkit");
#endif
}

/* Staging copies for host-staged collectives, ordered on the one stream
 * that writes and reads the device buffers (the kernels backend's compute
 * stream): the copy is enqueued behind the work that produced the buffer,
 * and only that stream is waited for, so other streams (and other ranks'
 * work on a shared device) run on.  The wait is needed both ways: the MPI
 * collective reads the host copy at once, and the host copy is freed as
 * soon as the copy back returns (a pageable host-to-device copy may return
 * before its DMA has landed). */
static int stage_copy(void *dst, const void *src, size_t bytes, int to_host, void *stream)
{
    if (!bytes)
        return 0;
#ifdef HAVE_CUDA
    cudaStream_t s = (cudaStream_t)stream;
    /* Default: by address (unified addressing), so a host buffer handed to
     * a staged communicator (bench-comm's) also works. */
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        st_error(NULL, "staging %zu bytes %s the GPU for an MPI collective failed: %s; "
                 "hint: check the GPU with nvidia-smi", bytes, to_host ? "from" : "to",
                 cudaGetErrorString(e));
        return ST_EXIT_FAILURE;
    }
    return 0;
#else
    (void)dst, (void)src, (void)to_host, (void)stream;
    st_error(NULL, "internal: device staging in a build without CUDA");
    return ST_EXIT_FAILURE;
#endif
}

int st_device_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    return stage_copy(dst, src, bytes, 1, stream);
}

int st_device_copy_from_host(void *dst, const void *src, size_t bytes, void *stream)
{
    return stage_copy(dst, (void *)src, bytes, 0, stream);
}
