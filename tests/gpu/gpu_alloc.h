/* Device buffers of one GPU test case, freed together: dalloc(bytes) is
 * cudaMalloc (at least one byte, so an empty tensor still gets a distinct
 * pointer) or bail through CK, recording the block; free_all() frees every
 * block recorded since the last call.  C++ (the test programs are .cu);
 * shared by test_cuda_model.cu and test_cuda_reduce.cu, and under the host
 * emulation (tests/gpu/emu/run_model.sh, run_reduce.sh) cudaMalloc is the
 * shim's. */
#ifndef ST_TESTS_GPU_ALLOC_H
#define ST_TESTS_GPU_ALLOC_H

#include <stddef.h>

#include <vector>

#include <cuda_runtime.h>

#include "gpu_check.h"

static std::vector<void *> g_allocs;

static inline void *dalloc(size_t bytes)
{
    void *p;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    g_allocs.push_back(p);
    return p;
}

static inline void free_all(void)
{
    for (void *p : g_allocs)
        cudaFree(p);
    g_allocs.clear();
}

#endif
