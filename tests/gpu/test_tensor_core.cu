/* Self-test of the tensor-core instruction wrappers of cuda/tensor_core.cuh:
 * on a GPU it checks the fragment layouts the kernels assume against the
 * hardware; under the host emulation (tests/cuda_attention_emu.sh) it
 * checks the emulation's models against the same tables, so the two agree
 * wherever both have run.  The expected values below are computed from the
 * PTX ISA's fragment tables written out again here, independently of both
 * cuda/ and tests/gpu/emu/.
 *
 *  1. mma.m16n8k16 bf16: two warps, each multiplying its own random A
 *     (16x16) and B (16x8) and adding C; D against a double-precision
 *     product on the host (relative 1e-5: the products are exact, only the
 *     fp32 accumulation rounds).
 *  2. The same kernel with a deliberately permuted fragment (A registers 1
 *     and 2 swapped, B registers swapped, or C/D halves swapped) must
 *     disagree with the product: the layout is really being checked.
 *  3. ldmatrix .x1, .x2, .x4, each with and without .trans: every lane's
 *     registers against the table (raw 16-bit patterns, no arithmetic).
 *  4. cp.async: two committed groups; after wait_group 1 the older group
 *     has landed, after wait_group 0 both, and src-size 0 zero-fills.
 *     Under the emulation the younger group must not have landed after
 *     wait_group 1 (the model copies as late as the ISA allows, which is
 *     what makes a missing wait visible there).
 *  5. Emulation only: a misaligned ldmatrix row address aborts (in a
 *     child process), as the device faults; dynamic shared memory past
 *     the launch's allocation reads as NaN bytes, and a write there aborts
 *     (the device reports an illegal address).
 *  6. The launch checks: a block over 1024 threads or with z over 64, an
 *     empty grid, a grid y over 65535, dynamic shared memory over 48 KiB
 *     before cudaFuncSetAttribute raised the kernel's limit, and over the
 *     227 KiB of an sm_90 block, are each refused: cudaGetLastError
 *     reports an error (once: the next call says success) and the kernel
 *     did not run.  The same kernel launches and runs with a good
 *     configuration, and with 48 KiB + 16 bytes once its limit is raised.
 *  7. A kernel declared __launch_bounds__(64): a block of 64 runs, one of
 *     65 is refused.  Its dynamic shared memory past 48 KiB is refused
 *     until allow_dynamic_smem (cuda/dynamic_smem.cuh) has allowed it,
 *     and then runs.  Emulation only: a bounded kernel launched without
 *     the probe transform.py arranges (as from another file) aborts.
 *  8. A kernel with 256 bytes of static shared memory: allow_dynamic_smem
 *     lets it run with 48 KiB - 128 of dynamic (its default limit is 48 KiB
 *     less the static bytes, so that needs the attribute raised).
 *     Emulation only: without the attribute that launch aborts, as does a
 *     limit raised to the whole 227 KiB; 48 KiB - 256 runs without it.
 *     The same two launches of a kernel whose array is declared in a
 *     header (static_smem_header.cuh) abort and run alike: a header's
 *     static shared memory counts as well. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "gpu_check.h"
#include "tap.h"
#include "tensor_core.cuh"
#include "static_smem_header.cuh"

using namespace st_cuda;

static uint16_t to_bf16_bits(float f) /* round to nearest even (finite f) */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf16_bits_to_f(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

enum perm { NONE, SWAP_A12, SWAP_B01, SWAP_C };

/* One warp per 16x16 A, 16x8 B, 16x8 C (row-major in global memory, bf16
 * bits for A and B), fragments gathered per the PTX table. */
template <int P>
__global__ void mma_kernel(float *d, const uint16_t *a, const uint16_t *b, const float *c)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const uint16_t *A = a + warp * 256, *B = b + warp * 128;
    const float *C = c + warp * 128;
    float *Dw = d + warp * 128;
    auto pair = [](uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); };
    uint32_t af[4], bf[2];
    af[0] = pair(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    af[1] = pair(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    af[2] = pair(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    af[3] = pair(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    bf[0] = pair(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    bf[1] = pair(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float cf[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                   C[(g + 8) * 8 + 2 * t + 1]};
    if (P == SWAP_A12) {
        const uint32_t x = af[1];
        af[1] = af[2];
        af[2] = x;
    }
    if (P == SWAP_B01) {
        const uint32_t x = bf[0];
        bf[0] = bf[1];
        bf[1] = x;
    }
    float df[4];
    st_mma_bf16_16816(df, af, bf, cf);
    const int r0 = P == SWAP_C ? g + 8 : g, r1 = P == SWAP_C ? g : g + 8;
    Dw[r0 * 8 + 2 * t] = df[0];
    Dw[r0 * 8 + 2 * t + 1] = df[1];
    Dw[r1 * 8 + 2 * t] = df[2];
    Dw[r1 * 8 + 2 * t + 1] = df[3];
}

/* max |D - (A B + C)| / max |A B + C| over both warps. */
template <int P> static double mma_error(void)
{
    const int W = 2;
    std::vector<uint16_t> a(W * 256), b(W * 128);
    std::vector<float> c(W * 128), d(W * 128);
    for (auto &x : a)
        x = to_bf16_bits(uniform_pm1());
    for (auto &x : b)
        x = to_bf16_bits(uniform_pm1());
    for (auto &x : c)
        x = uniform_pm1();
    uint16_t *da, *db;
    float *dc, *dd;
    CK(cudaMalloc(&da, a.size() * 2));
    CK(cudaMalloc(&db, b.size() * 2));
    CK(cudaMalloc(&dc, c.size() * 4));
    CK(cudaMalloc(&dd, d.size() * 4));
    CK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
    mma_kernel<P><<<1, 32 * W>>>(dd, da, db, dc);
    CK(cudaGetLastError());
    CK(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    double err = 0.0, ref_max = 0.0;
    for (int w = 0; w < W; w++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                double ref = c[w * 128 + i * 8 + j];
                for (int k = 0; k < 16; k++)
                    ref += (double)bf16_bits_to_f(a[w * 256 + i * 16 + k]) *
                           bf16_bits_to_f(b[w * 128 + k * 8 + j]);
                const double got = d[w * 128 + i * 8 + j];
                if (!isfinite(got))
                    return INFINITY;
                err = fmax(err, fabs(got - ref));
                ref_max = fmax(ref_max, fabs(ref));
            }
    return err / ref_max;
}

/* ldmatrix: four 8x8 matrices of distinct 16-bit patterns in shared
 * memory; lane l gives row l % 8 of matrix l / 8 (matrices beyond the
 * instruction's count get addresses too, which it must ignore). */
template <int N, bool TRANS> __global__ void ldmatrix_kernel(uint32_t *out, const uint16_t *src)
{
    __shared__ __align__(16) uint16_t tile[4 * 8 * 8];
    const int lane = threadIdx.x;
    for (int i = lane; i < 256; i += 32)
        tile[i] = src[i];
    __syncthreads();
    uint32_t r[4] = {0, 0, 0, 0};
    const uint16_t *row = tile + (lane / 8) * 64 + (lane % 8) * 8;
    if (N == 1)
        TRANS ? st_ldmatrix_x1_trans(r, row) : st_ldmatrix_x1(r, row);
    if (N == 2)
        TRANS ? st_ldmatrix_x2_trans(r, row) : st_ldmatrix_x2(r, row);
    if (N == 4)
        TRANS ? st_ldmatrix_x4_trans(r, row) : st_ldmatrix_x4(r, row);
    for (int i = 0; i < 4; i++)
        out[lane * 4 + i] = r[i];
}

template <int N, bool TRANS> static bool ldmatrix_ok(void)
{
    std::vector<uint16_t> src(256);
    for (int i = 0; i < 256; i++)
        src[i] = (uint16_t)(0x1000 + i * 7); /* distinct, any bits will do */
    uint16_t *dsrc;
    uint32_t *dout;
    std::vector<uint32_t> out(32 * 4);
    CK(cudaMalloc(&dsrc, 512));
    CK(cudaMalloc(&dout, out.size() * 4));
    CK(cudaMemcpy(dsrc, src.data(), 512, cudaMemcpyHostToDevice));
    ldmatrix_kernel<N, TRANS><<<1, 32>>>(dout, dsrc);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(dsrc);
    cudaFree(dout);
    bool ok = true;
    for (int lane = 0; lane < 32; lane++)
        for (int m = 0; m < N; m++) {
            const int g = lane / 4, t = lane % 4;
            uint16_t e[2];
            for (int j = 0; j < 2; j++) {
                const int r = TRANS ? 2 * t + j : g, c = TRANS ? g : 2 * t + j;
                e[j] = src[m * 64 + r * 8 + c];
            }
            const uint32_t want = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
            if (out[lane * 4 + m] != want) {
                if (ok)
                    tap_diag("ldmatrix x%d%s: lane %d register %d is %08x, want %08x", N,
                         TRANS ? ".trans" : "", lane, m, out[lane * 4 + m], want);
                ok = false;
            }
        }
    return ok;
}

/* cp.async: 32 threads, each copying one 16-byte chunk in group 0 and one
 * in group 1 (the second with src-size 0 for odd threads: zero-fill).
 * Snapshots of shared memory after wait_group 1 and after wait_group 0. */
__global__ void cp_async_kernel(uint32_t *after1, uint32_t *after0, const uint32_t *src)
{
    __shared__ __align__(16) uint32_t buf[2 * 32 * 4];
    const int t = threadIdx.x;
    for (int i = t; i < 256; i += 32)
        buf[i] = 0xdeadbeefu;
    __syncthreads();
    st_cp_async_16(buf + t * 4, src + t * 4, 16);
    st_cp_async_commit();
    st_cp_async_16(buf + 128 + t * 4, src + 128 + t * 4, (t & 1) ? 0 : 16);
    st_cp_async_commit();
    st_cp_async_wait<1>();
    __syncthreads();
    for (int i = t; i < 256; i += 32)
        after1[i] = buf[i];
    __syncthreads();
    st_cp_async_wait<0>();
    __syncthreads();
    for (int i = t; i < 256; i += 32)
        after0[i] = buf[i];
}

static void cp_async_checks(void)
{
    std::vector<uint32_t> src(256), a1(256), a0(256);
    for (int i = 0; i < 256; i++)
        src[i] = 0x01000000u + (uint32_t)i;
    uint32_t *dsrc, *d1, *d0;
    CK(cudaMalloc(&dsrc, 1024));
    CK(cudaMalloc(&d1, 1024));
    CK(cudaMalloc(&d0, 1024));
    CK(cudaMemcpy(dsrc, src.data(), 1024, cudaMemcpyHostToDevice));
    cp_async_kernel<<<1, 32>>>(d1, d0, dsrc);
    CK(cudaGetLastError());
    CK(cudaMemcpy(a1.data(), d1, 1024, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(a0.data(), d0, 1024, cudaMemcpyDeviceToHost));
    cudaFree(dsrc);
    cudaFree(d1);
    cudaFree(d0);
    bool older = true, both = true, zero = true, late = true;
    for (int i = 0; i < 128; i++)
        older = older && a1[i] == src[i];
    for (int i = 128; i < 256; i++) {
        const int thread = (i - 128) / 4;
        const uint32_t want = (thread & 1) ? 0u : src[i];
        both = both && a0[i] == want;
        zero = zero && ((thread & 1) == 0 || a0[i] == 0u);
        late = late && a1[i] == 0xdeadbeefu;
    }
    both = both && older;
    tap_ok(older, "cp.async: wait_group 1 has landed the older group");
    tap_ok(both, "cp.async: wait_group 0 has landed both groups");
    tap_ok(zero, "cp.async: src-size 0 zero-fills the 16 bytes");
#ifdef ST_CUDA_EMULATION
    tap_ok(late, "emulation: the younger group is not copied before its wait_group");
#else
    (void)late;
#endif
}

#ifdef ST_CUDA_EMULATION
__global__ void misaligned_kernel(uint32_t *out)
{
    __shared__ __align__(16) uint16_t tile[8 * 8 + 8];
    uint32_t r[1];
    st_ldmatrix_x1(r, tile + 1 + (threadIdx.x % 8) * 8); /* 2-byte aligned rows */
    out[threadIdx.x] = r[0];
}

/* launch(d) runs in a child process with a 128-byte device buffer d; true
 * when the child died of SIGABRT (the emulation's abort, with its message
 * sent to /dev/null). */
template <class F> static bool child_aborts(F launch)
{
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        uint32_t *d;
        cudaMalloc(&d, 128);
        launch(d);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static bool misaligned_aborts(void)
{
    return child_aborts([](uint32_t *d) { misaligned_kernel<<<1, 32>>>(d); });
}

/* Dynamic shared memory past the launch's allocation: a read gives the
 * poison (NaN bytes), a write aborts after the block. */
__global__ void smem_edge_kernel(uint32_t *out, int write_past)
{
    ST_DYNAMIC_SMEM(smem);
    uint32_t *w = reinterpret_cast<uint32_t *>(smem);
    w[threadIdx.x] = threadIdx.x; /* 32 words: the launch's 128 bytes */
    __syncthreads();
    out[threadIdx.x] = w[32 + threadIdx.x]; /* the next 128 bytes */
    if (write_past && threadIdx.x == 0)
        w[32] = 7;
}

static bool smem_read_past_is_poison(void)
{
    uint32_t *d;
    CK(cudaMalloc(&d, 128));
    smem_edge_kernel<<<1, 32, 128>>>(d, 0);
    uint32_t h[32];
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    cudaFree(d);
    bool all = true;
    for (uint32_t x : h)
        all = all && x == 0xffffffffu;
    return all;
}

static bool smem_write_past_aborts(void)
{
    return child_aborts([](uint32_t *d) { smem_edge_kernel<<<1, 32, 128>>>(d, 1); });
}
#endif

/* 6. Thread 0 of the grid's last block writes 1 to *ran, after touching
 * the last byte of its dynamic shared memory. */
__global__ void launch_probe_kernel(int *ran, unsigned smem_bytes)
{
    ST_DYNAMIC_SMEM(smem);
    if (smem_bytes > 0)
        smem[smem_bytes - 1] = 1;
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 &&
        blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 &&
        blockIdx.z == gridDim.z - 1)
        *ran = 1;
}

/* 7. The same, for blocks of at most 64 threads. */
__global__ void __launch_bounds__(64) bounded_probe_kernel(int *ran, unsigned smem_bytes)
{
    ST_DYNAMIC_SMEM(smem);
    if (smem_bytes > 0)
        smem[smem_bytes - 1] = 1;
    if (threadIdx.x == 0 && blockIdx.x == gridDim.x - 1)
        *ran = 1;
}

/* 8. A kernel with 256 bytes of static shared memory beside its dynamic:
 * its default dynamic limit is 48 KiB less those 256.  Thread 0 writes 1
 * to *ran if every thread's static slot holds what it wrote. */
__global__ void static_smem_kernel(int *ran, unsigned smem_bytes)
{
    ST_DYNAMIC_SMEM(smem);
    __shared__ float pad[64];
    pad[threadIdx.x % 64] = (float)(threadIdx.x % 64);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (smem_bytes > 0)
            smem[smem_bytes - 1] = 1;
        *ran = pad[blockDim.x - 1] == (float)(blockDim.x - 1);
    }
}

/* allow_dynamic_smem, then a launch of static_smem_kernel with `bytes` of
 * dynamic shared memory: true when it ran without an error. */
static bool static_smem_runs_after_allow(int *dran, unsigned bytes)
{
    CK(cudaMemset(dran, 0, sizeof(int)));
    if (allow_dynamic_smem<static_smem_kernel>(bytes) != cudaSuccess)
        return false;
    static_smem_kernel<<<1, 32, bytes>>>(dran, bytes);
    const cudaError_t e = cudaGetLastError();
    int ran = 0;
    CK(cudaMemcpy(&ran, dran, sizeof ran, cudaMemcpyDeviceToHost));
    return e == cudaSuccess && ran == 1;
}

/* Launches a probe (the bounded one if `bounded`); true when it was
 * refused (an error, once, and *ran left 0) if `refused`, or ran (no
 * error, *ran 1) if not. */
static bool probe(int *dran, dim3 grid, dim3 block, unsigned smem, bool refused,
                  bool bounded = false)
{
    CK(cudaMemset(dran, 0, sizeof(int)));
    if (bounded)
        bounded_probe_kernel<<<grid, block, smem>>>(dran, smem);
    else
        launch_probe_kernel<<<grid, block, smem>>>(dran, smem);
    const cudaError_t e = cudaGetLastError(), after = cudaGetLastError();
    CK(cudaDeviceSynchronize());
    int ran = -1;
    CK(cudaMemcpy(&ran, dran, sizeof ran, cudaMemcpyDeviceToHost));
    return refused ? e != cudaSuccess && after == cudaSuccess && ran == 0
                   : e == cudaSuccess && ran == 1;
}

static void launch_checks(void)
{
    int *d;
    CK(cudaMalloc(&d, sizeof(int)));
    const unsigned k48 = 48 * 1024, k227 = 227 * 1024;
    tap_ok(probe(d, dim3(2, 1, 1), dim3(1024, 1, 1), 0, false),
           "launch: 2 blocks of 1024 threads run");
    tap_ok(probe(d, dim3(1), dim3(1025), 0, true), "launch: a block of 1025 threads is refused");
    tap_ok(probe(d, dim3(1), dim3(1, 1, 65), 0, true), "launch: a block z of 65 is refused");
    tap_ok(probe(d, dim3(0), dim3(32), 0, true), "launch: an empty grid is refused");
    tap_ok(probe(d, dim3(1, 65536, 1), dim3(32), 0, true),
           "launch: a grid y of 65536 is refused");
    tap_ok(probe(d, dim3(1), dim3(32), k48, false),
           "launch: 48 KiB of dynamic shared memory runs without raising the limit");
    tap_ok(probe(d, dim3(1), dim3(32), k48 + 16, true),
           "launch: 48 KiB + 16 bytes is refused before cudaFuncSetAttribute");
    tap_ok(cudaFuncSetAttribute(launch_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)(k227 + 1)) != cudaSuccess,
           "launch: a limit over 227 KiB cannot be set");
    CK(cudaFuncSetAttribute(launch_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)k227));
    tap_ok(probe(d, dim3(1), dim3(32), k48 + 16, false),
           "launch: 48 KiB + 16 bytes runs once the limit is raised");
    tap_ok(probe(d, dim3(1), dim3(32), k227 + 16, true),
           "launch: 227 KiB + 16 bytes is refused even so");

    tap_ok(probe(d, dim3(3), dim3(64), 0, false, true),
           "launch bounds: 64 threads run under __launch_bounds__(64)");
    tap_ok(probe(d, dim3(1), dim3(65), 0, true, true),
           "launch bounds: 65 threads are refused under __launch_bounds__(64)");
    tap_ok(probe(d, dim3(1), dim3(32, 3), 0, true, true),
           "launch bounds: a 32 x 3 block is refused under __launch_bounds__(64)");
    tap_ok(probe(d, dim3(1), dim3(64), k48 + 16, true, true),
           "allow_dynamic_smem: 48 KiB + 16 bytes is refused before it is called");
    tap_ok(allow_dynamic_smem<bounded_probe_kernel>(k48) == cudaSuccess &&
               probe(d, dim3(1), dim3(64), k48 + 16, true, true),
           "allow_dynamic_smem: allowing 48 KiB does not allow more");
    tap_ok(allow_dynamic_smem<bounded_probe_kernel>(k48 + 16) == cudaSuccess &&
               probe(d, dim3(1), dim3(64), k48 + 16, false, true),
           "allow_dynamic_smem: 48 KiB + 16 bytes runs once it is allowed");
    tap_ok(allow_dynamic_smem<bounded_probe_kernel>(k227 + 16) != cudaSuccess,
           "allow_dynamic_smem: over 227 KiB is an error");
#ifdef ST_CUDA_EMULATION
    /* In a child, before anything raised the kernel's limit: 256 static
     * bytes + 48 KiB - 128 dynamic is over the default; and a limit raised
     * to 227 KiB leaves no room for the static bytes. */
    tap_ok(child_aborts([](uint32_t *dd) {
               static_smem_kernel<<<1, 32, 48 * 1024 - 128>>>((int *)dd, 48 * 1024 - 128);
           }),
           "emulation: 256 static bytes + 48 KiB - 128 dynamic abort without "
           "cudaFuncSetAttribute (the device's default dynamic limit is 48 KiB less the static)");
    tap_ok(child_aborts([](uint32_t *dd) {
               cudaFuncSetAttribute(static_smem_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
               static_smem_kernel<<<1, 32, 1024>>>((int *)dd, 1024);
           }),
           "emulation: 256 static bytes with the dynamic limit raised to 227 KiB abort "
           "(cudaFuncSetAttribute fails on the device)");
    tap_ok(!child_aborts([](uint32_t *dd) {
               static_smem_kernel<<<1, 32, 48 * 1024 - 256>>>((int *)dd, 48 * 1024 - 256);
           }),
           "emulation: 256 static bytes + 48 KiB - 256 dynamic run without cudaFuncSetAttribute");
    tap_ok(child_aborts([](uint32_t *dd) {
               header_static_smem_kernel<<<1, 32, 48 * 1024 - 128>>>((int *)dd);
           }),
           "emulation: 256 static bytes declared in a header + 48 KiB - 128 dynamic abort "
           "without cudaFuncSetAttribute");
    tap_ok(!child_aborts([](uint32_t *dd) {
               header_static_smem_kernel<<<1, 32, 48 * 1024 - 256>>>((int *)dd);
           }),
           "emulation: 256 static bytes declared in a header + 48 KiB - 256 dynamic run");
#endif
    tap_ok(static_smem_runs_after_allow(d, k48 - 128),
           "allow_dynamic_smem: a kernel with 256 static bytes runs with 48 KiB - 128 dynamic "
           "(allowed from the first byte, not from 48 KiB)");
    cudaFree(d);
}

int main(void)
{
    gpu_rng_state = 0x2545f4914f6cdd1dull; /* this test's own inputs */
    const double e = mma_error<NONE>();
    tap_ok(e < 1e-5, "mma m16n8k16 bf16: D = A B + C on two warps (relative error %.2e)", e);
    const double e1 = mma_error<SWAP_A12>(), e2 = mma_error<SWAP_B01>(), e3 = mma_error<SWAP_C>();
    tap_ok(e1 > 1e-2, "mma: A registers 1 and 2 swapped is caught (error %.2e)", e1);
    tap_ok(e2 > 1e-2, "mma: B registers 0 and 1 swapped is caught (error %.2e)", e2);
    tap_ok(e3 > 1e-2, "mma: C/D row halves swapped is caught (error %.2e)", e3);
    tap_ok(ldmatrix_ok<1, false>(), "ldmatrix .x1");
    tap_ok(ldmatrix_ok<2, false>(), "ldmatrix .x2");
    tap_ok(ldmatrix_ok<4, false>(), "ldmatrix .x4");
    tap_ok(ldmatrix_ok<1, true>(), "ldmatrix .x1.trans");
    tap_ok(ldmatrix_ok<2, true>(), "ldmatrix .x2.trans");
    tap_ok(ldmatrix_ok<4, true>(), "ldmatrix .x4.trans");
    cp_async_checks();
#ifdef ST_CUDA_EMULATION
    tap_ok(misaligned_aborts(), "emulation: a misaligned ldmatrix row address aborts");
    tap_ok(smem_read_past_is_poison(),
           "emulation: dynamic shared memory past the launch's bytes reads as NaN bytes");
    tap_ok(smem_write_past_aborts(),
           "emulation: a write past the launch's dynamic shared memory aborts");
    tap_ok(child_aborts([](uint32_t *d) {
               emu_launch(dim3(1), dim3(65), [=]() { bounded_probe_kernel((int *)d, 0); });
           }),
           "emulation: a bounded kernel's launch without the probe aborts over its bound");
#endif
    launch_checks();
    return tap_done();
}
