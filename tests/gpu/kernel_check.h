/* The device round trips and checks shared by the tests of the
 * memory-bound kernels, test_cuda_reduce.cu (the deterministic reductions)
 * and test_cuda_vec_paths.cu (the elementwise kernels' 16-byte paths): bf16
 * rounding as the device stores it, random inputs the CPU sees exactly as
 * the GPU reads them, uploads that can be skewed off 16-byte alignment on
 * purpose, NaN-filled outputs and workspaces (so an unwritten element
 * fails), the relative-error check against the CPU op, both_paths (the
 * same op aligned and skewed, which must give the same bits, and under the
 * emulation the count of 16-byte accesses saying which path each took),
 * and a digest of every result's bits for the reversed-thread-order rerun
 * (tests/gpu/emu/run_reduce.sh).  C++, one program per including file. */
#ifndef ST_TESTS_GPU_KERNEL_CHECK_H
#define ST_TESTS_GPU_KERNEL_CHECK_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cpu_ref.h"
#include "gpu_alloc.h"
#include "gpu_check.h"
#include "tap.h"

static uint64_t g_digest = 0xcbf29ce484222325ull; /* FNV-1a over result bits */

static inline void digest(const std::vector<float> &v)
{
    const unsigned char *p = (const unsigned char *)v.data();
    for (size_t i = 0; i < v.size() * sizeof(float); i++) {
        g_digest ^= p[i];
        g_digest *= 0x100000001b3ull;
    }
}

/* bf16 bits of f, round to nearest even (finite inputs only here). */
static inline uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float f_of(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* n random values in [-scale, scale), rounded to bf16 when bf, so the CPU
 * sees exactly what the GPU reads. */
static inline std::vector<float> rnd(int64_t n, bool bf, float scale = 1.0f)
{
    std::vector<float> v(n);
    for (auto &x : v) {
        x = uniform_pm1() * scale;
        if (bf)
            x = f_of(bf16_of(x));
    }
    return v;
}

/* Host floats -> device as float or bf16 words, starting `skew` elements
 * into the allocation (to break 16-byte alignment on purpose). */
static inline void *up(const std::vector<float> &h, bool bf, int skew = 0)
{
    const size_t es = bf ? 2 : 4;
    char *d = (char *)dalloc((h.size() + skew) * es);
    if (bf) {
        std::vector<uint16_t> w(h.size());
        for (size_t i = 0; i < h.size(); i++)
            w[i] = bf16_of(h[i]);
        CK(cudaMemcpy(d + skew * es, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(d + skew * es, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    return d + skew * es;
}
static inline std::vector<float> down(const void *d, int64_t n, bool bf)
{
    std::vector<float> h(n);
    if (bf) {
        std::vector<uint16_t> w(n);
        CK(cudaMemcpy(w.data(), d, n * 2, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < n; i++)
            h[i] = f_of(w[i]);
    } else {
        CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    }
    return h;
}
/* A workspace full of NaN (0xff bytes), as a reused scratch may hold. */
static inline void *nan_ws(size_t bytes)
{
    void *d = dalloc(bytes);
    CK(cudaMemset(d, 0xff, bytes ? bytes : 1));
    return d;
}

static inline void check(const char *what, bool bf, const char *shape,
                         const std::vector<float> &got, const std::vector<float> &ref)
{
    const double e = rel_err(got.data(), ref.data(), got.size()), tol = bf ? kTolBf16 : kTolF32;
    tap_ok(e <= tol, "%s %s %s: rel err %.3g (tol %.0e)", what, bf ? "bf16" : "fp32", shape, e,
           tol);
    digest(got);
}

/* ---- the 16-byte paths ----------------------------------------------------
 * Each vectorised launcher (common.cuh) is run twice on the same data: with
 * every device operand at the start of an allocation (16-byte aligned: the
 * vector path where the widths allow it) and with every one skewed by one
 * element (never aligned: the scalar path).  The two must give the same
 * bits.  Under the emulation, which aborts on a misaligned 16-byte access,
 * the count of 16-byte accesses also says which path each run took: some
 * exactly when the widths are multiples of V (expect_vec), none when
 * skewed. */
static inline long vec_accesses(void)
{
#ifdef ST_CUDA_EMULATION
    return emu_vec_accesses;
#else
    return 0;
#endif
}

/* n NaN elements on the device, `skew` elements past the allocation. */
static inline void *nan_buf(int64_t n, bool bf, int skew)
{
    const size_t es = bf ? 2 : 4;
    return (char *)nan_ws((n + skew) * es) + skew * es;
}

/* run(skew) launches the op with its operands skewed by `skew` elements
 * and returns its results; the aligned run's are returned (and digested). */
template <class F>
static inline std::vector<float> both_paths(const char *what, bool bf, const char *shape,
                                            bool expect_vec, F run)
{
    const long c0 = vec_accesses();
    std::vector<float> a = run(0);
    const long c1 = vec_accesses();
    std::vector<float> b = run(1);
    const long c2 = vec_accesses();
    const char *ty = bf ? "bf16" : "fp32";
#ifdef ST_CUDA_EMULATION
    tap_ok((c1 > c0) == expect_vec && c2 == c1,
           "%s %s %s: %s path when aligned (%ld 16-byte accesses), scalar when skewed (%ld)",
           what, ty, shape, expect_vec ? "16-byte" : "scalar", c1 - c0, c2 - c1);
#else
    (void)c0, (void)c1, (void)c2, (void)expect_vec;
#endif
    tap_ok(a.size() == b.size() && !memcmp(a.data(), b.data(), a.size() * sizeof(float)),
           "%s %s %s: aligned and skewed operands give identical bits", what, ty, shape);
    digest(a);
    return a;
}

static inline std::vector<float> cat(std::vector<float> a, const std::vector<float> &b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
static inline std::vector<float> part(const std::vector<float> &v, size_t at, size_t n)
{
    return std::vector<float>(v.begin() + at, v.begin() + at + n);
}
static inline bool vec_width_ok(bool bf, int64_t w) { return w % (bf ? 8 : 4) == 0; }

/* Whether a CUDA device (or the emulation's) can be used; if not, the TAP
 * "Bail out!" line, and the program exits 1 (a failure, not a skip). */
static inline bool have_gpu(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0)
        return true;
    printf("Bail out! no usable CUDA GPU\n");
    return false;
}

/* The digest line run_reduce.sh compares between the two thread orders. */
static inline void print_digest(void)
{
    printf("# digest %016llx\n", (unsigned long long)g_digest);
}

#endif
