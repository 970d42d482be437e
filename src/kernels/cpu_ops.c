/* Elementwise, normalisation, attention and loss kernels of the CPU
 * backend (the matrix product lives in cpu_gemm_openblas.c).  See cpu_ops.h for the
 * contract; reductions are done in double or in fixed order so that the
 * reference stays deterministic and close to exact. */
#include "kernels/cpu_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void st_add_bias(float *out, const float *bias, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            out[n * C + c] += bias[c];
}

void st_bias_backward(float *dbias, const float *dout, int64_t N, int64_t C)
{
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; c++) {
        double s = 0.0;
        for (int64_t n = 0; n < N; n++)
            s += dout[n * C + c];
        dbias[c] += (float)s;
    }
}

void st_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int64_t N, int64_t C,
                          float eps)
{
#pragma omp parallel for schedule(static)
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
#pragma omp parallel for schedule(static)
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

/* Column-parallel part: parameter gradients summed over rows in order. */
static void norm_backward_params(float *dw, float *db, const float *dout,
                                 const float *x, const float *mean,
                                 const float *rstd, int64_t N, int64_t C, int centered)
{
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; c++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t n = 0; n < N; n++) {
            double xhat = (x[n * C + c] - (centered ? mean[n] : 0.0f)) * rstd[n];
            sw += (double)dout[n * C + c] * xhat;
            sb += dout[n * C + c];
        }
        dw[c] += (float)sw;
        if (db)
            db[c] += (float)sb;
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
#pragma omp parallel for schedule(static)
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

void st_gelu_forward(float *out, const float *x, int64_t n)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        out[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}

void st_gelu_backward(float *dx, const float *x, const float *dout, int64_t n)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        float t = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        dx[i] = g * dout[i];
    }
}

void st_swiglu_forward(float *out, const float *gate_up, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *gate = gate_up + n * 2 * F, *up = gate + F;
        for (int64_t i = 0; i < F; i++) {
            float g = gate[i];
            out[n * F + i] = g / (1.0f + expf(-g)) * up[i];
        }
    }
}

void st_swiglu_backward(float *d_gate_up, const float *gate_up,
                        const float *dout, int64_t N, int64_t F)
{
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *gate = gate_up + n * 2 * F, *up = gate + F;
        float *dgate = d_gate_up + n * 2 * F, *dup = dgate + F;
        const float *d = dout + n * F;
        for (int64_t i = 0; i < F; i++) {
            float g = gate[i];
            float sig = 1.0f / (1.0f + expf(-g));
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
#pragma omp parallel for schedule(static)
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

static float dotf(const float *a, const float *b, int64_t n)
{
    /* simd reduction: a fixed, vector-width-dependent order, the same on
     * every run of the same binary on the same CPU. */
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void st_attention_forward(float *out, int64_t ldo, float *lse,
                          const float *q, int64_t ldq, const float *k, int64_t ldk,
                          const float *v, int64_t ldv,
                          int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t group = H / KV;
#pragma omp parallel
    {
        float *s = malloc(sizeof(float) * (size_t)T);
#pragma omp for schedule(dynamic) collapse(2)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                int64_t g = h / group;
                for (int64_t t = 0; t < T; t++) {
                    const float *qt = q + (b * T + t) * ldq + h * hd;
                    float m = -INFINITY;
                    for (int64_t j = 0; j <= t; j++) {
                        s[j] = dotf(qt, k + (b * T + j) * ldk + g * hd, hd) * scale;
                        if (s[j] > m)
                            m = s[j];
                    }
                    double l = 0.0;
                    for (int64_t j = 0; j <= t; j++) {
                        s[j] = expf(s[j] - m);
                        l += s[j];
                    }
                    float *o = out + (b * T + t) * ldo + h * hd;
                    for (int64_t d = 0; d < hd; d++)
                        o[d] = 0.0f;
                    for (int64_t j = 0; j <= t; j++) {
                        const float *vj = v + (b * T + j) * ldv + g * hd;
                        float p = s[j];
                        for (int64_t d = 0; d < hd; d++)
                            o[d] += p * vj[d];
                    }
                    float inv = (float)(1.0 / l);
                    for (int64_t d = 0; d < hd; d++)
                        o[d] *= inv;
                    lse[(b * H + h) * T + t] = m + (float)log(l);
                }
            }
        free(s);
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
            for (int64_t t = 0; t < T; t++) {
                memset(dk + (b * T + t) * lddk + g * hd, 0, sizeof(float) * (size_t)hd);
                memset(dv + (b * T + t) * lddv + g * hd, 0, sizeof(float) * (size_t)hd);
            }
            for (int64_t h = g * group; h < (g + 1) * group; h++)
                for (int64_t t = 0; t < T; t++) {
                    const float *qt = q + (b * T + t) * ldq + h * hd;
                    const float *dot = dout + (b * T + t) * lddo + h * hd;
                    const float *ot = out + (b * T + t) * ldo + h * hd;
                    float *dqt = dq + (b * T + t) * lddq + h * hd;
                    float L = lse[(b * H + h) * T + t];
                    float D = dotf(dot, ot, hd);
                    for (int64_t d = 0; d < hd; d++)
                        dqt[d] = 0.0f;
                    for (int64_t j = 0; j <= t; j++) {
                        const float *kj = k + (b * T + j) * ldk + g * hd;
                        const float *vj = v + (b * T + j) * ldv + g * hd;
                        float p = expf(dotf(qt, kj, hd) * scale - L);
                        float dp = dotf(dot, vj, hd);
                        float ds = p * (dp - D) * scale;
                        float *dkj = dk + (b * T + j) * lddk + g * hd;
                        float *dvj = dv + (b * T + j) * lddv + g * hd;
                        for (int64_t d = 0; d < hd; d++) {
                            dqt[d] += ds * kj[d];
                            dkj[d] += ds * qt[d];
                            dvj[d] += p * dot[d];
                        }
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
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        float *row = logits + n * V;
        float m = -INFINITY;
        for (int64_t i = 0; i < V; i++)
            if (row[i] > m)
                m = row[i];
        double sum = 0.0;
        for (int64_t i = 0; i < V; i++)
            sum += exp((double)row[i] - m);
        double lse = m + log(sum);
        row_loss[n] = lse - row[targets[n]];
        if (grad_scale != 0.0f) {
            for (int64_t i = 0; i < V; i++)
                row[i] = (float)(exp((double)row[i] - lse)) * grad_scale;
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
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}
