/* LoRA adapters on the CPU backend (see cpu_lora.h).  Every product goes
 * through st_gemm, so the adapters inherit its bit-reproducibility across
 * thread counts; the dropout mask is st_lora_keep's hash, so a row's mask
 * is the same whichever rank or micro-batch computes it. */
#include "kernels/cpu_lora.h"
#include "kernels/cpu_gemm.h"

static int64_t max_in(const st_model *m)
{
    int64_t w = 0;
    for (int i = 0; i < ST_LORA_MAX_TARGETS; i++)
        if (m->lora.a_off[i] >= 0 && m->lora.in[i] > w)
            w = m->lora.in[i];
    return w;
}

size_t st_lora_scratch_floats(const st_model *m, int64_t B)
{
    if (!m->lora.rank)
        return 0;
    const int64_t N = B * m->T, r = m->lora.rank;
    /* xa and dxa [N, r]; with dropout, the dropped input and the input's
     * gradient before the mask [N, in]. */
    return (size_t)(2 * N * r + (m->lora.dropout > 0.0 ? 2 * N * max_in(m) : 0));
}

/* The adapter's input: x itself, or x with dropout applied (scaled by
 * 1/(1-p), as torch.nn.Dropout) written to xd. */
static const float *dropped(const st_model *m, const st_lora_args *la, int i, int64_t N,
                            const float *x, int64_t ldx, float *xd, int64_t *ld)
{
    const int64_t in = m->lora.in[i];
    if (la->dropout <= 0.0) {
        *ld = ldx;
        return x;
    }
    const float keep_scale = (float)(1.0 / (1.0 - la->dropout));
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < in; c++)
            xd[n * in + c] = st_lora_keep(la, m->T, i, n, c, in) ? x[n * ldx + c] * keep_scale
                                                                 : 0.0f;
    *ld = in;
    return xd;
}

void st_lora_forward(const st_model *m, const st_lora_args *la, const float *p, int i,
                     int64_t B, const float *x, int64_t ldx, float *y, int64_t ldy,
                     float *scratch)
{
    const int64_t N = B * m->T, r = m->lora.rank, in = m->lora.in[i], out = m->lora.out[i];
    const float *A = p + m->lora.a_off[i], *Bm = p + m->lora.b_off[i];
    float *xa = scratch, *xd = xa + N * r;
    int64_t ld;
    const float *xin = dropped(m, la, i, N, x, ldx, xd, &ld);
    /* xa = scale * xin A^T, then y += xa B^T. */
    st_gemm(0, 1, N, r, in, xin, ld, A, in, 0.0f, xa, r);
    for (int64_t e = 0; e < N * r; e++)
        xa[e] *= m->lora.scale;
    st_gemm(0, 1, N, out, r, xa, r, Bm, r, 1.0f, y, ldy);
}

void st_lora_backward(const st_model *m, const st_lora_args *la, const float *p, float *g,
                      int i, int64_t B, const float *x, int64_t ldx, const float *dy,
                      int64_t lddy, float *dx, int64_t lddx, float *scratch)
{
    const int64_t N = B * m->T, r = m->lora.rank, in = m->lora.in[i], out = m->lora.out[i];
    const float s = m->lora.scale;
    const float *A = p + m->lora.a_off[i], *Bm = p + m->lora.b_off[i];
    float *dA = g + m->lora.a_off[i], *dB = g + m->lora.b_off[i];
    float *xa = scratch, *dxa = xa + N * r, *xd = dxa + N * r, *dxd = xd + N * in;
    int64_t ld;
    const float *xin = dropped(m, la, i, N, x, ldx, xd, &ld);
    /* Forward again: xa = scale * xin A^T. */
    st_gemm(0, 1, N, r, in, xin, ld, A, in, 0.0f, xa, r);
    for (int64_t e = 0; e < N * r; e++)
        xa[e] *= s;
    /* dB += dy^T xa;  dxa = scale * dy B;  dA += dxa^T xin. */
    st_gemm(1, 0, out, r, N, dy, lddy, xa, r, 1.0f, dB, r);
    st_gemm(0, 0, N, r, out, dy, lddy, Bm, r, 0.0f, dxa, r);
    for (int64_t e = 0; e < N * r; e++)
        dxa[e] *= s;
    st_gemm(1, 0, r, in, N, dxa, r, xin, ld, 1.0f, dA, in);
    /* dx += (dxa A), through the dropout mask when there is one. */
    if (la->dropout <= 0.0) {
        st_gemm(0, 0, N, in, r, dxa, r, A, in, 1.0f, dx, lddx);
        return;
    }
    st_gemm(0, 0, N, in, r, dxa, r, A, in, 0.0f, dxd, in);
    const float keep_scale = (float)(1.0 / (1.0 - la->dropout));
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < in; c++)
            if (st_lora_keep(la, m->T, i, n, c, in))
                dx[n * lddx + c] += dxd[n * in + c] * keep_scale;
}
