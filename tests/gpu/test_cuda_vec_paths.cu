/* The 16-byte paths (common.cuh) of the CUDA backend's elementwise
 * kernels against the CPU ops: SwiGLU, RoPE, add_inplace (cuda/
 * elementwise.cu), the bf16 casts and the strided unpack (cuda/casts.cu),
 * at widths that are multiples of 8 (vector in fp32 and bf16), of 4 but
 * not 8 (vector in fp32 only) and odd (scalar).  The reductions' paths,
 * and the norm and embedding forwards', are test_cuda_reduce.cu's.
 *
 * Checks (TAP): each result against the CPU op within 1e-4 (fp32) or 2e-2
 * (bf16 storage); the casts bit for bit against base/dtype.h's; every op
 * run on aligned operands and again on the same data skewed by one
 * element, which must give the same bits, and under the emulation the
 * count of 16-byte accesses must show the vector path taken exactly where
 * the widths allow it and never for skewed operands (the emulation also
 * aborts on a misaligned 16-byte access, as a GPU faults).  Outputs start
 * as NaN, so an unwritten element fails.  Last, a "# digest" line hashes
 * the bits of every result, compared by tests/gpu/emu/run_reduce.sh with
 * those of a rerun in reversed thread order.
 *
 * Without a usable GPU the program prints "Bail out!" and exits 1; it is
 * meant for the host emulation (run_reduce.sh) and builds with nvcc too. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cpu_ref.h"
#include "kernels/cpu_ops.h"
#include "model/model.h" /* st_rope_tables */
#include "ops.h"
#include "tap.h"
#include "gpu_alloc.h"
#include "gpu_check.h"
#include "kernel_check.h"

static void test_swiglu(bool bf, int64_t N, int64_t F)
{
    char shape[64];
    snprintf(shape, sizeof shape, "N=%lld F=%lld", (long long)N, (long long)F);
    std::vector<float> gu = rnd(N * 2 * F, bf, 3.0f), dout = rnd(N * F, bf);
    std::vector<float> ref(N * F), dref(N * 2 * F);
    st_swiglu_forward(ref.data(), gu.data(), N, F);
    st_swiglu_backward(dref.data(), gu.data(), dout.data(), N, F);
    const bool vec = vec_width_ok(bf, F);
    std::vector<float> out = both_paths("swiglu_forward", bf, shape, vec, [&](int k) {
        void *o = nan_buf(N * F, bf, k);
        const void *g = up(gu, bf, k);
        CK(bf ? st_cuda_swiglu_forward_bf16((uint16_t *)o, (const uint16_t *)g, N, F, 0)
              : st_cuda_swiglu_forward_f32((float *)o, (const float *)g, N, F, 0));
        CK(cudaDeviceSynchronize());
        return down(o, N * F, bf);
    });
    check("swiglu_forward", bf, shape, out, ref);
    std::vector<float> dgu = both_paths("swiglu_backward", bf, shape, vec, [&](int k) {
        void *o = nan_buf(N * 2 * F, bf, k);
        const void *g = up(gu, bf, k), *d = up(dout, bf, k);
        CK(bf ? st_cuda_swiglu_backward_bf16((uint16_t *)o, (const uint16_t *)g,
                                             (const uint16_t *)d, N, F, 0)
              : st_cuda_swiglu_backward_f32((float *)o, (const float *)g, (const float *)d, N,
                                            F, 0));
        CK(cudaDeviceSynchronize());
        return down(o, N * 2 * F, bf);
    });
    check("swiglu_backward", bf, shape, dgu, dref);
    free_all();
}

/* x's rows of ld > n_heads * hd (q or k inside a qkv row): the channels
 * outside the heads must come back untouched. */
static void test_rope(bool bf, int64_t B, int64_t T, int64_t nh, int64_t hd, int64_t ld,
                      int inverse)
{
    char shape[96];
    snprintf(shape, sizeof shape, "B=%lld T=%lld heads=%lld hd=%lld ld=%lld%s", (long long)B,
             (long long)T, (long long)nh, (long long)hd, (long long)ld,
             inverse ? " inverse" : "");
    std::vector<float> c(T * hd / 2), sn(T * hd / 2), x = rnd(B * T * ld, bf);
    st_rope_tables(c.data(), sn.data(), T, hd, 10000.0);
    std::vector<float> ref = x;
    st_rope_apply(ref.data(), ld, B, T, nh, hd, c.data(), sn.data(), inverse);
    const bool vec = vec_width_ok(bf, hd / 2) && vec_width_ok(bf, ld);
    std::vector<float> got = both_paths("rope_apply", bf, shape, vec, [&](int k) {
        void *dx = up(x, bf, k);
        const float *dc = (const float *)up(c, false, k), *ds = (const float *)up(sn, false, k);
        CK(bf ? st_cuda_rope_apply_bf16((uint16_t *)dx, ld, B, T, nh, hd, dc, ds, inverse, 0)
              : st_cuda_rope_apply_f32((float *)dx, ld, B, T, nh, hd, dc, ds, inverse, 0));
        CK(cudaDeviceSynchronize());
        return down(dx, B * T * ld, bf);
    });
    check("rope_apply", bf, shape, got, ref);
    free_all();
}

static void test_add(bool bf, int64_t n)
{
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    std::vector<float> y = rnd(n, bf), x = rnd(n, bf), ref = y;
    st_add_inplace(ref.data(), x.data(), n);
    std::vector<float> got = both_paths("add_inplace", bf, shape, vec_width_ok(bf, n),
                                        [&](int k) {
        void *dy = up(y, bf, k);
        const void *dx = up(x, bf, k);
        CK(bf ? st_cuda_add_inplace_bf16((uint16_t *)dy, (const uint16_t *)dx, n, 0)
              : st_cuda_add_inplace_f32((float *)dy, (const float *)dx, n, 0));
        CK(cudaDeviceSynchronize());
        return down(dy, n, bf);
    });
    check("add_inplace", bf, shape, got, ref);
    free_all();
}

/* The casts, bit for bit against base/dtype.h's, on special values
 * (signed zeros, ties, overflow, inf, NaN, subnormals) and random ones;
 * pack's bf16 results are compared as floats (the words shifted up). */
static void test_casts(int64_t n)
{
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u,
        0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffc00001u, 0x00000001u, 0x80018000u};
    const int64_t nspec = (int64_t)(sizeof special / sizeof special[0]);
    char shape[32];
    snprintf(shape, sizeof shape, "n=%lld", (long long)n);
    std::vector<float> src = rnd(n, false, 1e3f);
    for (int64_t i = 0; i < n && i < nspec; i++)
        memcpy(&src[i], &special[i], 4);
    std::vector<float> rround(n), runp(n);
    std::vector<uint16_t> rpack(n);
    st_round_bf16(rround.data(), src.data(), n);
    st_pack_bf16(rpack.data(), src.data(), n);
    st_unpack_bf16(runp.data(), rpack.data(), n);
    /* op(dst, src) on NaN-filled dst; unpack's input is pack's result
     * (runp's values are bf16, so up() gives exactly rpack's words). */
    auto cast = [&](const char *what, bool bf_out, bool bf_in, const std::vector<float> &ref,
                    auto op) {
        const bool vec = vec_width_ok(bf_out || bf_in, n);
        std::vector<float> got = both_paths(what, bf_out || bf_in, shape, vec, [&](int k) {
            void *d = nan_buf(n, bf_out, k);
            CK(op(d, up(bf_in ? runp : src, bf_in, k)));
            CK(cudaDeviceSynchronize());
            return down(d, n, bf_out);
        });
        tap_ok(!memcmp(got.data(), ref.data(), n * 4), "%s %s: bit-identical to the CPU", what,
               shape);
    };
    cast("round_bf16", false, false, rround, [&](void *d, const void *in) {
        return st_cuda_round_bf16((float *)d, (const float *)in, n, 0);
    });
    cast("pack_bf16", true, false, runp, [&](void *d, const void *in) {
        return st_cuda_pack_bf16((uint16_t *)d, (const float *)in, n, 0);
    });
    cast("unpack_bf16", false, true, runp, [&](void *d, const void *in) {
        return st_cuda_unpack_bf16((float *)d, (const uint16_t *)in, n, 0);
    });
    free_all();
}

/* rows x cols of a bf16 matrix of row stride lds into fp32 rows of ldd. */
static void test_unpack_rows(int64_t rows, int64_t cols, int64_t lds, int64_t ldd)
{
    char shape[80];
    snprintf(shape, sizeof shape, "rows=%lld cols=%lld lds=%lld ldd=%lld", (long long)rows,
             (long long)cols, (long long)lds, (long long)ldd);
    std::vector<float> src = rnd(rows * lds, true), ref(rows * cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            ref[r * cols + c] = src[r * lds + c];
    const bool vec = vec_width_ok(true, cols) && vec_width_ok(true, lds) &&
                     vec_width_ok(false, ldd);
    std::vector<float> got = both_paths("unpack_bf16_rows", true, shape, vec, [&](int k) {
        float *d = (float *)nan_buf(rows * ldd, false, k);
        CK(st_cuda_unpack_bf16_rows(d, ldd, (const uint16_t *)up(src, true, k), lds, rows,
                                    cols, 0));
        CK(cudaDeviceSynchronize());
        std::vector<float> h = down(d, rows * ldd, false), dense(rows * cols);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dense[r * cols + c] = h[r * ldd + c];
        return dense;
    });
    tap_ok(!memcmp(got.data(), ref.data(), ref.size() * 4),
           "unpack_bf16_rows %s: bit-identical to the CPU", shape);
    free_all();
}

int main(void)
{
    if (!have_gpu())
        return 1;
    for (int bf = 0; bf < 2; bf++) {
        /* Widths a multiple of 8 (vector in both types), of 4 but not 8
         * (vector in fp32 only), odd (scalar). */
        for (int64_t w : {264, 260, 261}) {
            test_swiglu(bf, 3, w);
            test_add(bf, 3 * w);
        }
        test_rope(bf, 1, 5, 2, 64, 2 * 64 + 16, 0); /* every width a multiple of 8 */
        test_rope(bf, 2, 3, 2, 72, 2 * 72 + 4, 1);  /* hd / 2 = 36, ld a multiple of 4 */
        test_rope(bf, 1, 5, 2, 74, 2 * 74 + 2, 0);  /* hd / 2 odd */
        test_rope(bf, 1, 5, 2, 64, 2 * 64 + 3, 1);  /* ld odd */
    }
    for (int64_t n : {264 * 3, 260 * 3, 261 * 3})
        test_casts(n);
    test_unpack_rows(3, 264, 272, 268); /* vector: cols, lds multiples of 8, ldd of 4 */
    test_unpack_rows(3, 264, 270, 268); /* lds not a multiple of 8: scalar */
    test_unpack_rows(3, 261, 264, 264); /* odd cols: scalar */
    print_digest();
    return tap_done();
}
