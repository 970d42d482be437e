/* Matrix-product benchmark for the CPU backend (bench/gemm_cpu.sh builds
 * and runs it; docs/benchmarks.md has the results).  It times the products
 * one GPT-2 124M training step makes at batch 4 x 256 tokens (1,024 rows,
 * d_model 768, d_ff 3,072, the 50,257-word head in 256-row chunks), each
 * the best of 3 runs after a warm-up, and prints GFLOP/s per shape and in
 * total, plus a digest of the outputs: equal digests at two thread counts
 * mean bit-identical products.
 *
 *   gemm_cpu st      st_gemm: OpenBLAS in shardtrain's fixed tile grid
 *   gemm_cpu cblas   one cblas_sgemm call, threaded by the library itself
 *
 * Built against OpenBLAS's or BLIS's cblas.h, the "cblas" mode measures
 * that library. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#ifdef WITH_SHARDTRAIN
#include "kernels/cpu_gemm.h"
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int use_st;

static void product(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                    int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc)
{
#ifdef WITH_SHARDTRAIN
    if (use_st) {
        st_gemm(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, ldc);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "st") && strcmp(argv[1], "cblas"))) {
        fprintf(stderr, "usage: gemm_cpu st|cblas\n");
        return 2;
    }
    use_st = strcmp(argv[1], "st") == 0;
#ifndef WITH_SHARDTRAIN
    if (use_st) {
        fprintf(stderr, "gemm_cpu: built without shardtrain's st_gemm\n");
        return 2;
    }
#endif
    /* {trans_a, trans_b, M, N, K}: forward y = x W^T, backward dx = dy W
     * and dW = dy^T x, for qkv, attention projection, fc, mlp projection,
     * then the head's three products on one 256-row chunk. */
    static const int64_t shapes[][5] = {
        {0, 1, 1024, 2304, 768}, {0, 1, 1024, 768, 768},  {0, 1, 1024, 3072, 768},
        {0, 1, 1024, 768, 3072}, {0, 0, 1024, 768, 2304}, {1, 0, 2304, 768, 1024},
        {0, 0, 1024, 768, 3072}, {1, 0, 3072, 768, 1024}, {0, 0, 1024, 3072, 768},
        {1, 0, 768, 3072, 1024}, {0, 1, 256, 50257, 768}, {0, 0, 256, 768, 50257},
        {1, 0, 50257, 768, 256}};
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    const size_t big = (size_t)50257 * 1024;
    float *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B),
          *C = malloc(big * sizeof *C);
    if (!A || !B || !C) {
        fprintf(stderr, "gemm_cpu: out of memory\n");
        return 1;
    }
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < big; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        A[i] = (float)(x >> 40) / (float)(1u << 24) - 0.5f;
        B[i] = (float)(x & 0xffffff) / (float)(1u << 24) - 0.5f;
    }
    double total_s = 0.0, total_flop = 0.0;
    uint64_t digest = 1469598103934665603u;
    printf("threads %d, mode %s\n", omp_get_max_threads(), argv[1]);
    for (int s = 0; s < ns; s++) {
        const int64_t *p = shapes[s];
        const int ta = (int)p[0], tb = (int)p[1];
        const int64_t M = p[2], N = p[3], K = p[4];
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        product(ta, tb, M, N, K, A, lda, B, ldb, C, N);
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            product(ta, tb, M, N, K, A, lda, B, ldb, C, N);
            double t = now() - t0;
            best = t < best ? t : best;
        }
        const unsigned char *bytes = (const unsigned char *)C;
        for (size_t i = 0; i < (size_t)(M * N) * sizeof(float); i++)
            digest = (digest ^ bytes[i]) * 1099511628211u;
        const double flop = 2.0 * (double)M * (double)N * (double)K;
        total_s += best;
        total_flop += flop;
        printf("  %s%s %6lld x %6lld x %6lld  %8.2f ms  %6.1f GFLOP/s\n", ta ? "T" : "N",
               tb ? "T" : "N", (long long)M, (long long)N, (long long)K, best * 1e3,
               flop / best * 1e-9);
    }
    printf("total %.1f ms, %.1f GFLOP/s, digest %016llx\n", total_s * 1e3,
           total_flop / total_s * 1e-9, (unsigned long long)digest);
    free(A);
    free(B);
    free(C);
    return 0;
}
