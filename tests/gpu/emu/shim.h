/* Host emulation of the CUDA features the kernels of cuda/ use, so they
 * and the GPU tests can execute on a machine with no GPU (a development
 * aid, not part of the build; run.sh and run_model.sh drive it).  Each
 * block runs as one std::thread per CUDA thread (1-, 2- or 3-D blocks,
 * warps formed from the linear thread index as on the hardware), one block
 * at a time, so __shared__ can simply be `static`; __syncthreads is a block
 * barrier and a warp shuffle is a write to a per-warp slot between two warp
 * barriers (valid because every shuffle in the kernels is reached by all 32
 * lanes of a warp).  The runtime API calls the tests and cuda/model_cuda.cu
 * make are mapped onto host memory, in order (streams are ignored).  This
 * checks tiling, masking and indexing; it says nothing about the real
 * hardware's memory model, occupancy or speed. */
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <barrier>
#include <thread>
#include <vector>
#include <memory>
#include <cstring>
#include <cstdlib>
#include <cmath>
#include <algorithm>
#undef __global__
#define __global__
#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(x)
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __forceinline__
#define __forceinline__ inline
struct emu_idx { unsigned x, y, z; };
inline thread_local emu_idx emu_threadIdx;
inline thread_local unsigned emu_linear;
inline emu_idx emu_blockIdx, emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
inline std::unique_ptr<std::barrier<>> emu_block_bar;
inline std::unique_ptr<std::barrier<>> emu_warp_bar[32];
inline float emu_slots[32][32];
inline void emu_syncthreads() { emu_block_bar->arrive_and_wait(); }
#define __syncthreads() emu_syncthreads()
inline float emu_shfl(float v, unsigned src) {
  unsigned w = emu_linear / 32, l = emu_linear % 32;
  emu_slots[w][l] = v; emu_warp_bar[w]->arrive_and_wait();
  float r = emu_slots[w][src & 31]; emu_warp_bar[w]->arrive_and_wait();
  return r;
}
#define __shfl_sync(m, v, s) emu_shfl((v), (unsigned)(s))
#define __shfl_xor_sync(m, v, o) emu_shfl((v), (emu_linear % 32) ^ (unsigned)(o))
inline unsigned emu_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float emu_uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
#define __float_as_uint emu_float_as_uint
#define __uint_as_float emu_uint_as_float
inline int emu_min(int a, int b) { return a < b ? a : b; }
#define min emu_min
template <class F> void emu_launch(dim3 grid, dim3 block, F f) {
  const unsigned threads = block.x * block.y * block.z;
  emu_blockDim = {block.x, block.y, block.z};
  emu_gridDim = {grid.x, grid.y, grid.z};
  for (unsigned z = 0; z < grid.z; z++) for (unsigned y = 0; y < grid.y; y++) for (unsigned x = 0; x < grid.x; x++) {
    emu_blockIdx = {x, y, z};
    emu_block_bar = std::make_unique<std::barrier<>>(threads);
    for (unsigned w = 0; w < threads / 32; w++) emu_warp_bar[w] = std::make_unique<std::barrier<>>(32);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; t++)
      ts.emplace_back([=] {
        emu_linear = t;
        emu_threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
        f();
      });
    for (auto &t : ts) t.join();
  }
}
// runtime API on host memory
template <class T> cudaError_t emu_cudaMalloc(T **p, size_t n) { *p = (T *)malloc(n ? n : 1); return cudaSuccess; }
inline cudaError_t emu_cudaFree(void *p) { free(p); return cudaSuccess; }
inline cudaError_t emu_cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
inline cudaError_t emu_cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t emu_cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t emu_cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t emu_cudaGetDeviceProperties(cudaDeviceProp *p, int) { memset(p, 0, sizeof *p); strcpy(p->name, "host emulation"); return cudaSuccess; }
inline cudaError_t emu_cudaGetLastError() { return cudaSuccess; }
inline cudaError_t emu_cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) { memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t emu_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }
inline cudaError_t emu_cudaStreamCreate(cudaStream_t *s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t emu_cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t emu_cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
#define cudaMalloc emu_cudaMalloc
#define cudaFree emu_cudaFree
#define cudaMemset emu_cudaMemset
#define cudaMemcpy emu_cudaMemcpy
#define cudaDeviceSynchronize emu_cudaDeviceSynchronize
#define cudaGetDeviceCount emu_cudaGetDeviceCount
#define cudaGetDeviceProperties emu_cudaGetDeviceProperties
#define cudaGetLastError emu_cudaGetLastError
#define cudaMemcpyAsync emu_cudaMemcpyAsync
#define cudaMemsetAsync emu_cudaMemsetAsync
#define cudaStreamCreate emu_cudaStreamCreate
#define cudaStreamDestroy emu_cudaStreamDestroy
#define cudaStreamSynchronize emu_cudaStreamSynchronize
