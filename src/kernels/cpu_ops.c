/* Elementwise, normalisation and loss kernels of the CPU backend (the
 * matrix product lives in cpu_gemm_openblas.c, attention in
 * cpu_attention.c).  See cpu_ops.h for the
 * contract; reductions are done in double or in fixed order so that the
 * reference stays deterministic and close to exact. */
#include "kernels/cpu_ops.h"
#include "kernels/cpu_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Below this many elements a kernel runs on the calling thread: waking a
 * team of threads costs microseconds, as much as the work itself (the
 * tiny models of the tests, the norms of small ones).  Every element is
 * computed the same way either side of it, so the bits do not change. */
enum { ST_PARALLEL_MIN = 1 << 15 };

void st_add_bias(float *out, const float *bias, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] += bias[c];
}

/* Column sums in blocks of COL_BLOCK columns: a thread owns a block and
 * walks the rows in order, so each column is still summed in row order by
 * one thread (the bits do not depend on the thread count), while the reads
 * go along rows instead of striding down a column. */
enum { COL_BLOCK = 64 };

void st_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C)
{
    if (!dbias)     /* a frozen bias (LoRA) */
        return;
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t c0 = 0; c0 < C; c0 += COL_BLOCK) {
        const int64_t w = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        double s[COL_BLOCK] = {0};
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < w; c++)
                s[c] += dout[n * C + c0 + c];
        for (int64_t c = 0; c < w; c++)
            dbias[c0 + c] += (float)s[c];
    }
}

void st_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int64_t N, int64_t C,
                          float eps)
{
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++)
            m += xr[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) {
            double d = xr[c] - m;
            v += d * d;
        }
        v /= (double)C;
        float s = (float)(1.0 / sqrt(v + eps));
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = ((xr[c] - (float)m) * s) * w[c] + b[c];
        mean[n] = (float)m;
        rstd[n] = s;
    }
}

/* Row-parallel part of the norm backward: dx for row n given the
 * normalised input xhat and dxhat = dout * w. */
static void norm_backward_rows(float *dx, const float *dout, const float *x,
                               const float *w, const float *mean, const float *rstd,
                               int64_t N, int64_t C, int centered)
{
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C, *dr = dout + n * C;
        float m = centered ? mean[n] : 0.0f, s = rstd[n];
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (xr[c] - m) * s;
            double dxhat = (double)dr[c] * w[c];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
        }
        double a = sum_dxhat / (double)C, bb = sum_dxhat_xhat / (double)C;
        float *dxr = dx + n * C;
        for (int64_t c = 0; c < C; c++) {
            double xhat = (xr[c] - m) * s;
            double dxhat = (double)dr[c] * w[c];
            double g = centered ? dxhat - a - xhat * bb : dxhat - xhat * bb;
            dxr[c] += (float)(g * s);
        }
    }
}

/* Column-parallel part: parameter gradients summed over rows in order,
 * in blocks of columns as st_bias_backward. */
static void norm_backward_params(float *dw, float *db, const float *dout,
                                 const float *x, const float *mean,
                                 const float *rstd, int64_t N, int64_t C, int centered)
{
    if (!dw)        /* frozen norm parameters (LoRA) */
        return;
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t c0 = 0; c0 < C; c0 += COL_BLOCK) {
        const int64_t w = C - c0 < COL_BLOCK ? C - c0 : COL_BLOCK;
        double sw[COL_BLOCK] = {0}, sb[COL_BLOCK] = {0};
        for (int64_t n = 0; n < N; n++) {
            const float m = centered ? mean[n] : 0.0f, r = rstd[n];
            const float *xr = x + n * C + c0, *dr = dout + n * C + c0;
            for (int64_t c = 0; c < w; c++) {
                double xhat = (xr[c] - m) * r;
                sw[c] += (double)dr[c] * xhat;
                sb[c] += dr[c];
            }
        }
        for (int64_t c = 0; c < w; c++) {
            dw[c0 + c] += (float)sw[c];
            if (db)
                db[c0 + c] += (float)sb[c];
        }
    }
}

void st_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                           const float *x, const float *w, const float *mean,
                           const float *rstd, int64_t N, int64_t C)
{
    norm_backward_rows(dx, dout, x, w, mean, rstd, N, C, 1);
    norm_backward_params(dw, db, dout, x, mean, rstd, N, C, 1);
}

void st_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w,
                        int64_t N, int64_t C, float eps)
{
#pragma omp parallel for schedule(static) if (parallel : N * C >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *xr = x + n * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++)
            ss += (double)xr[c] * xr[c];
        float s = (float)(1.0 / sqrt(ss / (double)C + eps));
        float *o = out + n * C;
        for (int64_t c = 0; c < C; c++)
            o[c] = (xr[c] * s) * w[c];
        rstd[n] = s;
    }
}

void st_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x,
                         const float *w, const float *rstd, int64_t N, int64_t C)
{
    norm_backward_rows(dx, dout, x, w, NULL, rstd, N, C, 0);
    norm_backward_params(dw, NULL, dout, x, NULL, rstd, N, C, 0);
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* GELU, tanh form, computed as v * sigmoid(2u) = 0.5 v (1 + tanh u): the
 * same function, one vectorisable exp per element (cpu_math.h), and no
 * cancellation (1 + tanh u is never formed from two nearly equal terms). */
void st_gelu_forward(float *out, const float *x, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (parallel : n >= ST_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        out[i] = v / (1.0f + st_expf(-2.0f * u));
    }
}

/* d/dv [v s(2u)] = s + v * 2 s (1 - s) du/dv, with s = sigmoid(2u) =
 * (1 + tanh u) / 2, so 2 s (1 - s) = (1 - tanh^2 u) / 2. */
void st_gelu_backward(float *dx, const float *x, const float *dout, int64_t n)
{
#pragma omp parallel for simd schedule(static) if (parallel : n >= ST_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        float sg = 1.0f / (1.0f + st_expf(-2.0f * u));
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        float g = sg + 2.0f * v * sg * (1.0f - sg) * du;
        dx[i] = g * dout[i];
    }
}

void st_swiglu_forward(float *out, const float *gate_up, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static) if (parallel : N * F >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *gate = gate_up + n * 2 * F, *up = gate + F;
#pragma omp simd
        for (int64_t i = 0; i < F; i++) {
            float g = gate[i];
            out[n * F + i] = g / (1.0f + st_expf(-g)) * up[i];
        }
    }
}

void st_swiglu_backward(float *d_gate_up, const float *gate_up,
                        const float *dout, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static) if (parallel : N * F >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        const float *gate = gate_up + n * 2 * F, *up = gate + F;
        float *dgate = d_gate_up + n * 2 * F, *dup = dgate + F;
        const float *d = dout + n * F;
#pragma omp simd
        for (int64_t i = 0; i < F; i++) {
            float g = gate[i];
            float sig = 1.0f / (1.0f + st_expf(-g));
            dup[i] = d[i] * g * sig;
            dgate[i] = d[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        }
    }
}

void st_rope_apply(float *x, int64_t ld, int64_t B, int64_t T, int64_t n_heads,
                   int64_t hd, const float *cos_t, const float *sin_t, int inverse)
{
    int64_t half = hd / 2;
    float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if (parallel : B * T * n_heads * hd >= ST_PARALLEL_MIN)
    for (int64_t r = 0; r < B * T; r++) {
        int64_t t = r % T;
        const float *cs = cos_t + t * half, *sn = sin_t + t * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + r * ld + h * hd;
            for (int64_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                float c = cs[i], s = sgn * sn[i];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

double st_softmax_xent(float *logits, const int32_t *targets, int64_t N,
                       int64_t V, float grad_scale)
{
    /* Per-row losses summed afterwards in row order: an OpenMP reduction
     * would make the total depend on the thread count. */
    double *row_loss = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
    if (!row_loss)
        return NAN;
#pragma omp parallel for schedule(static) if (parallel : N * V >= ST_PARALLEL_MIN)
    for (int64_t n = 0; n < N; n++) {
        float *row = logits + n * V;
        if (targets[n] < 0) {
            /* An ignored position (a prompt token of instruction data):
             * no loss, and no gradient reaches its logits. */
            row_loss[n] = 0.0;
            if (grad_scale != 0.0f)
                memset(row, 0, sizeof(float) * (size_t)V);
            continue;
        }
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < V; i++)
            m = row[i] > m ? row[i] : m;
        /* float exps (cpu_math.h) summed in double: the sum of 50k terms
         * keeps its precision, and the loop stays vectorised. */
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < V; i++)
            sum += st_expf(row[i] - m);
        double lse = m + log(sum);
        row_loss[n] = lse - row[targets[n]];
        if (grad_scale != 0.0f) {
            /* softmax = exp(x - m) / sum, with the division as a product */
            const float inv = (float)(1.0 / sum);
#pragma omp simd
            for (int64_t i = 0; i < V; i++)
                row[i] = st_expf(row[i] - m) * inv * grad_scale;
            row[targets[n]] -= grad_scale;
        }
    }
    double total = 0.0;
    for (int64_t n = 0; n < N; n++)
        total += row_loss[n];
    free(row_loss);
    return total;
}

void st_add_inplace(float *y, const float *x, int64_t n)
{
#pragma omp parallel for schedule(static) if (parallel : n >= ST_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}
