/* Dynamic shared memory, for the kernels that size it at launch (the
 * launch's third argument): how a kernel names it, and how its launcher
 * allows it more than a kernel may have by default (48 KiB less its static
 * shared memory).  Above that a launch fails unless the host first raised
 * the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize; the attribute
 * belongs to the kernel and lasts for the process.  One definition serves the
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


/* Lets Kernel be launched with `bytes` of dynamic shared memory.  The
 * runtime call is made only when the kernel needs more than it has been
 * allowed so far in this process, so the launchers may call this before
 * every launch at the cost of one comparison.  The count starts at zero,
 * not at the 48 KiB default: that default is 48 KiB less the kernel's
 * static shared memory, so a kernel with both (the cross-entropy's row
 * kernel) would fail a launch just under 48 KiB that was never raised.
 * Raising the limit to `bytes` is valid whenever static + bytes fits the
 * 227 KiB of an sm_90 block.  The remembered limit is per process:
 * shardtrain binds one device per process, and the host code that
 * launches runs on one thread. */
template <auto Kernel> cudaError_t allow_dynamic_smem(size_t bytes)
{
    static size_t allowed = 0;
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
