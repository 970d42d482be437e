/* The cuBLASLt checker (cuda/gemm_check.h) and the emulated st_cuda_gemm_ex
 * (tests/gpu/emu/gemm_host.cpp), on the host, no GPU: tests/cuda_gemm_check.sh
 * builds and runs it.  Two halves:
 *   - one refusal per kind of mistake a caller can make (a wrong ld for a
 *     transpose, a bf16 stride off the 16-byte grid, a misaligned pointer,
 *     beta 0.5, D overlapping an input, C/D declared in place or distinct
 *     but laid out otherwise, each epilogue's missing or mistyped operand,
 *     ...): the emulated call must return cudaErrorInvalidValue and the
 *     reason must name the rule that was broken (so a different rule
 *     firing by accident does not count), and the tier is checked too: a
 *     fast-path rule must be one the real path (fast_path = 0) lets
 *     through, a base rule one it refuses;
 *   - correct calls (in place and separate D, every transpose, each
 *     epilogue, K = 0, bf16) accepted, their D, aux and bias outputs
 *     compared with a float64 reference computed here from the definitions
 *     in cuda/ops.h, within 1e-5 of the largest reference value for fp32
 *     storage, 1e-2 for bf16.
 * The operands live in host memory: linked without devmem.c, gemm_host.cpp
 * has no device arena to check them against. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gemm_check.h"
#include "kernels/cpu_ops.h"
#include "ops.h"
#include "tap.h"

namespace {

/* A 256-byte aligned allocation of n elements of a storage type, with a
 * float shadow of what it holds (the values after rounding to the type). */
struct Mat {
    int type;
    int64_t n;
    void *p;
    Mat(int t, int64_t count) : type(t), n(count)
    {
        p = aligned_alloc(256, (size_t)((count * 4 + 255) / 256 * 256));
        memset(p, 0, (size_t)(count * 4));
    }
    ~Mat() { free(p); }
    Mat(const Mat &) = delete;
    Mat &operator=(const Mat &) = delete;
    float get(int64_t i) const
    {
        float v;
        if (type == ST_CUDA_BF16)
            st_unpack_bf16(&v, (const uint16_t *)p + i, 1);
        else
            v = ((const float *)p)[i];
        return v;
    }
    void set(int64_t i, float v)
    {
        if (type == ST_CUDA_BF16)
            st_pack_bf16((uint16_t *)p + i, &v, 1);
        else
            ((float *)p)[i] = v;
    }
    /* deterministic values in [-1, 1) */
    void fill(unsigned seed)
    {
        uint32_t s = seed * 2654435761u + 12345u;
        for (int64_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            set(i, (float)(s >> 8) / (float)(1u << 23) - 1.0f);
        }
    }
    void poison()
    {
        for (int64_t i = 0; i < n; i++)
            set(i, NAN);
    }
    char *bytes() const { return (char *)p; }
};

const int64_t M = 40, N = 32, K = 24; /* multiples of 8: the fast path */

double gelu(double x)
{
    const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}

double dgelu(double x)
{
    const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/* op(X)[i,k] of a stored matrix */
double op_at(const Mat &x, int trans, int64_t ld, int64_t i, int64_t k)
{
    return trans ? x.get(k * ld + i) : x.get(i * ld + k);
}

/* max |got - want| / max |want| over an M x N region */
double rel_err(const std::vector<double> &want, const Mat &got, int64_t rows, int64_t cols,
               int64_t ld)
{
    double diff = 0.0, scale = 1e-30;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const double w = want[(size_t)(r * cols + c)], g = got.get(r * ld + c);
            scale = fmax(scale, fabs(w));
            diff = isnan(g) ? INFINITY : fmax(diff, fabs(g - w));
        }
    return diff / scale;
}

/* A valid call on fresh buffers, stored at strides padded by 8 elements,
 * C and D distinct; a test changes what it is about. */
struct Call {
    Mat A, B, C, D, bias, aux;
    st_cuda_gemm_desc d;
    Call(int ab_type, int cd_type, int ta, int tb)
        : A(ab_type, (ta ? K : M) * ((ta ? M : K) + 8)),
          B(ab_type, (tb ? N : K) * ((tb ? K : N) + 8)), C(cd_type, M * (N + 8)),
          D(cd_type, M * (N + 8)), bias(cd_type, M > N ? M : N), aux(cd_type, M * (N + 8))
    {
        A.fill(1);
        B.fill(2);
        C.fill(3);
        bias.fill(4);
        aux.fill(5);
        D.poison();
        d = st_cuda_gemm_desc{};
        d.ab_type = ab_type;
        d.trans_a = ta;
        d.trans_b = tb;
        d.M = M;
        d.N = N;
        d.K = K;
        d.A = A.p;
        d.lda = (ta ? M : K) + 8;
        d.B = B.p;
        d.ldb = (tb ? K : N) + 8;
        d.beta = 1.0f;
        d.C = C.p;
        d.ldc = N + 8;
        d.c_type = cd_type;
        d.D = D.p;
        d.ldd = N + 8;
        d.d_type = cd_type;
        d.bias_type = cd_type;
        d.aux_ld = N + 8;
    }
    void epilogue(int e)
    {
        d.epilogue = e;
        d.bias = e == ST_CUDA_EPI_BIAS || e == ST_CUDA_EPI_GELU_AUX_BIAS ||
                         e == ST_CUDA_EPI_BGRADB
                     ? bias.p
                     : NULL;
        d.bias_len = e == ST_CUDA_EPI_BGRADB ? M : N;
        d.aux = e == ST_CUDA_EPI_GELU_AUX_BIAS || e == ST_CUDA_EPI_DGELU ? aux.p : NULL;
        if (e == ST_CUDA_EPI_GELU_AUX_BIAS)
            aux.poison();
        if (e == ST_CUDA_EPI_BGRADB)
            bias.poison();
    }
    /* P = op(A) op(B) + beta*C in double, M x N */
    std::vector<double> product() const
    {
        std::vector<double> p((size_t)(M * N));
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = d.beta == 1.0f ? C.get(i * d.ldc + j) : 0.0;
                for (int64_t k = 0; k < d.K; k++)
                    s += op_at(A, d.trans_a, d.lda, i, k) * op_at(B, d.trans_b, d.ldb, k, j);
                p[(size_t)(i * N + j)] = s;
            }
        return p;
    }
};

st_cuda_gemm_ctx *g_ctx;

/* The call must be refused, for a reason containing `rule`; base = 1: the
 * real path (base rules) refuses it too, 0: only the fast path does. */
void refused(const char *what, const st_cuda_gemm_desc &d, const char *rule, int base)
{
    char why[256], why0[256];
    const char *r = st_gemm_check(&d, 1, why, sizeof why);
    const char *r0 = st_gemm_check(&d, 0, why0, sizeof why0);
    /* A call the checker lets through is not run: it would write out of
     * bounds (that is what the rules are for). */
    const cudaError_t e = r ? st_cuda_gemm_ex(g_ctx, &d, 0) : cudaSuccess;
    const bool tier = base ? r0 != NULL : r0 == NULL;
    if (!tap_ok(e == cudaErrorInvalidValue && r && strstr(r, rule) && tier,
                "refused: %s (%s rule)", what, base ? "base" : "fast-path"))
        tap_diag("status %d, reason \"%s\", base-tier reason \"%s\", expected \"%s\"", (int)e,
                 r ? r : "(accepted)", r0 ? r0 : "(accepted)", rule);
}

/* The call must be accepted and D (and what the epilogue writes) match. */
void accepted(const char *what, Call &c, double tol)
{
    const std::vector<double> p = c.product();
    const int ep = c.d.epilogue;
    std::vector<double> want = p, want_aux, want_bias;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double &v = want[(size_t)(i * N + j)];
            if (ep == ST_CUDA_EPI_BIAS || ep == ST_CUDA_EPI_GELU_AUX_BIAS)
                v += c.bias.get(j);
            if (ep == ST_CUDA_EPI_GELU_AUX_BIAS) {
                want_aux.push_back(v);
                v = gelu(v);
            }
            if (ep == ST_CUDA_EPI_DGELU)
                v *= dgelu(c.aux.get(i * c.d.aux_ld + j));
        }
    if (ep == ST_CUDA_EPI_BGRADB)
        for (int64_t i = 0; i < M; i++) {
            double s = 0.0;
            for (int64_t k = 0; k < c.d.K; k++)
                s += op_at(c.A, c.d.trans_a, c.d.lda, i, k);
            want_bias.push_back(s);
        }
    std::vector<float> c_before((size_t)c.C.n);
    for (int64_t i = 0; i < c.C.n; i++)
        c_before[(size_t)i] = c.C.get(i);

    const cudaError_t e = st_cuda_gemm_ex(g_ctx, &c.d, 0);
    const Mat &out = c.d.in_place ? c.C : c.D;
    double err = e == cudaSuccess ? rel_err(want, out, M, N, c.d.ldd) : INFINITY;
    if (e == cudaSuccess && !want_aux.empty())
        err = fmax(err, rel_err(want_aux, c.aux, M, N, c.d.aux_ld));
    if (e == cudaSuccess && !want_bias.empty())
        err = fmax(err, rel_err(want_bias, c.bias, 1, M, M));
    bool c_kept = true; /* a separate D leaves C alone */
    if (!c.d.in_place)
        for (int64_t i = 0; i < c.C.n; i++)
            c_kept = c_kept && (c.C.get(i) == c_before[(size_t)i] ||
                                (isnan(c.C.get(i)) && isnan(c_before[(size_t)i])));
    if (!tap_ok(e == cudaSuccess && err <= tol && c_kept, "accepted: %s (error %.2g)", what,
                err))
        tap_diag("status %d, relative error %.3g (tolerance %.0e), C %s", (int)e, err, tol,
                 c_kept ? "kept" : "overwritten");
}

void refusals()
{
    const int F = ST_CUDA_F32, H = ST_CUDA_BF16;
    {
        Call c(F, F, 1, 0); /* A stored K x M: its rows hold M elements */
        c.d.lda = K;
        refused("lda = K for trans_a = 1 (the untransposed row length)", c.d, "lda=", 1);
    }
    {
        Call c(F, F, 0, 0); /* B stored K x N: its rows hold N = 32 > K elements */
        c.d.ldb = K;
        refused("ldb = K for trans_b = 0 (the transposed row length)", c.d, "ldb=", 1);
    }
    {
        Call c(H, H, 0, 0);
        c.d.ldb = N + 4;
        refused("bf16 ldb not a multiple of 8", c.d, "multiple of 8 elements", 0);
    }
    {
        Call c(F, F, 0, 0);
        c.d.ldd = N + 2;
        refused("fp32 ldd not a multiple of 4", c.d, "multiple of 4 elements", 0);
    }
    {
        Call c(H, H, 0, 0);
        c.d.A = c.A.bytes() + 2;
        refused("A at base + 2 bytes", c.d, "A (", 0);
    }
    {
        Call c(F, F, 0, 0);
        c.d.D = c.D.bytes() + 4;
        refused("D at base + 4 bytes", c.d, "D (", 0);
    }
    {
        Call c(F, F, 0, 0);
        c.d.beta = 0.5f;
        refused("beta = 0.5", c.d, "beta=0.5", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.C = NULL;
        refused("beta = 1 with C NULL", c.d, "C is NULL", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.D = c.A.p;
        refused("D overlapping A", c.d, "D overlaps A", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.D = c.B.bytes() + 64;
        refused("D overlapping B", c.d, "D overlaps B", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.in_place = 1;
        refused("in place declared but D != C", c.d, "in_place declared but D", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.in_place = 1;
        c.d.D = c.C.p;
        c.d.ldd = N + 16;
        refused("in place declared but ldd != ldc", c.d, "in_place declared but ldd", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.D = c.C.p;
        refused("distinct declared but D == C", c.d, "in_place is not declared", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.D = c.C.bytes() + 16 * (N + 8) * 4;
        refused("distinct D overlapping C (16 rows down)", c.d, "D overlaps C", 1);
    }
    {
        Call c(H, H, 0, 0);
        c.d.d_type = F;
        refused("C bf16 but D fp32", c.d, "one type", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.d.M = 0;
        refused("M = 0", c.d, "M=0", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_BIAS);
        c.d.K = 0;
        refused("K = 0 with an epilogue", c.d, "K=0 with epilogue", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_NONE);
        c.d.bias = c.bias.p;
        refused("bias given with epilogue NONE", c.d, "does not use it", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_BIAS);
        c.d.bias = NULL;
        refused("BIAS without a bias vector", c.d, "needs a bias vector", 1);
    }
    {
        Call c(H, H, 0, 0);
        c.epilogue(ST_CUDA_EPI_BIAS);
        c.d.bias_type = F;
        refused("BIAS with an fp32 bias for bf16 D", c.d, "bias is fp32 but D is bf16", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_BIAS);
        c.d.bias_len = M;
        refused("BIAS with M entries (bias is per column: N)", c.d, "needs N=", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_BIAS);
        c.d.bias = c.bias.bytes() + 8;
        refused("bias at base + 8 bytes", c.d, "bias (", 0);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_GELU_AUX_BIAS);
        c.d.aux = NULL;
        refused("GELU_AUX_BIAS without aux", c.d, "needs the aux matrix", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_DGELU);
        c.d.aux = NULL;
        refused("DGELU without aux", c.d, "needs the aux matrix", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_DGELU);
        c.d.aux_ld = N + 4;
        refused("aux_ld not a multiple of 8", c.d, "aux_ld=", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_DGELU);
        c.d.aux_ld = N - 8;
        refused("aux_ld < N", c.d, "aux_ld=", 1);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_GELU_AUX_BIAS);
        c.d.aux = c.D.bytes() + 64;
        refused("aux overlapping D", c.d, "aux overlaps D", 1);
    }
    {
        Call c(H, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_GELU_AUX_BIAS);
        refused("GELU_AUX_BIAS with bf16 A/B and fp32 D", c.d, "GELU epilogues need one type",
                1);
    }
    {
        Call c(F, F, 1, 0);
        c.epilogue(ST_CUDA_EPI_BGRADB);
        c.d.bias = NULL;
        refused("BGRADB without its output", c.d, "needs a bias vector", 1);
    }
    {
        Call c(F, F, 1, 0);
        c.epilogue(ST_CUDA_EPI_BGRADB);
        c.d.bias_len = N;
        refused("BGRADB with N entries (one per row of D: M)", c.d, "needs M=", 1);
    }
    {
        Call c(F, F, 1, 0);
        c.epilogue(ST_CUDA_EPI_BGRADB);
        c.d.bias = c.A.p;
        refused("BGRADB output overlapping A", c.d, "BGRADB output", 1);
    }
}

void values()
{
    const int F = ST_CUDA_F32, H = ST_CUDA_BF16;
    char what[128];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            Call c(F, F, ta, tb);
            c.d.in_place = 1;
            c.d.D = c.C.p;
            c.d.ldd = c.d.ldc;
            snprintf(what, sizeof what, "in place, beta 1, trans_a=%d trans_b=%d", ta, tb);
            accepted(what, c, 1e-5);
        }
    {
        Call c(F, F, 1, 1);
        accepted("separate D, beta 1 (C kept)", c, 1e-5);
    }
    {
        Call c(F, F, 0, 1);
        c.d.beta = 0.0f;
        c.C.poison();
        accepted("separate D, beta 0, C all NaN (not read)", c, 1e-5);
    }
    {
        Call c(F, F, 0, 0);
        c.d.beta = 0.0f;
        c.d.C = NULL;
        accepted("separate D, beta 0, C NULL", c, 1e-5);
    }
    {
        Call c(F, F, 0, 1);
        c.d.K = 0;
        accepted("K = 0, beta 1: D = C", c, 1e-5);
    }
    {
        Call c(F, F, 0, 1);
        c.epilogue(ST_CUDA_EPI_BIAS);
        accepted("BIAS (one bias entry per column of D)", c, 1e-5);
    }
    {
        Call c(F, F, 0, 1);
        c.d.beta = 0.0f;
        c.epilogue(ST_CUDA_EPI_GELU_AUX_BIAS);
        accepted("GELU_AUX_BIAS: D = gelu(P + bias), aux = P + bias", c, 1e-5);
    }
    {
        Call c(F, F, 0, 0);
        c.epilogue(ST_CUDA_EPI_DGELU);
        accepted("DGELU: D = P * gelu'(aux)", c, 1e-5);
    }
    {
        Call c(F, F, 1, 0);
        c.epilogue(ST_CUDA_EPI_BGRADB);
        accepted("BGRADB, trans_a=1: bias[i] = sum_k op(A)[i,k]", c, 1e-5);
    }
    {
        Call c(F, F, 0, 1);
        c.epilogue(ST_CUDA_EPI_BGRADB);
        accepted("BGRADB, trans_a=0", c, 1e-5);
    }
    {
        Call c(H, H, 1, 0);
        accepted("bf16 in and out, separate D", c, 1e-2);
    }
    {
        Call c(H, F, 0, 1);
        c.d.beta = 0.0f;
        c.d.C = NULL;
        accepted("bf16 in, fp32 out", c, 1e-5);
    }
    {
        Call c(H, H, 0, 1);
        c.d.beta = 0.0f;
        c.epilogue(ST_CUDA_EPI_GELU_AUX_BIAS);
        accepted("bf16 GELU_AUX_BIAS", c, 1e-2);
    }
    {
        /* the thin wrapper: in place, no epilogue */
        Call c(F, F, 1, 1);
        const std::vector<double> want = c.product();
        const cudaError_t e =
            st_cuda_gemm(g_ctx, F, F, 1, 1, M, N, K, c.A.p, c.d.lda, c.B.p, c.d.ldb, 1.0f,
                         c.C.p, c.d.ldc, 0);
        const double err = e == cudaSuccess ? rel_err(want, c.C, M, N, c.d.ldc) : INFINITY;
        tap_ok(e == cudaSuccess && err <= 1e-5, "accepted: st_cuda_gemm wrapper (error %.2g)",
               err);
    }
}

} /* namespace */

int main(void)
{
    if (st_cuda_gemm_create(&g_ctx, 0) != cudaSuccess) {
        printf("Bail out! st_cuda_gemm_create failed\n");
        return 1;
    }
    refusals();
    values();
    st_cuda_gemm_destroy(g_ctx);
    return tap_done();
}
