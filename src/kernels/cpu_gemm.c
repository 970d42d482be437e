/* Matrix product for the CPU backend.  Every dense layer's forward and
 * backward goes through st_gemm, so it is the one kernel worth some care:
 * op(A) and op(B) are packed into contiguous, zero-padded tiles (which also
 * takes care of the transposes), and a register-blocked inner loop of
 * 4 rows x 64 columns lets the compiler vectorise; it is cloned for
 * AVX-512 and AVX+FMA and picked at load time by what the CPU supports.  Threads split the
 * output into tiles; the K dimension is always summed by one thread in the
 * same order, so results are bit-identical for any thread count. */
#include "kernels/cpu_gemm.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

enum { MC = 64, NC = 256, KC = 256, MR = 4, NR = 64 };

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Ap[i*KC + k] = op(A)[i0+i, k0+k], zero beyond the valid region. */
static void pack_a(float *Ap, int trans, const float *A, int64_t lda,
                   int64_t i0, int64_t mc, int64_t mc_pad, int64_t k0, int64_t kc)
{
    for (int64_t i = 0; i < mc_pad; i++) {
        float *dst = Ap + i * KC;
        if (i >= mc) {
            memset(dst, 0, (size_t)kc * sizeof *dst);
            continue;
        }
        if (!trans) {
            memcpy(dst, A + (i0 + i) * lda + k0, (size_t)kc * sizeof *dst);
        } else {
            for (int64_t k = 0; k < kc; k++)
                dst[k] = A[(k0 + k) * lda + i0 + i];
        }
    }
}

/* Bp[k*NC + j] = op(B)[k0+k, j0+j], zero-padded to nc_pad columns. */
static void pack_b(float *Bp, int trans, const float *B, int64_t ldb,
                   int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t nc_pad)
{
    for (int64_t k = 0; k < kc; k++) {
        float *dst = Bp + k * NC;
        if (!trans) {
            memcpy(dst, B + (k0 + k) * ldb + j0, (size_t)nc * sizeof *dst);
        } else {
            for (int64_t j = 0; j < nc; j++)
                dst[j] = B[(j0 + j) * ldb + k0 + k];
        }
        for (int64_t j = nc; j < nc_pad; j++)
            dst[j] = 0.0f;
    }
}

/* Cc[MR rows, NR cols] += Ap[MR, kc] * Bp[kc, NR]; accumulators stay in
 * registers across the whole kc loop. */
__attribute__((target_clones("avx512f", "fma", "default")))
static void micro_kernel(float *Cc, int64_t ldc, const float *Ap,
                         const float *Bp, int64_t kc)
{
    float acc[MR][NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        const float *b = Bp + k * NC;
        for (int r = 0; r < MR; r++) {
            float a = Ap[r * KC + k];
#pragma omp simd
            for (int j = 0; j < NR; j++)
                acc[r][j] += a * b[j];
        }
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++)
            Cc[r * ldc + j] += acc[r][j];
}

void st_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
             const float *A, int64_t lda, const float *B, int64_t ldb,
             float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    int64_t mt = (M + MC - 1) / MC, nt = (N + NC - 1) / NC;
#pragma omp parallel
    {
        /* Per-thread packing buffers; malloc here keeps them off the stack. */
        float *Ap = malloc(sizeof(float) * MC * KC);
        float *Bp = malloc(sizeof(float) * KC * NC);
        float *Cc = malloc(sizeof(float) * MC * NC);
        /* Inside a parallel region of a kernel that returns nothing:
         * there is no way back to the caller. */
        if (!Ap || !Bp || !Cc)
            st_fatal("out of memory in matrix product");
#pragma omp for schedule(static) collapse(2)
        for (int64_t it = 0; it < mt; it++) {
            for (int64_t jt = 0; jt < nt; jt++) {
                int64_t i0 = it * MC, j0 = jt * NC;
                int64_t mc = min64(MC, M - i0), nc = min64(NC, N - j0);
                int64_t mc_pad = (mc + MR - 1) / MR * MR;
                int64_t nc_pad = (nc + NR - 1) / NR * NR;
                memset(Cc, 0, sizeof(float) * MC * NC);
                for (int64_t k0 = 0; k0 < K; k0 += KC) {
                    int64_t kc = min64(KC, K - k0);
                    pack_a(Ap, trans_a, A, lda, i0, mc, mc_pad, k0, kc);
                    pack_b(Bp, trans_b, B, ldb, k0, kc, j0, nc, nc_pad);
                    for (int64_t i = 0; i < mc_pad; i += MR)
                        for (int64_t j = 0; j < nc_pad; j += NR)
                            micro_kernel(Cc + i * NC + j, NC, Ap + i * KC, Bp + j, kc);
                }
                for (int64_t i = 0; i < mc; i++) {
                    float *c = C + (i0 + i) * ldc + j0;
                    const float *cc = Cc + i * NC;
                    if (beta == 0.0f)
                        memcpy(c, cc, (size_t)nc * sizeof *c);
                    else
                        for (int64_t j = 0; j < nc; j++)
                            c[j] += cc[j];
                }
            }
        }
        free(Ap);
        free(Bp);
        free(Cc);
    }
}
