// The race check of the host emulation (races.c) on small programs, each a
// mistake a GPU would race on (or its corrected form), so that
// tests/cuda_races_emu.sh can show the check catches every kind and lets
// every ordering CUDA promises through.  Built by run_races.sh: this file
// through transform.py (its launches become emulated ones that carry their
// stream), the runtime calls through race_host.c and shim_c.h, the product
// through gemm_host.cpp, linked with devmem.c, streams.c and races.c as the
// emulated shardtrain is.
//
//   race_check --list     one line per case: NAME EXPECT WHAT, where EXPECT
//                         is ok (exit 0) or race (abort, with a race line
//                         on stderr that holds each word of WHAT, the
//                         operations named, '|' for a space), or same or
//                         differs: the result printed with ST_EMU_REVERSE=1
//                         (shim.h: threads and blocks run last to first)
//                         against the one printed without
//   race_check NAME       runs that case
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "race_host.h"

__global__ void fill_kernel(float *p, int n, float v) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = v;
}
__global__ void sum_kernel(float *out, const float *p, int n) {
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    *out = s;
  }
}

// Two kernels whose result depends on the order the emulation runs them
// in (each a race on a GPU, with no stream involved): block b reads what
// block b - 1 wrote in the same launch, and thread t reads the shared
// slot thread t + 1 writes with no __syncthreads between.
__global__ void chain_blocks_kernel(float *p) {
  if (threadIdx.x == 0) p[blockIdx.x] = blockIdx.x ? p[blockIdx.x - 1] + 1.0f : 1.0f;
}
__global__ void neighbour_shared_kernel(float *out) {
  __shared__ float s[33];
  s[threadIdx.x] = (float)threadIdx.x;
  if (threadIdx.x == 0) s[32] = 0.0f;
  out[threadIdx.x] = s[threadIdx.x + 1];
}

namespace {
constexpr int kN = 64;  // floats per buffer
float *buf, *out1, *out2, *dmat;
uintptr_t s1, s2, e;
st_cuda_gemm_ctx *gemm_ctx;  // one cuBLASLt context (one workspace) for every product

cudaStream_t st(uintptr_t s) { return (cudaStream_t)s; }
void fill(float *p, uintptr_t s) { fill_kernel<<<1, 32, 0, st(s)>>>(p, kN, 1.0f); }
void sum(float *o, const float *p, uintptr_t s) { sum_kernel<<<1, 32, 0, st(s)>>>(o, p, kN); }

// D[8,8] = A[8,8] B[8,8] in fp32 on stream s; with bgradb, the bias
// gradient of A's rows is written to bias.
void gemm(const float *A, float *D, float *bias, uintptr_t s) {
  st_cuda_gemm_desc d;
  memset(&d, 0, sizeof d);
  d.ab_type = d.c_type = d.d_type = ST_CUDA_F32;
  d.M = d.N = d.K = 8;
  d.A = A;
  d.lda = 8;
  d.B = A;
  d.ldb = 8;
  d.D = D;
  d.ldd = 8;
  if (bias) {
    d.epilogue = ST_CUDA_EPI_BGRADB;
    d.bias = bias;
    d.bias_type = ST_CUDA_F32;
    d.bias_len = 8;
  }
  if (st_cuda_gemm_ex(gemm_ctx, &d, st(s)) != cudaSuccess) {
    fprintf(stderr, "race_check: st_cuda_gemm_ex refused the product\n");
    exit(2);
  }
}

// The buffer's first n floats on stdout, for the order cases.
void print(const float *p, int n) {
  float h[kN];
  rh_sync_device();
  rh_to_host(h, p, sizeof h);
  printf("result:");
  for (int i = 0; i < n; i++) printf(" %g", h[i]);
  printf("\n");
}

struct race_case {
  const char *name, *expect, *what;
  void (*run)();
};

// The message names the later operation, its verb, then the earlier one
// and its verb ("sum_kernel ... reads ... fill_kernel ... wrote").
const race_case cases[] = {
    {"same_stream", "ok", "", [] { fill(buf, s1); sum(out1, buf, s1); }},
    {"read_after_write", "race", "sum_kernel|(stream|3, reads fill_kernel|(stream|2, wrote",
     [] { fill(buf, s1); sum(out1, buf, s2); }},
    {"event_orders", "ok", "",
     [] { fill(buf, s1); rh_record(e, s1); rh_wait(s2, e); sum(out1, buf, s2); }},
    {"event_recorded_too_early", "race", "sum_kernel reads fill_kernel wrote",
     [] { rh_record(e, s1); fill(buf, s1); rh_wait(s2, e); sum(out1, buf, s2); }},
    {"event_rerecorded", "ok", "",
     [] { rh_record(e, s1); fill(buf, s1); rh_record(e, s1); rh_wait(s2, e); sum(out1, buf, s2); }},
    {"write_after_read", "race", "fill_kernel writes sum_kernel read",
     [] { sum(out1, buf, s1); fill(buf, s2); }},
    {"write_after_write", "race", "fill_kernel|(stream|3, writes fill_kernel|(stream|2, wrote",
     [] { fill(buf, s1); fill(buf, s2); }},
    {"reads_share", "ok", "", [] { sum(out1, buf, s1); sum(out2, buf, s2); }},
    {"stream_synchronize", "ok", "",
     [] { fill(buf, s1); rh_sync_stream(s1); sum(out1, buf, s2); }},
    {"other_stream_synchronized", "race", "sum_kernel reads fill_kernel wrote",
     [] { fill(buf, s1); rh_sync_stream(s2); sum(out1, buf, s2); }},
    {"device_synchronize", "ok", "", [] { fill(buf, s1); rh_sync_device(); sum(out1, buf, s2); }},
    {"legacy_after_nonblocking", "race", "sum_kernel|(stream|0, reads fill_kernel wrote",
     [] { fill(buf, s1); sum(out1, buf, 0); }},
    {"legacy_after_blocking", "ok", "",
     [] { const uintptr_t b = rh_stream(1); fill(buf, b); sum(out1, buf, 0); }},
    {"blocking_after_legacy", "ok", "",
     [] { const uintptr_t b = rh_stream(1); fill(buf, 0); sum(out1, buf, b); }},
    {"malloc_async_used_elsewhere", "race", "fill_kernel writes cudaMallocAsync wrote",
     [] { float *p = (float *)rh_malloc_async(kN * sizeof(float), s1); fill(p, s2); }},
    {"malloc_async_ordered", "ok", "", [] {
       float *p = (float *)rh_malloc_async(kN * sizeof(float), s1);
       rh_record(e, s1); rh_wait(s2, e); fill(p, s2);
     }},
    {"free_async_while_read", "race", "cudaFreeAsync writes sum_kernel read",
     [] { sum(out1, buf, s2); rh_free_async(buf, s1); }},
    {"free_async_ordered", "ok", "",
     [] { sum(out1, buf, s2); rh_record(e, s2); rh_wait(s1, e); rh_free_async(buf, s1); }},
    {"free_waits_for_device", "ok", "", [] { sum(out1, buf, s2); rh_free(buf); }},
    {"memcpy_before_sync", "race", "cudaMemcpy|(stream|0, reads fill_kernel wrote",
     [] { float h[kN]; fill(buf, s1); rh_to_host(h, buf, sizeof h); }},
    {"memcpy_async_same_stream", "ok", "", [] {
       float h[kN]; fill(buf, s1); rh_to_host_async(h, buf, sizeof h, s1); rh_sync_stream(s1);
     }},
    {"memset_async_unordered", "race", "cudaMemsetAsync writes sum_kernel read",
     [] { sum(out1, buf, s1); rh_memset_async(buf, kN * sizeof(float), s2); }},
    {"gemm_reads_unordered", "race", "st_cuda_gemm reads fill_kernel wrote",
     [] { fill(buf, s1); gemm(buf, dmat, nullptr, s2); }},
    {"gemm_writes_unordered", "race", "st_cuda_gemm writes sum_kernel read",
     [] { sum(out1, dmat, s1); gemm(buf, dmat, nullptr, s2); }},
    {"gemm_bgradb_writes_bias", "race", "st_cuda_gemm writes sum_kernel read",
     [] { sum(out1, out2, s1); gemm(buf, dmat, out2, s2); }},
    {"gemm_shares_workspace", "race",
     "st_cuda_gemm|(stream|3, writes st_cuda_gemm|(stream|2, wrote",
     [] { gemm(buf, dmat, nullptr, s1); gemm(out1, out2, nullptr, s2); }},
    {"gemm_ordered", "ok", "",
     [] { fill(buf, s1); rh_record(e, s1); rh_wait(s2, e); gemm(buf, dmat, nullptr, s2); }},
    // Order cases: run as is and with ST_EMU_REVERSE=1 (threads and blocks
    // resumed last to first), the printed result must be the same, or must
    // differ where the kernel races.
    {"order_independent", "same", "", [] { fill(buf, s1); sum(out1, buf, s1); print(out1, 1); }},
    {"order_blocks_read_each_other", "differs", "", [] {
       rh_memset_async(buf, kN * sizeof(float), s1);
       chain_blocks_kernel<<<4, 32, 0, st(s1)>>>(buf);
       print(buf, 4);
     }},
    {"order_threads_share_without_barrier", "differs", "", [] {
       neighbour_shared_kernel<<<1, 32, 0, st(s1)>>>(buf);
       print(buf, 32);
     }},
};
}  // namespace

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (const race_case &c : cases) printf("%s %s %s\n", c.name, c.expect, c.what);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: race_check --list | race_check NAME\n");
    return 2;
  }
  // Two non-blocking streams (handles 2 and 3; 1 is made first so that a
  // message's stream numbers are the same in every case), one event, and
  // four cudaMalloc'd buffers: synchronous allocations, usable anywhere.
  (void)rh_stream(0);
  s1 = rh_stream(0);
  s2 = rh_stream(0);
  e = rh_event();
  buf = (float *)rh_malloc(kN * sizeof(float));
  out1 = (float *)rh_malloc(kN * sizeof(float));
  out2 = (float *)rh_malloc(kN * sizeof(float));
  dmat = (float *)rh_malloc(kN * sizeof(float));
  if (st_cuda_gemm_create(&gemm_ctx, 0) != cudaSuccess) {
    fprintf(stderr, "race_check: st_cuda_gemm_create failed\n");
    return 2;
  }
  for (const race_case &c : cases)
    if (strcmp(c.name, argv[1]) == 0) {
      c.run();
      printf("race_check: %s ran to the end\n", c.name);
      return 0;
    }
  fprintf(stderr, "race_check: no case %s\n", argv[1]);
  return 2;
}
