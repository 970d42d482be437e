/* Host emulation of the CUDA features the kernels of cuda/ use, so they
 * and the GPU tests can execute on a machine with no GPU (a development
 * aid, not part of the build; run.sh, run_model.sh and build_shardtrain.sh
 * drive it).  Each block runs as one cooperative fiber (ucontext, 64 KiB
 * stack) per CUDA thread on the launching host thread (1-, 2- or 3-D
 * blocks, warps formed from the linear thread index as on the hardware),
 * one block at a time, so __shared__ can simply be `static`; __syncthreads
 * is a block barrier (waiting fibers yield until the last one arrives) and
 * a warp shuffle is a write to a per-warp slot between two warp barriers (valid because every shuffle in the kernels is reached by all 32
 * lanes of a warp).  The runtime API calls the tests and cuda/model_cuda.cu
 * make are mapped onto host memory, in order; every launch and runtime
 * call also tells races.c (where linked: the emulated shardtrain, the race
 * tests) its stream and the device blocks it reads and writes, so an
 * ordering a GPU would need and the code lacks aborts.  This checks
 * tiling, masking, indexing and cross-stream ordering; it says nothing
 * about the real hardware's memory model, occupancy or speed. */
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <ucontext.h>
#include <vector>
#include <memory>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <string>
#include <utility>
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
inline emu_idx emu_threadIdx;  // set by the scheduler before each fiber resumes
inline unsigned emu_linear;
inline emu_idx emu_blockIdx, emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim
// Cooperative fibers (ucontext), one per CUDA thread of the running block,
// all on the launching host thread: a barrier is a counter the waiting
// fibers yield on, so no OS thread is created per CUDA thread.
struct emu_fbar { unsigned count, need, gen; };
inline emu_fbar emu_block_bar, emu_warp_bar[32];
inline ucontext_t emu_sched_ctx;
inline std::vector<ucontext_t> emu_fib;
inline std::vector<std::unique_ptr<char[]>> emu_stacks;
inline std::vector<unsigned char> emu_done;
inline unsigned emu_cur, emu_ndone;
inline void (*emu_entry)(void *);
inline void *emu_entry_arg;
constexpr size_t emu_stack_bytes = 64 * 1024;
inline void emu_yield() { swapcontext(&emu_fib[emu_cur], &emu_sched_ctx); }
inline void emu_bar_wait(emu_fbar &b) {
  const unsigned g = b.gen;
  if (++b.count == b.need) { b.count = 0; b.gen++; return; }
  while (b.gen == g) emu_yield();
}
inline float emu_slots[32][32];
inline void emu_syncthreads() { emu_bar_wait(emu_block_bar); }
#define __syncthreads() emu_syncthreads()
inline float emu_shfl(float v, unsigned src) {
  unsigned w = emu_linear / 32, l = emu_linear % 32;
  emu_slots[w][l] = v; emu_bar_wait(emu_warp_bar[w]);
  float r = emu_slots[w][src & 31]; emu_bar_wait(emu_warp_bar[w]);
  return r;
}
#define __shfl_sync(m, v, s) emu_shfl((v), (unsigned)(s))
#define __shfl_xor_sync(m, v, o) emu_shfl((v), (emu_linear % 32) ^ (unsigned)(o))
inline unsigned emu_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float emu_uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
#define __float_as_uint emu_float_as_uint
#define __uint_as_float emu_uint_as_float
// IEEE round-to-nearest arithmetic (the host's, without contraction)
inline float emu_fadd_rn(float a, float b) { return a + b; }
inline float emu_fmul_rn(float a, float b) { return a * b; }
inline double emu_dadd_rn(double a, double b) { return a + b; }
inline double emu_dmul_rn(double a, double b) { return a * b; }
inline float emu_fdiv_rn(float a, float b) { return a / b; }
inline float emu_fsqrt_rn(float a) { return std::sqrt(a); }  // IEEE-exact, as on the GPU
inline double emu_ddiv_rn(double a, double b) { return a / b; }
inline double emu_dsqrt_rn(double a) { return std::sqrt(a); }  // IEEE-exact, as on the GPU
#define __ddiv_rn emu_ddiv_rn
#define __dsqrt_rn emu_dsqrt_rn
#define __fdiv_rn emu_fdiv_rn
#define __fsqrt_rn emu_fsqrt_rn
#define __fadd_rn emu_fadd_rn
#define __fmul_rn emu_fmul_rn
#define __dadd_rn emu_dadd_rn
#define __dmul_rn emu_dmul_rn
inline int emu_min(int a, int b) { return a < b ? a : b; }
#define min emu_min
// The emulated shardtrain's device block table (devmem.c, linked only by
// build_shardtrain.sh; null here otherwise): blocks are registered, and
// every non-null pointer argument of a launch must point into one, as
// only device memory is addressable by a real kernel.
extern "C" __attribute__((weak)) void *emu_dev_alloc_raw(size_t n);
extern "C" __attribute__((weak)) void emu_dev_open(void);
extern "C" __attribute__((weak)) void emu_dev_close(void);
struct emu_dev_scope {  // the device arena is addressable inside one
  emu_dev_scope() { if (emu_dev_open) emu_dev_open(); }
  ~emu_dev_scope() { if (emu_dev_close) emu_dev_close(); }
};
extern "C" __attribute__((weak)) void emu_dev_register(void *p, size_t n);
extern "C" __attribute__((weak)) size_t emu_dev_unregister(void *p);
extern "C" __attribute__((weak)) int emu_dev_contains(const void *p);
// The race check of the emulated shardtrain (races.c, linked beside
// devmem.c; null here otherwise): every device operation is enqueued on
// its stream and says which device blocks it reads and writes.
extern "C" __attribute__((weak)) void emu_race_op(uintptr_t s, const char *what);
extern "C" __attribute__((weak)) void emu_race_access(const void *p, int write);
extern "C" __attribute__((weak)) void emu_race_sync_stream(uintptr_t s);
extern "C" __attribute__((weak)) void emu_race_sync_device(void);
inline void emu_race_begin(cudaStream_t s, const char *what) {
  if (emu_race_op) emu_race_op((uintptr_t)s, what);
}
inline void emu_race_touch(const void *p, bool write) {
  if (emu_race_access && p) emu_race_access(p, write);
}
// A copy's device sides (by its kind; by address for cudaMemcpyDefault).
inline bool emu_is_device(const void *p, cudaMemcpyKind k, bool dst) {
  if (k == cudaMemcpyDefault) return emu_dev_contains && emu_dev_contains(p);
  return dst ? (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice)
             : (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice);
}
inline void emu_race_copy(cudaStream_t st, const char *what, void *d, const void *s, cudaMemcpyKind k) {
  emu_race_begin(st, what);
  if (emu_is_device(s, k, false)) emu_race_touch(s, false);
  if (emu_is_device(d, k, true)) emu_race_touch(d, true);
}
// A kernel's parameters, as the race check reads them: 'r' for a pointer
// to const (read), 'w' for any other pointer (written), '-' otherwise;
// null when the launch deduces its template arguments (&NAME is then no
// one function), and the arguments' own types decide.
template <class T> constexpr char emu_param_kind() {
  if constexpr (!std::is_pointer_v<T>) return '-';
  else return std::is_const_v<std::remove_pointer_t<T>> ? 'r' : 'w';
}
template <class R, class... P> inline const char *emu_param_kinds_of(R (*)(P...)) {
  static const char k[] = {emu_param_kind<P>()..., 0};
  return k;
}
template <auto F> inline const char *emu_param_kinds() {
  if constexpr (requires { emu_param_kinds_of(F); }) return emu_param_kinds_of(F);
  else return nullptr;
}
template <class T> inline void emu_race_arg(const char *params, int i, const T &a) {
  if constexpr (std::is_pointer_v<T>) {
    const bool write = params ? params[i] == 'w' : !std::is_const_v<std::remove_pointer_t<T>>;
    emu_race_touch((const void *)a, write);
  }
}
template <class T> inline void emu_check_arg(const char *kernel, int i, const T &a) {
  if constexpr (std::is_pointer_v<T>) {
    if (a && emu_dev_contains && !emu_dev_contains((const void *)a)) {
      fprintf(stderr, "cuda emulation: kernel %s: pointer argument %d (%p) is not device memory\n",
              kernel, i, (const void *)a);
      abort();
    }
  }
}
// Launches by kernel name (the launch expression's text, template
// arguments included): emu_launch_count(prefix) for the tests, and with
// ST_EMU_LAUNCH_LOG=FILE a "count name" line per kernel appended to FILE at
// exit, so a test can see which kernels a run went through.
struct emu_launch_table {
  std::vector<std::pair<std::string, long>> n;
  ~emu_launch_table() {
    const char *f = getenv("ST_EMU_LAUNCH_LOG");
    FILE *fp = f && *f ? fopen(f, "a") : nullptr;
    if (!fp) return;
    for (auto &e : n) fprintf(fp, "%ld %s\n", e.second, e.first.c_str());
    fclose(fp);
  }
};
inline emu_launch_table emu_launches;
inline void emu_count_launch(const char *kernel) {
  for (auto &e : emu_launches.n)
    if (e.first == kernel) { e.second++; return; }
  emu_launches.n.push_back({kernel, 1});
}
inline long emu_launch_count(const char *prefix) {
  long c = 0;
  for (auto &e : emu_launches.n)
    if (e.first.compare(0, strlen(prefix), prefix) == 0) c += e.second;
  return c;
}
// The launch record of the emulated shardtrain (devmem.c, ST_EMU_RECORD):
// emu_check_args keeps the launch's arguments as text (integers and floats
// by value, pointers as pN, N their element's size, p for void, or null;
// anything else ?), emu_launch writes them with the grid, block and
// dynamic shared memory, then, in record-only mode, returns without
// running the kernel.
extern "C" __attribute__((weak)) int emu_rec_only(void);
extern "C" __attribute__((weak)) int emu_recording(void);
extern "C" __attribute__((weak)) void emu_rec(const char *fmt, ...);
inline bool emu_rec_on() { return emu_recording && emu_recording(); }
inline bool emu_skip() { return emu_rec_only && emu_rec_only(); }
inline std::string emu_rec_kernel, emu_rec_args;
template <class T> inline void emu_rec_arg(const T &a) {
  char b[48];
  if constexpr (std::is_pointer_v<T>) {
    using E = std::remove_cv_t<std::remove_pointer_t<T>>;  // element size: the storage type
    if constexpr (std::is_void_v<E>) snprintf(b, sizeof b, "\t%s", a ? "p" : "null");
    else if (a) snprintf(b, sizeof b, "\tp%zu", sizeof(E));
    else snprintf(b, sizeof b, "\tnull");
  }
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) snprintf(b, sizeof b, "\t%lld", (long long)a);
  else if constexpr (std::is_floating_point_v<T>) snprintf(b, sizeof b, "\t%.9g", (double)a);
  else snprintf(b, sizeof b, "\t?");
  emu_rec_args += b;
}
inline const char *emu_cur_kernel = "?";  // the launch running, for messages
// The template arguments of the kernel a launch instantiates, as values:
// "<__nv_bfloat16, true>" for embed_forward_kernel<T, kVec> in bf16 on its
// vector path, "" for a kernel that is no template.  g++'s
// __PRETTY_FUNCTION__ names F in full ("[with auto F = ns::name<...>]").
template <auto F> inline const char *emu_instance() {
  static const std::string args = [](const std::string p) {  // this function's name, not the lambda's
    const size_t f = p.find("F = "), e = p.rfind(']');
    const size_t a = f == std::string::npos ? f : p.find('<', f);
    return a == std::string::npos || a > e ? std::string() : p.substr(a, e - a);
  }(__PRETTY_FUNCTION__);
  return args.c_str();
}
// The record names a launch "NAME = <ARGS>" (NAME as the launch wrote it,
// ARGS as emu_instance gives them), or NAME alone for no template.
template <class... A> inline int emu_check_args(const char *kernel, const char *instance,
                                                const char *params, cudaStream_t stream,
                                                const A &...a) {
  emu_cur_kernel = kernel;
  emu_count_launch(kernel);
  int i = 0;
  (emu_check_arg(kernel, i++, a), ...);
  emu_race_begin(stream, kernel);
  i = 0;
  (emu_race_arg(params, i++, a), ...);
  if (emu_rec_on()) {
    emu_rec_kernel = kernel;
    if (*instance) emu_rec_kernel += std::string(" = ") + instance;
    emu_rec_args.clear();
    (emu_rec_arg(a), ...);
  }
  return 0;
}
// A GPU faults on a 128-bit access that is not 16-byte aligned; x86 does
// not, so cuda/common.cuh's load16 / store16 (and any other 16-byte access)
// call this, and a launcher that takes a vector path for a layout that
// does not allow it aborts here instead of passing its test.  The count
// lets a test see which path a launcher chose.
inline long emu_vec_accesses;
inline void emu_check_align16(const void *p, const char *what) {
  emu_vec_accesses++;
  if (((uintptr_t)p & 15) != 0) {
    fprintf(stderr, "cuda emulation: kernel %s: misaligned 16-byte access (%s) at %p: "
            "a GPU faults here\n", emu_cur_kernel, what, p);
    abort();
  }
}
#define ST_CUDA_CHECK_ALIGN16(p) emu_check_align16((const void *)(p), __func__)
#include "tensor_core.h"  // mma, ldmatrix, cp.async (needs the fiber state above)
// The checks a device makes of a launch before it runs anything, and the
// error it then leaves for cudaGetLastError: a block of 1 to 1024 threads
// (x and y up to 1024, z up to 64), a grid of at least one block in each
// dimension (x up to 2^31 - 1, y and z up to 65535), and no more dynamic
// shared memory than the kernel may have: 48 KiB unless the host raised
// cudaFuncAttributeMaxDynamicSharedMemorySize for that kernel, never over
// the 227 KiB of an sm_90 block.  A refused launch runs nothing, as on the
// device, and says why on stderr.  Static __shared__ arrays (host statics
// here) are held to the device's rules as the block declares them: see
// emu_static_smem.  The error codes are the
// runtime header's (cudaErrorInvalidConfiguration for what no device could
// run); callers must treat any of them as fatal, as launch_status does.
constexpr size_t emu_default_dynamic_smem = 48 * 1024;
inline std::vector<std::pair<const void *, size_t>> emu_smem_optin;  // kernel -> raised limit
inline cudaError_t emu_launch_error = cudaSuccess;
inline size_t *emu_raised_smem_limit(const void *kernel) {
  for (auto &e : emu_smem_optin)
    if (e.first == kernel) return &e.second;
  return nullptr;
}
inline size_t emu_dynamic_smem_limit(const void *kernel) {
  const size_t *raised = emu_raised_smem_limit(kernel);
  return raised ? *raised : emu_default_dynamic_smem;
}
template <class F> inline cudaError_t emu_cudaFuncSetAttribute(F kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || (size_t)value > emu_dynamic_smem_bytes) return cudaErrorInvalidValue;
  const void *k = (const void *)kernel;
  if (size_t *raised = emu_raised_smem_limit(k)) *raised = (size_t)value;
  else emu_smem_optin.push_back({k, (size_t)value});
  return cudaSuccess;
}
#define cudaFuncSetAttribute emu_cudaFuncSetAttribute
// The kernel a launch names, as the pointer cudaFuncSetAttribute is given;
// null for a launch whose template arguments are deduced from its call
// (g++ then takes &NAME as an unresolved overload set), which gets the
// 48 KiB default: such a launch must name its template arguments to use
// more.
template <auto F> inline const void *emu_kernel_key() {
  if constexpr (requires { (const void *)F; }) return (const void *)F;
  else return nullptr;
}
inline void emu_refuse_launch(cudaError_t e, const char *why, dim3 g, dim3 b, size_t smem) {
  fprintf(stderr, "cuda emulation: kernel %s: launch refused: %s (grid %u,%u,%u block %u,%u,%u, "
          "%zu bytes of dynamic shared memory)\n", emu_cur_kernel, why, g.x, g.y, g.z, b.x, b.y,
          b.z, smem);
  emu_launch_error = e;
}
inline bool emu_launch_refused(const void *kernel, dim3 g, dim3 b, size_t smem) {
  const char *why = nullptr;
  cudaError_t e = cudaErrorInvalidConfiguration;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
      (unsigned long long)b.x * b.y * b.z > 1024)
    why = "a block must have 1 to 1024 threads (x, y <= 1024, z <= 64)";
  else if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    why = "a grid must have 1 to (2^31 - 1, 65535, 65535) blocks";
  else if (smem > emu_dynamic_smem_bytes)
    why = "dynamic shared memory over the 227 KiB of an sm_90 block";
  else if (smem > emu_dynamic_smem_limit(kernel)) {
    e = cudaErrorInvalidValue;  // what users of real devices report; not seen here
    why = "dynamic shared memory over the kernel's limit (48 KiB unless "
          "cudaFuncSetAttribute raised it)";
  }
  if (!why) return false;
  emu_refuse_launch(e, why, g, b, smem);
  return true;
}
// A kernel declared with __launch_bounds__(E) cannot be launched with a
// block of more than E threads: ptxas fitted its registers to E.
// transform.py moves the attribute into `if (emu_launch_bound(E)) return;`
// at the top of the kernel's body and marks its launches, and emu_launch
// first calls such a kernel once as a probe (emu_bound_probe set, no
// fibers): the line records E and returns, so nothing of the kernel runs.
// A launch over E is then refused like the others, with the error real
// devices are reported to give for a block too large for the kernel
// (cudaErrorLaunchOutOfResources; not seen here).  A launch the probe did
// not cover (a bounded kernel launched from another file) aborts at the
// line instead, in the first thread of its first block.
inline bool emu_bound_probe;
inline unsigned emu_probed_bound;
inline bool emu_launch_bound(unsigned bound) {
  if (emu_bound_probe) {
    emu_probed_bound = bound;
    return true;
  }
  const unsigned long long threads = (unsigned long long)emu_blockDim.x * emu_blockDim.y *
                                     emu_blockDim.z;
  if (threads > bound) {
    fprintf(stderr, "cuda emulation: kernel %s: a block of %llu threads runs over its "
            "__launch_bounds__(%u)\n", emu_cur_kernel, threads, bound);
    abort();
  }
  return false;
}
template <class F> inline bool emu_over_launch_bound(F &f, dim3 g, dim3 b, size_t smem) {
  emu_bound_probe = true;
  emu_probed_bound = 0;
  f();
  emu_bound_probe = false;
  if ((unsigned long long)b.x * b.y * b.z <= emu_probed_bound) return false;
  char why[96];
  snprintf(why, sizeof why, "a block over the kernel's __launch_bounds__(%u)", emu_probed_bound);
  emu_refuse_launch(cudaErrorLaunchOutOfResources, why, g, b, smem);
  return true;
}
inline void emu_fiber_main() {
  emu_entry(emu_entry_arg);
  emu_done[emu_cur] = 1;
  emu_ndone++;
}  // returns to emu_sched_ctx through uc_link
// ST_EMU_REVERSE=1 resumes the fibers from the last thread down, and runs
// the grid's blocks from the last down: a kernel free of races (and
// without atomics) gives bit-identical results in both orders, so
// comparing them finds a missing __syncthreads, a read of another lane's
// shared memory without a barrier, or a block that reads what another
// block of the same launch writes (blocks run in any order on a GPU).
inline bool emu_reverse() {
  static const bool r = [] { const char *e = getenv("ST_EMU_REVERSE"); return e && *e == '1'; }();
  return r;
}
template <class F> void emu_call(void *f) { (*(F *)f)(); }
// All of the buffer starts as NaN bytes (see emu_launch).
inline const bool emu_smem_poisoned =
    (memset(emu_dynamic_smem_buf, 0xff, emu_dynamic_smem_bytes), true);
inline void emu_check_smem_tail(size_t dynamic_smem) {
  for (size_t i = dynamic_smem; i < emu_dynamic_smem_bytes; i++)
    if (emu_dynamic_smem_buf[i] != 0xff) {
      fprintf(stderr, "cuda emulation: kernel %s: wrote dynamic shared memory at byte %zu, past "
              "the launch's %zu bytes: a GPU reports an illegal address\n", emu_cur_kernel, i,
              dynamic_smem);
      abort();
    }
}
// Static __shared__ arrays are host statics here; transform.py follows each
// declaration in a .cu file (or a header it inlines) with emu_static_smem(&array, sizeof array), so
// a launch adds up the static bytes its blocks declare (each array once)
// and holds them to what an sm_90 device allows (the CUDA runtime's rules
// for cudaFuncAttributeMaxDynamicSharedMemorySize, whose default is 48 KiB
// less the kernel's static shared memory):
//  - at most 48 KiB of static shared memory (ptxas refuses more);
//  - without cudaFuncSetAttribute, static + dynamic at most 48 KiB: a
//    launcher that opts in only above 48 KiB of dynamic memory fails for
//    requests just under it;
//  - with the limit raised to V, static + V at most 227 KiB, or
//    cudaFuncSetAttribute itself fails on the device.
// They are found while the block runs, so they abort, naming the kernel.
// Arrays in headers beside the .cu count too: transform.py inlines them.
inline std::vector<const void *> emu_static_seen;
inline size_t emu_static_bytes, emu_launch_dynamic, emu_launch_raised;
inline void emu_static_smem(const void *array, size_t bytes) {
  for (const void *a : emu_static_seen)
    if (a == array) return;
  emu_static_seen.push_back(array);
  emu_static_bytes += bytes;
  const char *why = nullptr;
  if (emu_static_bytes > emu_default_dynamic_smem)
    why = "over 48 KiB of static shared memory (ptxas refuses it)";
  else if (!emu_launch_raised && emu_static_bytes + emu_launch_dynamic > emu_default_dynamic_smem)
    why = "static + dynamic shared memory over 48 KiB without cudaFuncSetAttribute (the "
          "launch fails: the default dynamic limit is 48 KiB less the static)";
  else if (emu_launch_raised && emu_static_bytes + emu_launch_raised > emu_dynamic_smem_bytes)
    why = "static shared memory + the raised dynamic limit over 227 KiB "
          "(cudaFuncSetAttribute fails on the device)";
  if (!why) return;
  fprintf(stderr, "cuda emulation: kernel %s: %s: %zu static bytes, %zu dynamic, limit raised "
          "to %zu\n", emu_cur_kernel, why, emu_static_bytes, emu_launch_dynamic, emu_launch_raised);
  abort();
}
template <class F> void emu_launch(dim3 grid, dim3 block, F f, size_t dynamic_smem = 0,
                                   const void *kernel = nullptr, bool bounded = false) {
  if (emu_launch_refused(kernel, grid, block, dynamic_smem)) return;
  if (bounded && emu_over_launch_bound(f, grid, block, dynamic_smem)) return;
  emu_static_seen.clear();
  emu_static_bytes = 0;
  emu_launch_dynamic = dynamic_smem;
  const size_t *raised = kernel ? emu_raised_smem_limit(kernel) : nullptr;
  emu_launch_raised = raised ? *raised : 0;
  const unsigned threads = block.x * block.y * block.z;
  if (emu_rec_on())
    emu_rec("launch\t%s\t%u,%u,%u\t%u,%u,%u\t%zu%s", emu_rec_kernel.c_str(), grid.x, grid.y,
            grid.z, block.x, block.y, block.z, dynamic_smem, emu_rec_args.c_str());
  if (emu_skip()) return;
  emu_dev_scope device_memory;
  emu_blockDim = {block.x, block.y, block.z};
  emu_gridDim = {grid.x, grid.y, grid.z};
  emu_entry = emu_call<F>;
  emu_entry_arg = &f;
  if (emu_fib.size() < threads) {
    emu_fib.resize(threads);
    emu_done.resize(threads);
    while (emu_stacks.size() < threads) emu_stacks.emplace_back(new char[emu_stack_bytes]);
  }
  ucontext_t tmpl;
  getcontext(&tmpl);
  const unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
  for (unsigned long long i = 0; i < nblocks; i++) {
    const unsigned long long b = emu_reverse() ? nblocks - 1 - i : i;
    const unsigned x = (unsigned)(b % grid.x), y = (unsigned)(b / grid.x % grid.y),
                   z = (unsigned)(b / ((unsigned long long)grid.x * grid.y));
    emu_blockIdx = {x, y, z};
    emu_block_bar = {0, threads, 0};
    emu_cp_reset(threads);
    // Dynamic shared memory starts as NaN bytes, as unwritten memory may,
    // and so is everything past the launch's allocation: a read beyond it
    // gives NaN, and a write beyond it (where a GPU reports an illegal
    // address) aborts after the block, checked for the kernels that took the
    // pointer.
    memset(emu_dynamic_smem_buf, 0xff, dynamic_smem);
    emu_dynamic_smem_used = false;
    for (unsigned w = 0; w < (threads + 31) / 32; w++) emu_warp_bar[w] = {0, 32, 0};
    for (unsigned t = 0; t < threads; t++) {
      emu_fib[t] = tmpl;
      emu_fib[t].uc_stack.ss_sp = emu_stacks[t].get();
      emu_fib[t].uc_stack.ss_size = emu_stack_bytes;
      emu_fib[t].uc_link = &emu_sched_ctx;
      makecontext(&emu_fib[t], emu_fiber_main, 0);
      emu_done[t] = 0;
    }
    emu_ndone = 0;
    while (emu_ndone < threads)
      for (unsigned i = 0; i < threads; i++) {
        const unsigned t = emu_reverse() ? threads - 1 - i : i;
        if (emu_done[t]) continue;
        emu_cur = t;
        emu_linear = t;
        emu_threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
        swapcontext(&emu_sched_ctx, &emu_fib[t]);
      }
    if (emu_dynamic_smem_used) emu_check_smem_tail(dynamic_smem);
  }
  memset(emu_dynamic_smem_buf, 0xff, dynamic_smem);  // all NaN again for the next launch
}
// runtime API on host memory (recorded, and skipped when recording only:
// then a copy to the host gives zeros, as in shim_c.h)
inline const char *emu_kind(cudaMemcpyKind k) {
  static const char *const n[] = {"h2h", "h2d", "d2h", "d2d", "default"};
  return (unsigned)k < 5 ? n[k] : "?";
}
inline bool emu_skip_copy(void *d, size_t n, cudaMemcpyKind k) {
  if (emu_rec_on()) emu_rec("memcpy\t%s\t%zu", emu_kind(k), n);
  if (!emu_skip()) return false;
  if (k == cudaMemcpyDeviceToHost) memset(d, 0, n);
  return true;
}
template <class T> cudaError_t emu_cudaMalloc(T **p, size_t n) {
  *p = (T *)(emu_dev_alloc_raw ? emu_dev_alloc_raw(n) : malloc(n ? n : 1));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t emu_cudaFree(void *p) {
  if (!emu_dev_unregister) { free(p); return cudaSuccess; }
  if (emu_race_sync_device) emu_race_sync_device();  // cudaFree waits for the device
  if (p && !emu_dev_unregister(p)) {
    fprintf(stderr, "cuda emulation: cudaFree(%p): not a device block\n", p);
    abort();
  }
  return cudaSuccess;  // the arena's blocks are never reused
}
inline cudaError_t emu_cudaMemset(void *p, int v, size_t n) { emu_race_begin(nullptr, "cudaMemset"); emu_race_touch(p, true); if (emu_rec_on()) emu_rec("memset\t%zu", n); if (emu_skip()) return cudaSuccess; emu_dev_scope o; memset(p, v, n); return cudaSuccess; }
inline cudaError_t emu_cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k) {
  emu_race_copy(nullptr, "cudaMemcpy", d, s, k);  // on the legacy stream, and the host waits
  if (emu_race_sync_stream) emu_race_sync_stream(0);
  if (emu_skip_copy(d, n, k)) return cudaSuccess; emu_dev_scope o; memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t emu_cudaDeviceSynchronize() { if (emu_race_sync_device) emu_race_sync_device(); return cudaSuccess; }
inline cudaError_t emu_cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t emu_cudaGetDeviceProperties(cudaDeviceProp *p, int) { memset(p, 0, sizeof *p); strcpy(p->name, "host emulation"); return cudaSuccess; }
inline cudaError_t emu_cudaGetLastError() { const cudaError_t e = emu_launch_error; emu_launch_error = cudaSuccess; return e; }
inline cudaError_t emu_cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st) {
  emu_race_copy(st, "cudaMemcpyAsync", d, s, k);
  if (emu_skip_copy(d, n, k)) return cudaSuccess; emu_dev_scope o; memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t emu_cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st) {
  emu_race_begin(st, "cudaMemsetAsync");
  emu_race_touch(p, true);
  if (emu_rec_on()) emu_rec("memset\t%zu", n); if (emu_skip()) return cudaSuccess; emu_dev_scope o; memset(p, v, n); return cudaSuccess; }
inline cudaError_t emu_cudaMemcpy2DAsync(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height, cudaMemcpyKind k, cudaStream_t st) {
  emu_race_copy(st, "cudaMemcpy2DAsync", d, s, k);
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (emu_rec_on()) emu_rec("memcpy2d\t%s\t%zu", emu_kind(k), width * height);
  if (emu_skip()) return cudaSuccess;
  emu_dev_scope o;
  for (size_t r = 0; r < height; r++) memcpy((char *)d + r * dpitch, (const char *)s + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t emu_cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height, cudaStream_t st) {
  emu_race_begin(st, "cudaMemset2DAsync");
  emu_race_touch(p, true);
  if (width > pitch) return cudaErrorInvalidPitchValue;
  if (emu_rec_on()) emu_rec("memset2d\t%zu", width * height);
  if (emu_skip()) return cudaSuccess;
  emu_dev_scope o;
  for (size_t r = 0; r < height; r++) memset((char *)p + r * pitch, v, width);
  return cudaSuccess;
}
inline cudaError_t emu_cudaStreamCreate(cudaStream_t *s) { *s = nullptr; return cudaSuccess; }
inline cudaError_t emu_cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t emu_cudaStreamSynchronize(cudaStream_t s) { if (emu_race_sync_stream) emu_race_sync_stream((uintptr_t)s); return cudaSuccess; }
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
#define cudaMemcpy2DAsync emu_cudaMemcpy2DAsync
#define cudaMemset2DAsync emu_cudaMemset2DAsync
#define cudaStreamCreate emu_cudaStreamCreate
#define cudaStreamDestroy emu_cudaStreamDestroy
#define cudaStreamSynchronize emu_cudaStreamSynchronize
