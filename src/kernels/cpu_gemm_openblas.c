/* The CPU backend's matrix product, on OpenBLAS (Debian's
 * libopenblas-openmp-dev).  OpenBLAS was measured against BLIS and against
 * the hand-written kernel this file replaces (docs/benchmarks.md, "CPU
 * backend: matrix products"): on the GPT-2 124M products it ran 79-89
 * GFLOP/s on one core where BLIS ran 74-78 and the old kernel 18.
 *
 * Why the output is cut into tiles here rather than left to the library's
 * own threads: OpenBLAS's result for an element depends on how the call is
 * split (its threaded split, and even two serial calls on two halves, give
 * other bits than one serial call), so letting it thread would make the
 * bits depend on OMP_NUM_THREADS.  Instead the output is cut into a fixed
 * grid of TILE_M x TILE_N tiles that depends only on the shape, each tile is
 * one single-threaded OpenBLAS call summing the whole K in its own order,
 * and OpenMP hands tiles to threads.  The same calls with the same
 * arguments run whatever the thread count, so the result is bit-identical
 * for any thread count (tests/threads.sh checks it on whole runs).
 * 128 x 768 was the best fixed grid measured at one and two threads. */
#include "kernels/cpu_gemm.h"
#include "base/log.h"
#include "runtime/progress.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>

enum { TILE_M = 128, TILE_N = 768 };

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* OpenBLAS must run every call on one thread.  Its pthread build has its
 * own thread count, set to 1 once here.  Its OpenMP build instead follows
 * OpenMP: one thread inside an active parallel region, otherwise
 * omp_get_max_threads(), which serial_sgemm lowers to 1 around the call.
 * (openblas_set_num_threads also sets OpenMP's default team size to 1 in
 * that build, so the default is put back.) */
static void blas_single_thread(void)
{
    int omp_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(omp_threads);
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void serial_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc)
{
    /* pthread_once: several threads of a region may get here first. */
    pthread_once(&blas_once, blas_single_thread);
    const int outside = !omp_in_parallel(), threads = omp_get_max_threads();
    if (outside && threads > 1)
        omp_set_num_threads(1);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, alpha,
                A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
    if (outside && threads > 1)
        omp_set_num_threads(threads);
}

/* cblas reports a bad stride through xerbla and returns with C untouched:
 * a silently wrong product.  A bad stride here is a programming error, so
 * it stops the run with the call's shape instead. */
static void check_stride(const char *what, int64_t ld, int64_t cols, int64_t M, int64_t N,
                         int64_t K)
{
    if (ld < (cols > 1 ? cols : 1))
        st_fatal("matrix product %lldx%lldx%lld: %s stride %lld is less than its %lld columns",
                 (long long)M, (long long)N, (long long)K, what, (long long)ld,
                 (long long)cols);
}

void st_gemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
             const float *A, int64_t lda, const float *B, int64_t ldb,
             float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    check_stride("C", ldc, N, M, N, K);
    if (K <= 0) {
        /* An empty sum: C = beta*C, which OpenBLAS may skip altogether. */
        if (beta == 0.0f)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    C[i * ldc + j] = 0.0f;
        return;
    }
    check_stride("A", lda, trans_a ? M : K, M, N, K);
    check_stride("B", ldb, trans_b ? K : N, M, N, K);
    /* Debian's OpenBLAS counts in 32-bit ints (not its ILP64 build). */
    if (K > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        st_fatal("matrix product %lldx%lldx%lld: a size or stride exceeds OpenBLAS's 32-bit int",
                 (long long)M, (long long)N, (long long)K);
    const int64_t mt = (M + TILE_M - 1) / TILE_M, nt = (N + TILE_N - 1) / TILE_N;
    /* Never more threads than tiles; a single tile runs on the calling
     * thread, with no team to wake. */
    const int64_t tiles = mt * nt;
    const int team = (int)min64(tiles, omp_get_max_threads());
#pragma omp parallel for schedule(static) collapse(2) num_threads(team) if (team > 1)
    for (int64_t it = 0; it < mt; it++) {
        for (int64_t jt = 0; jt < nt; jt++) {
            const int64_t i0 = it * TILE_M, j0 = jt * TILE_N;
            const int64_t m = min64(TILE_M, M - i0), n = min64(TILE_N, N - j0);
            /* op(A) rows i0.. and op(B) columns j0..: where they start in
             * the stored matrices depends on the transposes. */
            const float *a = trans_a ? A + i0 : A + i0 * lda;
            const float *b = trans_b ? B + j0 * ldb : B + j0;
            serial_sgemm(trans_a, trans_b, m, n, K, 1.0f, a, lda, b, ldb, beta,
                         C + i0 * ldc + j0, ldc);
            /* Communication in flight moves on between tiles (progress.h). */
            if (omp_get_thread_num() == 0)
                st_progress_poll();
        }
    }
}

void st_gemm_serial(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc)
{
    serial_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
