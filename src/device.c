/* GPU binding (see device.h).  The only file that asks the CUDA runtime
 * which devices exist; everything else reads rt->device. */
#include "st_build.h"

#include "device.h"
#include "config.h"
#include "log.h"

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

int st_device_bind(st_runtime *rt, int requested, int allow_shared)
{
    rt->device = -1;
    if (requested == ST_DEVICE_CPU)
        return 0;
#ifdef HAVE_CUDA
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        if (requested == ST_DEVICE_AUTO)
            return 0;
        st_error(NULL, "train.device = cuda but no CUDA device is visible (%s); "
                 "hint: run on a GPU node or set train.device = cpu",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return ST_EXIT_USAGE;
    }
    int dev = 0;
    /* With one listed device the launcher has bound us; several tasks given
     * the same single device cannot be told apart from here. */
    if (visible_listed() != 1) {
        if (rt->local_size > count && !allow_shared) {
            st_error(NULL, "%d ranks on host %s but %d CUDA device%s; hint: run one "
                     "rank per GPU or set train.device = cpu", rt->local_size, rt->host,
                     count, count == 1 ? "" : "s");
            return ST_EXIT_USAGE;
        }
        dev = rt->local_rank % count;
    }
    e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        if (requested == ST_DEVICE_AUTO)
            return 0;
        st_error(NULL, "cudaSetDevice(%d) failed: %s; hint: check the GPU with "
                 "nvidia-smi or set train.device = cpu", dev, cudaGetErrorString(e));
        return ST_EXIT_USAGE;
    }
    rt->device = dev;
    return 0;
#else
    (void)allow_shared;
    if (requested == ST_DEVICE_AUTO)
        return 0;
    st_error(NULL, "train.device = cuda but this build has no CUDA backend; "
             "hint: set train.device = cpu or rebuild with the CUDA toolkit");
    return ST_EXIT_USAGE;
#endif
}
