/* Unit tests of the CPU kernels, the optimizer, the schedules, the
 * tracking allocator and the atomic file write, each against an
 * independent float64 reference, a closed-form value or the files left
 * behind; of how the test-only hooks read their environment variables;
 * and of the one-line error messages and their marked cuts. */
#include "base/alloc.h"
#include "base/files.h"
#include "base/log.h"
#include "config/config.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_math.h"
#include "kernels/cpu_ops.h"
#include "model/model.h"
#include "engine/lr_schedule.h"
#include "kernels/cpu_adamw.h"
#include "base/rng.h"
#include "runtime/progress.h"
#include "base/test_faults.h"
#include "tap.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static float *randn(int64_t n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)st_normal3(ST_RNG_TEST, seed, (uint64_t)i);
    return x;
}

static double rel_err(const float *a, const double *ref, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-300);
}

static void test_gemm(void)
{
    /* Sizes straddle the tile grid's edges (128 rows, 768 columns), so
     * that a wrong tile offset for some transpose shows; K = 0 is the
     * empty sum. */
    const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {67, 259, 130}, {130, 65, 300},
                                {129, 770, 33}, {3, 5, 0}};
    for (int s = 0; s < 6; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                float *A = randn(M * K, 1), *B = randn(K * N, 2), *C = randn(M * N, 3);
                double *ref = malloc(sizeof(double) * (size_t)(M * N));
                for (int beta = 0; beta < 2; beta++) {
                    float *Cw = malloc(sizeof(float) * (size_t)(M * N));
                    memcpy(Cw, C, sizeof(float) * (size_t)(M * N));
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double acc = beta ? C[i * N + j] : 0.0;
                            for (int64_t k = 0; k < K; k++) {
                                double a = ta ? A[k * M + i] : A[i * K + k];
                                double b = tb ? B[j * K + k] : B[k * N + j];
                                acc += a * b;
                            }
                            ref[i * N + j] = acc;
                        }
                    st_gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, (float)beta,
                            Cw, N);
                    double e = rel_err(Cw, ref, M * N);
                    tap_ok(e < 1e-5, "gemm %lldx%lldx%lld ta=%d tb=%d beta=%d rel %.1e",
                           (long long)M, (long long)N, (long long)K, ta, tb, beta, e);
                    free(Cw);
                }
                free(A);
                free(B);
                free(C);
                free(ref);
            }
    /* Same bits with 1, 2 and 3 threads, for every transpose, on a
     * product of one tile and one of 3 x 3 tiles (the library's own
     * threads would split either differently for each count, and give
     * other bits). */
    const int64_t K = 513, shapes[2][2] = {{300, 1600}, {100, 300}};
    float *A = randn(300 * K, 4), *B = randn(K * 1600, 5);
    float *C1 = calloc(300 * 1600, sizeof(float)), *C2 = calloc(300 * 1600, sizeof(float));
    int nt = omp_get_max_threads();
    for (int sh = 0; sh < 2; sh++) {
        const int64_t M = shapes[sh][0], N = shapes[sh][1];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int threads = 2; threads <= 3; threads++) {
                    omp_set_num_threads(1);
                    st_gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 0.0f, C1, N);
                    omp_set_num_threads(threads);
                    st_gemm(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, 0.0f, C2, N);
                    tap_ok(memcmp(C1, C2, sizeof(float) * (size_t)(M * N)) == 0,
                           "gemm %lldx%lldx%lld ta=%d tb=%d is bit-identical for 1 and %d threads",
                           (long long)M, (long long)N, (long long)K, ta, tb, threads);
                }
    }
    omp_set_num_threads(nt);
    free(A);
    free(B);
    free(C1);
    free(C2);
}

/* Naive attention in double with explicit GQA head mapping. */
/* Attention against a float64 reference, forward and backward, with GQA.
 * T = 9 is one tile of cpu_attention.c; T = 150 is three query and key
 * tiles, the last one partial. */
static void test_attention(int64_t T, int64_t hd)
{
    const int64_t Bn = 2, H = 4, KV = 2, W = (H + 2 * KV) * hd, O = H * hd, KW = KV * hd;
    const int64_t n_out = Bn * T * O, n_kv = Bn * T * KW;
    float *qkv = randn(Bn * T * W, 9), *dout = randn(n_out, 10);
    float *out = calloc((size_t)n_out, sizeof(float)), *lse = calloc((size_t)(Bn * H * T), 4);
    float *dq = calloc((size_t)n_out, 4), *dk = calloc((size_t)n_kv, 4), *dv = calloc((size_t)n_kv, 4);
    double *ref = calloc((size_t)n_out, 8), *rdq = calloc((size_t)n_out, 8);
    double *rdk = calloc((size_t)n_kv, 8), *rdv = calloc((size_t)n_kv, 8);
    double *p = calloc((size_t)T, 8), *dp = calloc((size_t)T, 8);
    const float *q = qkv, *k = qkv + H * hd, *v = qkv + (H + KV) * hd;
    const double scale = 1.0 / sqrt((double)hd);
    for (int64_t b = 0; b < Bn; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t g = h / (H / KV);
                const float *qt = q + (b * T + t) * W + h * hd, *dot = dout + (b * T + t) * O + h * hd;
                double mx = -1e300, sum = 0.0, D = 0.0;
                for (int64_t j = 0; j <= t; j++) {
                    double d = 0.0;
                    for (int64_t c = 0; c < hd; c++)
                        d += (double)qt[c] * k[(b * T + j) * W + g * hd + c];
                    p[j] = d * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= t; j++)
                    sum += exp(p[j] - mx);
                for (int64_t j = 0; j <= t; j++) {
                    p[j] = exp(p[j] - mx) / sum;
                    dp[j] = 0.0;
                    for (int64_t c = 0; c < hd; c++)
                        dp[j] += (double)dot[c] * v[(b * T + j) * W + g * hd + c];
                    D += p[j] * dp[j];
                }
                for (int64_t j = 0; j <= t; j++) {
                    const double ds = p[j] * (dp[j] - D) * scale;
                    for (int64_t c = 0; c < hd; c++) {
                        ref[(b * T + t) * O + h * hd + c] += p[j] * v[(b * T + j) * W + g * hd + c];
                        rdq[(b * T + t) * O + h * hd + c] += ds * k[(b * T + j) * W + g * hd + c];
                        rdk[(b * T + j) * KW + g * hd + c] += ds * qt[c];
                        rdv[(b * T + j) * KW + g * hd + c] += p[j] * dot[c];
                    }
                }
            }
    st_attention_forward(out, O, lse, q, W, k, W, v, W, Bn, T, H, KV, hd);
    double e = rel_err(out, ref, n_out);
    tap_ok(e < 1e-6, "causal GQA attention, T=%lld hd=%lld: output matches a float64 reference (rel %.1e)",
           (long long)T, (long long)hd, e);
    st_attention_backward(dq, O, dk, KW, dv, KW, dout, O, out, O, lse, q, W, k, W, v, W, Bn, T, H,
                          KV, hd);
    double eq = rel_err(dq, rdq, n_out), ek = rel_err(dk, rdk, n_kv), ev = rel_err(dv, rdv, n_kv);
    tap_ok(eq < 1e-5 && ek < 1e-5 && ev < 1e-5,
           "causal GQA attention, T=%lld hd=%lld: dq, dk, dv match a float64 reference (rel %.1e %.1e %.1e)",
           (long long)T, (long long)hd, eq, ek, ev);
    free(qkv);
    free(dout);
    free(out);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
    free(ref);
    free(rdq);
    free(rdk);
    free(rdv);
    free(p);
    free(dp);
}

/* The progress hook (runtime/progress.h): a registered poller is called
 * between the tiles of a matrix product, on the main thread only, and
 * not at all once cleared. */
static int polls, polls_off_main;
static void count_poll(void)
{
    polls++;
    if (omp_get_thread_num() != 0)
        polls_off_main++;
}

static void test_progress_poll(void)
{
    const int64_t M = 300, N = 1600, K = 64; /* 3 x 3 tiles */
    float *A = randn(M * K, 11), *B = randn(K * N, 12), *C = calloc((size_t)(M * N), 4);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    st_progress_set(count_poll);
    st_gemm(0, 0, M, N, K, A, K, B, N, 0.0f, C, N);
    tap_ok(polls == 9, "one thread: the progress poller runs after each of 9 tiles (%d)", polls);
    polls = 0;
    omp_set_num_threads(2);
    st_gemm(0, 0, M, N, K, A, K, B, N, 0.0f, C, N);
    tap_ok(polls >= 1 && polls < 9 && polls_off_main == 0,
           "two threads: polled only by the main thread (%d polls, %d elsewhere)", polls,
           polls_off_main);
    st_progress_set(NULL);
    polls = 0;
    st_gemm(0, 0, M, N, K, A, K, B, N, 0.0f, C, N);
    tap_ok(polls == 0, "no poller registered: nothing is called");
    omp_set_num_threads(nt);
    free(A);
    free(B);
    free(C);
}

/* st_expf (kernels/cpu_math.h) against exp in double over its whole range,
 * and its edges: the masked scores need exp(-inf) = 0 exactly. */
static void test_expf(void)
{
    double worst = 0.0;
    float at = 0.0f;
    for (float x = -87.3f; x < 88.0f; x += 0.000731f) {
        double want = exp((double)x), e = fabs(st_expf(x) - want) / want;
        if (e > worst) {
            worst = e;
            at = x;
        }
    }
    /* 2^-23 is one ulp at the bottom of a binade: libm's expf is within 1. */
    tap_ok(worst < 2.0 * 1.1920929e-7, "st_expf within 2 ulp of exp over [-87.3, 88] (worst %.2e at %g)",
           worst, (double)at);
    tap_ok(st_expf(-INFINITY) == 0.0f && st_expf(-100.0f) == 0.0f && st_expf(0.0f) == 1.0f,
           "st_expf(-inf) = st_expf(-100) = 0 and st_expf(0) = 1");
    /* A diverging run passes NaN and huge values: they must come out as
     * NaN, +inf and 0 (and, under the sanitizers, without undefined
     * behaviour), so that the step is seen as non-finite and skipped. */
    tap_ok(isnan(st_expf(NAN)) && isnan(st_expf(-NAN)),
           "st_expf(NaN) is NaN");
    tap_ok(st_expf(INFINITY) == INFINITY && st_expf(1e30f) == INFINITY && st_expf(89.5f) == INFINITY,
           "st_expf(+inf) = st_expf(1e30) = st_expf(89.5) = +inf");
    tap_ok(st_expf(-1e30f) == 0.0f, "st_expf(-1e30) = 0");
    /* Up to ln(FLT_MAX) the result is finite, as expf's is. */
    static const float xs[] = {-87.0f, -10.5f, -1.0f, 0.25f, 1.0f, 20.0f, 88.0f, 88.5f, 88.72f};
    int near = 1;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double want = exp((double)xs[i]);
        if (!(fabs(st_expf(xs[i]) - want) / want < 2.0 * 1.1920929e-7))
            near = 0;
    }
    tap_ok(near, "st_expf within 2 ulp of exp at -87 ... 88.72, past the old clamp at 88");
}

static void test_rope(void)
{
    const int64_t Bn = 1, T = 5, H = 2, hd = 8;
    float cs[5 * 4], sn[5 * 4];
    st_rope_tables(cs, sn, T, hd, 10000.0);
    float *x = randn(Bn * T * H * hd, 6), *y = malloc(sizeof(float) * (size_t)(T * H * hd));
    memcpy(y, x, sizeof(float) * (size_t)(T * H * hd));
    st_rope_apply(y, H * hd, Bn, T, H, hd, cs, sn, 0);
    /* Independent form: pair (i, i + hd/2) as a complex number rotated by
     * t * theta^(-2i/hd). */
    double err = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < hd / 2; i++) {
                double a = t * pow(10000.0, -2.0 * (double)i / (double)hd);
                double re = x[t * H * hd + h * hd + i], im = x[t * H * hd + h * hd + i + hd / 2];
                double rr = re * cos(a) - im * sin(a), ri = re * sin(a) + im * cos(a);
                err = fmax(err, fabs(rr - y[t * H * hd + h * hd + i]));
                err = fmax(err, fabs(ri - y[t * H * hd + h * hd + i + hd / 2]));
            }
    tap_ok(err < 1e-5, "RoPE equals the complex rotation (max err %.1e)", err);
    st_rope_apply(y, H * hd, Bn, T, H, hd, cs, sn, 1);
    double back = 0.0;
    for (int64_t i = 0; i < T * H * hd; i++)
        back = fmax(back, fabs(y[i] - x[i]));
    tap_ok(back < 1e-5, "inverse RoPE undoes RoPE (max err %.1e)", back);
    free(x);
    free(y);
}

static void test_bf16(void)
{
    /* bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and
     * 1 + 2^-7 and rounds to even (1); 1 + 3 * 2^-8 rounds up to 1 + 2^-6. */
    float in[5] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, INFINITY};
    float want[5] = {1.0f, 1.0f, 1.0f + 0x1p-6f, -2.5f, INFINITY};
    float out[5];
    st_round_bf16(out, in, 5);
    tap_ok(memcmp(out, want, sizeof out) == 0, "bf16 rounding is round-to-nearest-even");
}

static void test_schedules(void)
{
    st_config cfg;
    st_config_defaults(&cfg);
    cfg.train.steps = 110;
    cfg.optim.lr = 1.0;
    cfg.optim.min_lr = 0.1;
    cfg.optim.warmup_steps = 10;
    cfg.optim.schedule = ST_SCHED_COSINE;
    tap_ok(fabs(st_lr_at(&cfg, 0) - 0.1) < 1e-12, "warmup starts at lr/warmup");
    tap_ok(fabs(st_lr_at(&cfg, 9) - 1.0) < 1e-12, "warmup ends at lr");
    tap_ok(fabs(st_lr_at(&cfg, 10) - 1.0) < 1e-12, "cosine starts at lr");
    tap_ok(fabs(st_lr_at(&cfg, 60) - 0.55) < 1e-12, "cosine midpoint is (lr + min_lr) / 2");
    cfg.optim.schedule = ST_SCHED_LINEAR;
    tap_ok(fabs(st_lr_at(&cfg, 60) - 0.55) < 1e-12, "linear midpoint is (lr + min_lr) / 2");
    cfg.optim.schedule = ST_SCHED_CONSTANT;
    tap_ok(st_lr_at(&cfg, 100) == 1.0, "constant stays at lr");
    cfg.optim.schedule = ST_SCHED_WSD;
    cfg.optim.decay_frac = 0.2; /* decay over the last 22 steps: 88..109 */
    tap_ok(st_lr_at(&cfg, 87) == 1.0 && fabs(st_lr_at(&cfg, 99) - 0.55) < 1e-12,
           "wsd is stable, then decays linearly (step 99 halfway)");
    st_config_free(&cfg);
}

static void test_adamw(void)
{
    /* First step: mhat = g, vhat = g^2, so p -= lr * (g / (|g| + eps) + wd p). */
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.5f, -0.25f, 4.0f}, m[3] = {0}, v[3] = {0};
    st_adamw(p, g, m, v, 3, 0.1, 0.9, 0.95, 1e-8, 0.01, 1.0, 1);
    double want[3];
    double p0[3] = {1.0, -2.0, 0.5}, g0[3] = {0.5, -0.25, 4.0};
    for (int i = 0; i < 3; i++)
        want[i] = p0[i] - 0.1 * (g0[i] / (fabs(g0[i]) + 1e-8) + 0.01 * p0[i]);
    tap_ok(rel_err(p, want, 3) < 1e-6, "AdamW first step equals the closed form");
    /* Clipping scale applies to the gradient before the moments. */
    float q[1] = {0.0f}, gq[1] = {2.0f}, mq[1] = {0}, vq[1] = {0};
    st_adamw(q, gq, mq, vq, 1, 1.0, 0.9, 0.95, 0.0, 0.0, 0.5, 1);
    tap_ok(fabs(mq[0] - 0.1f) < 1e-7 && fabs(q[0] + 1.0f) < 1e-6,
           "AdamW applies the clip scale to the gradient");
}

static void test_xent(void)
{
    float logits[2 * 3] = {1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f};
    int32_t tg[2] = {2, 0};
    double want = (log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0) + log(3.0);
    double got = st_softmax_xent(logits, tg, 2, 3, 1.0f);
    tap_ok(fabs(got - want) < 1e-6, "cross-entropy sum equals the closed form");
    tap_ok(fabs(logits[3] - (1.0 / 3.0 - 1.0)) < 1e-6 && fabs(logits[4] - 1.0 / 3.0) < 1e-6,
           "cross-entropy gradient is softmax - onehot");
}

static void test_alloc(void)
{
    size_t base = st_mem_total(), state = st_mem_state();
    st_mem_reset_peak();
    void *a = st_alloc(1000, ST_MEM_PARAMS), *b = st_alloc(3000, ST_MEM_ACTS);
    tap_ok(st_mem_total() == base + 4000 && st_mem_state() == state + 1000,
           "allocator counts bytes per category");
    st_free(b);
    tap_ok(st_mem_total() == base + 1000 && st_mem_peak() == base + 4000,
           "peak keeps the high-water mark after a free");
    st_free(a);
    tap_ok(st_mem_total() == base, "everything returned");
}

static int write_hello(int fd, void *ctx)
{
    (void)ctx;
    return st_write_all(fd, "hello\n", 6);
}

static int write_fails(int fd, void *ctx)
{
    (void)ctx;
    if (st_write_all(fd, "half", 4))
        return -1;
    errno = ENOSPC;
    return -1;
}

/* Whether path holds exactly text. */
static int holds(const char *path, const char *text)
{
    char buf[64] = "";
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    return f && n == strlen(text) && memcmp(buf, text, n) == 0;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void test_atomic_write(void)
{
    char dir[] = "/tmp/st_units_XXXXXX", f[64], tmp[64], sub[80];
    if (!tap_ok(mkdtemp(dir) != NULL, "a scratch directory"))
        return;
    snprintf(f, sizeof f, "%s/f", dir);
    snprintf(tmp, sizeof tmp, "%s/f.tmp", dir);
    int step = st_file_write_atomic(f, tmp, 0644, write_hello, NULL);
    tap_ok(step == ST_ATOMIC_DONE && holds(f, "hello\n") && !exists(tmp),
           "atomic write: the file holds the bytes, no temporary is left");
    step = st_file_write_atomic(f, tmp, 0644, write_fails, NULL);
    tap_ok(step == ST_ATOMIC_WRITE && errno == ENOSPC && holds(f, "hello\n") && !exists(tmp),
           "a failed write keeps the old file and its errno, and removes the temporary");
    mkdir(tmp, 0700);
    step = st_file_write_atomic(f, tmp, 0644, write_hello, NULL);
    tap_ok(step == ST_ATOMIC_CREATE && holds(f, "hello\n"),
           "a temporary that cannot be created is reported as such");
    rmdir(tmp);
    snprintf(sub, sizeof sub, "%s/x", f);
    unlink(f);
    mkdir(f, 0700);
    mkdir(sub, 0700);
    errno = 0;
    step = st_file_write_atomic(f, tmp, 0644, write_hello, NULL);
    tap_ok(step == ST_ATOMIC_CREATE && errno == EEXIST && !exists(tmp),
           "a directory at the name is refused before anything is written");
    rmdir(sub);
    rmdir(f);
    /* A FIFO (or a device) at the name would be replaced by the rename:
     * refused, and left where it is. */
    struct stat sb;
    errno = 0;
    step = mkfifo(f, 0600) == 0 ? st_file_write_atomic(f, tmp, 0644, write_hello, NULL) : -1;
    tap_ok(step == ST_ATOMIC_CREATE && errno == EEXIST && !exists(tmp) && lstat(f, &sb) == 0 &&
               S_ISFIFO(sb.st_mode),
           "a FIFO at the name is refused and left in place");
    unlink(f);
    /* A FIFO at the temporary's name fails at once instead of waiting for
     * a reader, and is not renamed over the name. */
    step = mkfifo(tmp, 0600) == 0 ? st_file_write_atomic(f, tmp, 0644, write_hello, NULL) : -1;
    tap_ok(step == ST_ATOMIC_CREATE && !exists(f) && lstat(tmp, &sb) == 0 && S_ISFIFO(sb.st_mode),
           "a FIFO at the temporary's name fails without blocking and is left in place");
    unlink(tmp);
    tap_ok(rmdir(dir) == 0, "nothing else was left behind");
}

/* The test hooks read their variables as shardtrain(1) describes them;
 * a malformed value prints one error line (on stderr) and is status 2. */
static void test_fault_hooks(void)
{
    static const char steps[] = "SHARDTRAIN_TEST_NONFINITE_STEPS";
    setenv(steps, "3,40", 1);
    tap_ok(st_fault_load_poisoned_steps() == 0 && st_fault_poisoned_step(3) &&
               st_fault_poisoned_step(40) && !st_fault_poisoned_step(4),
           "%s=3,40 poisons steps 3 and 40 only", steps);
    setenv(steps, "3,,4", 1);
    int bad = st_fault_load_poisoned_steps() == ST_EXIT_USAGE;
    setenv(steps, "0", 1);
    bad = bad && st_fault_load_poisoned_steps() == ST_EXIT_USAGE;
    tap_ok(bad, "%s=3,,4 and =0 are usage errors", steps);
    unsetenv(steps);
    tap_ok(st_fault_load_poisoned_steps() == 0 && !st_fault_poisoned_step(3),
           "%s unset poisons nothing", steps);

    setenv("SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT", "4", 1);
    int crash = st_fault_crash_in_checkpoint(4) && !st_fault_crash_in_checkpoint(3);
    unsetenv("SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT");
    tap_ok(crash && !st_fault_crash_in_checkpoint(0) && !st_fault_crash_in_checkpoint(4),
           "SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT names the one step to crash in");

    st_fault_kernels v = ST_FAULT_KERNELS_CPU;
    setenv("SHARDTRAIN_TEST_KERNELS", "cpu-bf16params", 1);
    int kern = st_fault_kernels_variant(&v) == 0 && v == ST_FAULT_KERNELS_CPU_BF16PARAMS;
    setenv("SHARDTRAIN_TEST_KERNELS", "", 1);
    kern = kern && st_fault_kernels_variant(&v) == 0 && v == ST_FAULT_KERNELS_CPU;
    setenv("SHARDTRAIN_TEST_KERNELS", "cuda-nope", 1);
    kern = kern && st_fault_kernels_variant(&v) == ST_EXIT_USAGE;
    unsetenv("SHARDTRAIN_TEST_KERNELS");
    tap_ok(kern && st_fault_kernels_variant(&v) == 0 && v == ST_FAULT_KERNELS_CPU,
           "SHARDTRAIN_TEST_KERNELS: cpu-bf16params, empty or unset is cpu, else an error");

    setenv("SHARDTRAIN_DEBUG_IO", "", 1);
    int dbg = st_fault_debug_io();
    unsetenv("SHARDTRAIN_DEBUG_IO");
    tap_ok(dbg && !st_fault_debug_io(), "SHARDTRAIN_DEBUG_IO counts when set, even empty");
}

/* Every error and warning is one line, whatever it quotes from a hostile
 * file (tests/fuzz_manifest found a parser message quoting a newline);
 * st_printable escapes control bytes and backslashes and cuts long text. */
static void test_log_one_line(void)
{
    FILE *real = stderr, *cap = tmpfile();
    stderr = cap;
    st_error("f.json", "near '%s'", "a\nb\tc\x7f");
    st_warn("w\r\n");
    stderr = real;
    char out[256] = "";
    rewind(cap);
    size_t got = fread(out, 1, sizeof out - 1, cap);
    fclose(cap);
    out[got] = '\0';
    tap_ok(strcmp(out, "shardtrain: error: f.json: near 'a\\x0ab\\x09c\\x7f'\n"
                       "shardtrain: warning: w\\x0d\\x0a\n") == 0,
           "control bytes in an error or warning are written as \\xNN: one line each");
    char buf[16];
    tap_ok(strcmp(st_printable("x\\y\n", buf, sizeof buf), "x\\x5cy\\x0a") == 0,
           "st_printable escapes backslash and newline (%s)", buf);
    const char *abc = "abcdefghijklmnopqrstuvwxyz";
    size_t len = strlen(st_printable(abc, buf, sizeof buf));
    tap_ok(len < sizeof buf && len > 3 && strncmp(buf, abc, len - 3) == 0 &&
               strcmp(buf + len - 3, "...") == 0,
           "st_printable cuts long text to a prefix and ... inside its buffer (%s)", buf);
}

/* st_format marks a cut message with "..." (a quoted name or value cut
 * silently reads as whole), leaves one that fits alone, and never splits a
 * UTF-8 character to make room for the mark. */
static void test_format_cut(void)
{
    char buf[8];
    tap_ok(strcmp(st_format(buf, sizeof buf, "%s", "abcdefg"), "abcdefg") == 0,
           "st_format: 7 bytes fit in 8, unmarked (%s)", buf);
    tap_ok(strcmp(st_format(buf, sizeof buf, "%s", "abcdefgh"), "abcd...") == 0,
           "st_format: 8 bytes in 8 are cut and end with ... (%s)", buf);
    tap_ok(strcmp(st_format(buf, sizeof buf, "%s%d", "abc", 123456789), "abc1...") == 0,
           "st_format: a long formatted number is cut the same way (%s)", buf);
    /* "ab" then U+00E9 (2 bytes) across the cut at 4: the whole character
     * goes, so the text stays valid UTF-8. */
    tap_ok(strcmp(st_format(buf, sizeof buf, "abc\xc3\xa9xyz"), "abc...") == 0,
           "st_format: the mark goes back over a split UTF-8 character (%s)", buf);
    st_format(buf, sizeof buf, "ab");
    tap_ok(strcmp(st_format_append(buf, sizeof buf, "%s", "cde"), "abcde") == 0,
           "st_format_append: an addition that fits is added unmarked (%s)", buf);
    tap_ok(strcmp(st_format_append(buf, sizeof buf, "%s", "fgh"), "abcd...") == 0,
           "st_format_append: a cut addition marks the end of the buffer (%s)", buf);
    st_format(buf, sizeof buf, "abcdefg");
    tap_ok(strcmp(st_format_append(buf, sizeof buf, "x"), "abcd...") == 0,
           "st_format_append to a full buffer marks it cut (%s)", buf);
    char small[3];
    tap_ok(strcmp(st_format(small, sizeof small, "abc"), "ab") == 0,
           "st_format: a buffer too small for the mark is only cut (%s)", small);
}

int main(void)
{
    test_log_one_line();
    test_format_cut();
    test_gemm();
    test_attention(9, 6);
    test_attention(150, 16);
    test_expf();
    test_progress_poll();
    test_rope();
    test_bf16();
    test_schedules();
    test_adamw();
    test_xent();
    test_alloc();
    test_atomic_write();
    test_fault_hooks();
    return tap_done();
}
