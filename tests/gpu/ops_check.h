/* What the GPU test programs of cuda/ops.h share, test_cuda_ops.cu (the
 * non-attention ops) and test_cuda_gemm.cu (the products): the tolerances
 * and the one error measure (max |gpu - cpu| / max |cpu|, see
 * test_cuda_ops.cu), the compute stream, the reductions' workspace, a
 * reproducible random source, and Buf, a host array with its device twin
 * in fp32 or bf16 storage.  C++, one program per including file. */
#ifndef ST_TESTS_GPU_OPS_CHECK_H
#define ST_TESTS_GPU_OPS_CHECK_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <vector>

#include "kernels/cpu_ops.h"
#include "gpu_check.h"
#include "tap.h"

static cudaStream_t g_stream;

/* Workspace of the two-stage reductions (bias, norm and embedding
 * backward): one device block, grown on demand, freed at exit. */
static void *g_ws;
static size_t g_ws_bytes;
static inline void *ws(size_t bytes)
{
    if (bytes > g_ws_bytes) {
        CK(cudaDeviceSynchronize());
        if (g_ws)
            CK(cudaFree(g_ws));
        CK(cudaMalloc(&g_ws, bytes));
        g_ws_bytes = bytes;
    }
    return g_ws;
}

/* Launch, then wait, so a fault is reported at the op that caused it. */
#define RUN(call)                                                                          \
    do {                                                                                   \
        CK(call);                                                                          \
        CK(cudaStreamSynchronize(g_stream));                                               \
    } while (0)

/* xorshift64: reproducible inputs without depending on libc's rand. */
/* Not gpu_check.h's uniform_pm1, whose values are multiples of 2^-23:
 * urand's carry full mantissas at every magnitude, down to the low bits
 * that the bf16 casts' rounding reads. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static inline float urand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

/* A host array of floats and its device twin stored as fp32 or bf16.  In
 * bf16 mode the host values are kept rounded to bf16, so the CPU reference
 * sees exactly the numbers the GPU reads. */
struct Buf {
    bool bf;
    size_t n;
    std::vector<float> h;
    void *d = nullptr;
    Buf(size_t n_, bool bf_) : bf(bf_), n(n_ ? n_ : 1), h(n, 0.0f)
    {
        CK(cudaMalloc(&d, bytes()));
    }
    ~Buf() { cudaFree(d); }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    size_t bytes() const { return n * (bf ? 2 : 4); }
    void round() { if (bf) st_round_bf16(h.data(), h.data(), (int64_t)n); }
    /* Random values offset + scale * U[-1, 1), then uploaded. */
    void fill(float scale, float offset = 0.0f)
    {
        for (auto &x : h)
            x = offset + scale * urand();
        round();
        up();
    }
    void up()
    {
        if (bf) {
            std::vector<uint16_t> w(n);
            st_pack_bf16(w.data(), h.data(), (int64_t)n);
            CK(cudaMemcpy(d, w.data(), bytes(), cudaMemcpyHostToDevice));
        } else {
            CK(cudaMemcpy(d, h.data(), bytes(), cudaMemcpyHostToDevice));
        }
    }
    /* All-ones bytes are NaN in fp32 and in bf16. */
    void poison() { CK(cudaMemset(d, 0xff, bytes())); }
    std::vector<float> down() const
    {
        std::vector<float> out(n);
        if (bf) {
            std::vector<uint16_t> w(n);
            CK(cudaMemcpy(w.data(), d, bytes(), cudaMemcpyDeviceToHost));
            st_unpack_bf16(out.data(), w.data(), (int64_t)n);
        } else {
            CK(cudaMemcpy(out.data(), d, bytes(), cudaMemcpyDeviceToHost));
        }
        return out;
    }
    float *f() { return (float *)d; }
    uint16_t *u() { return (uint16_t *)d; }
};

static inline double rel_err(const std::vector<float> &got, const std::vector<float> &ref)
{
    return rel_err(got.data(), ref.data(), ref.size());
}

static inline void report(const char *op, bool bf, const char *shape, double err)
{
    const double tol = bf ? kTolBf16 : kTolF32;
    tap_ok(err <= tol, "%s %s %s: max rel err %.3g (tol %.0e)", op, bf ? "bf16" : "f32",
           shape, err, tol);
}

/* Whether device 0 can be used, saying which it is; if not, the TAP
 * "Bail out!" line (the program then exits 1: a failure, not a skip).
 * Creates g_stream. */
static inline bool open_device(const char *program)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("Bail out! no usable CUDA GPU (%s): %s needs one\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", program);
        return false;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    tap_diag("device 0: %s, compute capability %d.%d", prop.name, prop.major, prop.minor);
    CK(cudaStreamCreate(&g_stream));
    return true;
}

/* Frees the workspace and the stream. */
static inline void close_device(void)
{
    if (g_ws)
        CK(cudaFree(g_ws));
    CK(cudaStreamDestroy(g_stream));
}

#endif
