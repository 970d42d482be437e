/* Causal attention of the CPU backend, tiled as FlashAttention is: for each
 * (batch, head) the queries go in tiles of TILE rows and the keys in tiles
 * of TILE columns, and only one TILE x TILE block of scores exists at a time
 * per thread (on its stack), never the T x T matrix.  The tile products
 * (Q K^T, P V and the four of the backward) are single-threaded OpenBLAS
 * calls (st_gemm_serial); threads own whole (batch, head) pairs in the
 * forward and whole (batch, kv head) pairs in the backward, so every output
 * element is summed by one thread in a fixed order and the bits do not
 * depend on the thread count.
 *
 * Forward: an online softmax over key tiles (running max m and sum l per
 * row, in float with the sum in double), saving lse = m + log l.
 * Backward: P is rebuilt from lse, D = rowsum(dO * O), and
 *   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - D) * scale,
 *   dQ += dS K,    dK += dS^T Q. */
#include "kernels/cpu_ops.h"
#include "kernels/cpu_gemm.h"
#include "kernels/cpu_math.h"
#include "runtime/progress.h"

#include <omp.h>

#include <math.h>
#include <string.h>

enum { TILE = 64 };

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* S[r, c] = -inf where key k0 + c lies after query q0 + r.  Query and key
 * tiles start at the same multiples of TILE, so k0 <= q0 and only the
 * diagonal tile (k0 == q0) has such entries. */
static void mask_future(float *S, int64_t rows, int64_t cols, int64_t q0, int64_t k0)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = q0 + r - k0 + 1; c < cols; c++)
            S[r * TILE + c] = -INFINITY;
}

/* One query tile of one head: rows q0 .. q0+rows-1 of q/out. */
static void forward_query_tile(float *out, int64_t ldo, float *lse, const float *q, int64_t ldq,
                               const float *k, int64_t ldk, const float *v, int64_t ldv,
                               int64_t q0, int64_t rows, int64_t hd, float scale)
{
    float S[TILE * TILE];
    float m[TILE];
    double l[TILE];
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0;
    }
    /* The output rows double as the running accumulator. */
    for (int64_t k0 = 0; k0 <= q0 + rows - 1; k0 += TILE) {
        const int64_t cols = min64(TILE, q0 + rows - k0);
        st_gemm_serial(0, 1, rows, cols, hd, scale, q + q0 * ldq, ldq, k + k0 * ldk, ldk, 0.0f, S,
                       TILE);
        if (k0 + cols > q0)
            mask_future(S, rows, cols, q0, k0);
        for (int64_t r = 0; r < rows; r++) {
            float *sr = S + r * TILE;
            float mx = m[r];
#pragma omp simd reduction(max : mx)
            for (int64_t c = 0; c < cols; c++)
                mx = sr[c] > mx ? sr[c] : mx;
            /* Row r sees key 0 at least, so mx is finite. */
            const float corr = st_expf(m[r] - mx);
            double sum = 0.0;
#pragma omp simd reduction(+ : sum)
            for (int64_t c = 0; c < cols; c++) {
                sr[c] = st_expf(sr[c] - mx);
                sum += sr[c];
            }
            l[r] = l[r] * corr + sum;
            m[r] = mx;
            float *o = out + (q0 + r) * ldo;
            if (k0 == 0)
                memset(o, 0, sizeof(float) * (size_t)hd);
            else
                for (int64_t d = 0; d < hd; d++)
                    o[d] *= corr;
        }
        st_gemm_serial(0, 0, rows, hd, cols, 1.0f, S, TILE, v + k0 * ldv, ldv, 1.0f,
                       out + q0 * ldo, ldo);
    }
    for (int64_t r = 0; r < rows; r++) {
        float *o = out + (q0 + r) * ldo;
        const float inv = (float)(1.0 / l[r]);
        for (int64_t d = 0; d < hd; d++)
            o[d] *= inv;
        lse[q0 + r] = m[r] + (float)log(l[r]);
    }
}

void st_attention_forward(float *out, int64_t ldo, float *lse,
                          const float *q, int64_t ldq, const float *k, int64_t ldk,
                          const float *v, int64_t ldv,
                          int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t group = H / KV;
#pragma omp parallel for schedule(dynamic) collapse(2)
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = h / group;
            for (int64_t q0 = 0; q0 < T; q0 += TILE)
                forward_query_tile(out + b * T * ldo + h * hd, ldo, lse + (b * H + h) * T,
                                   q + b * T * ldq + h * hd, ldq, k + b * T * ldk + g * hd, ldk,
                                   v + b * T * ldv + g * hd, ldv, q0, min64(TILE, T - q0), hd,
                                   scale);
            if (omp_get_thread_num() == 0)
                st_progress_poll();
        }
}

/* One query tile of one head against every key tile it sees; dk and dv
 * (this kv head's rows) accumulate, dq rows q0.. are written. */
static void backward_query_tile(float *dq, int64_t lddq, float *dk, int64_t lddk, float *dv,
                                int64_t lddv, const float *dout, int64_t lddo, const float *out,
                                int64_t ldo, const float *lse, const float *q, int64_t ldq,
                                const float *k, int64_t ldk, const float *v, int64_t ldv,
                                int64_t q0, int64_t rows, int64_t hd, float scale)
{
    float P[TILE * TILE], dS[TILE * TILE];
    float D[TILE];
    for (int64_t r = 0; r < rows; r++) {
        const float *dr = dout + (q0 + r) * lddo, *orow = out + (q0 + r) * ldo;
        double s = 0.0;
        for (int64_t d = 0; d < hd; d++)
            s += (double)dr[d] * orow[d];
        D[r] = (float)s;
    }
    for (int64_t k0 = 0; k0 <= q0 + rows - 1; k0 += TILE) {
        const int64_t cols = min64(TILE, q0 + rows - k0);
        st_gemm_serial(0, 1, rows, cols, hd, scale, q + q0 * ldq, ldq, k + k0 * ldk, ldk, 0.0f, P,
                       TILE);
        if (k0 + cols > q0)
            mask_future(P, rows, cols, q0, k0);
        for (int64_t r = 0; r < rows; r++) {
            const float L = lse[q0 + r];
#pragma omp simd
            for (int64_t c = 0; c < cols; c++)
                P[r * TILE + c] = st_expf(P[r * TILE + c] - L);
        }
        /* dV[k0..] += P^T dO */
        st_gemm_serial(1, 0, cols, hd, rows, 1.0f, P, TILE, dout + q0 * lddo, lddo, 1.0f,
                       dv + k0 * lddv, lddv);
        /* dP = dO V^T, then dS = P (dP - D) scale in place */
        st_gemm_serial(0, 1, rows, cols, hd, 1.0f, dout + q0 * lddo, lddo, v + k0 * ldv, ldv,
                       0.0f, dS, TILE);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dS[r * TILE + c] = P[r * TILE + c] * (dS[r * TILE + c] - D[r]) * scale;
        /* The first query sees one key: its softmax is the constant 1 and
         * its score gradient exactly 0, which P (dP - D) gives only up to
         * rounding (dP and D are summed in different orders). */
        if (q0 == 0)
            dS[0] = 0.0f;
        /* dQ = sum over key tiles of dS K (the first one overwrites) */
        st_gemm_serial(0, 0, rows, hd, cols, 1.0f, dS, TILE, k + k0 * ldk, ldk,
                       k0 == 0 ? 0.0f : 1.0f, dq + q0 * lddq, lddq);
        /* dK[k0..] += dS^T Q */
        st_gemm_serial(1, 0, cols, hd, rows, 1.0f, dS, TILE, q + q0 * ldq, ldq, 1.0f,
                       dk + k0 * lddk, lddk);
    }
}

void st_attention_backward(float *dq, int64_t lddq, float *dk, int64_t lddk,
                           float *dv, int64_t lddv, const float *dout, int64_t lddo,
                           const float *out, int64_t ldo, const float *lse,
                           const float *q, int64_t ldq, const float *k, int64_t ldk,
                           const float *v, int64_t ldv,
                           int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t group = H / KV;
    /* One thread owns a (batch, kv head) pair: every dk/dv row it writes
     * and every dq row of the query heads sharing that kv head, so the
     * accumulation needs no atomics and has a fixed order. */
#pragma omp parallel for schedule(dynamic) collapse(2)
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < KV; g++) {
            float *dkg = dk + b * T * lddk + g * hd, *dvg = dv + b * T * lddv + g * hd;
            for (int64_t t = 0; t < T; t++) {
                memset(dkg + t * lddk, 0, sizeof(float) * (size_t)hd);
                memset(dvg + t * lddv, 0, sizeof(float) * (size_t)hd);
            }
            for (int64_t h = g * group; h < (g + 1) * group; h++)
                for (int64_t q0 = 0; q0 < T; q0 += TILE)
                    backward_query_tile(dq + b * T * lddq + h * hd, lddq, dkg, lddk, dvg, lddv,
                                        dout + b * T * lddo + h * hd, lddo,
                                        out + b * T * ldo + h * hd, ldo, lse + (b * H + h) * T,
                                        q + b * T * ldq + h * hd, ldq, k + b * T * ldk + g * hd,
                                        ldk, v + b * T * ldv + g * hd, ldv, q0,
                                        min64(TILE, T - q0), hd, scale);
            if (omp_get_thread_num() == 0)
                st_progress_poll();
        }
}
