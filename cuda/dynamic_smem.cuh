/* Dynamic shared memory, for the kernels that size it at launch (the
 * launch's third argument): how a kernel names it, and how its launcher
 * allows it more than the 48 KiB every kernel may have by default.  Above
 * 48 KiB a launch fails unless the host first raised the kernel's
 * cudaFuncAttributeMaxDynamicSharedMemorySize; the attribute belongs to
 * the kernel and lasts for the process.  One definition serves the
 * tensor-core attention (tensor_core.cuh) and the row kernels (common.cuh),
 * so there is one rule for both.  The host emulation defines
 * ST_DYNAMIC_SMEM as its own buffer before this header is read. */
#ifndef ST_CUDA_DYNAMIC_SMEM_CUH
#define ST_CUDA_DYNAMIC_SMEM_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#ifndef ST_DYNAMIC_SMEM
#define ST_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace st_cuda {

constexpr size_t kDefaultDynamicSmem = 48 * 1024;

/* Lets Kernel be launched with `bytes` of dynamic shared memory.  The
 * runtime call is made only when the kernel needs more than it has been
 * allowed so far in this process, so the launchers may call this before
 * every launch at the cost of one comparison.  The remembered limit is
 * per process: shardtrain binds one device per process, and the host
 * code that launches runs on one thread. */
template <auto Kernel> cudaError_t allow_dynamic_smem(size_t bytes)
{
    static size_t allowed = kDefaultDynamicSmem;
    if (bytes <= allowed)
        return cudaSuccess;
    const cudaError_t e =
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess)
        allowed = bytes;
    return e;
}

} /* namespace st_cuda */

#endif
