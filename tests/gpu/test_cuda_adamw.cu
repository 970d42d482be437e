/* The one-launch-per-unit AdamW of cuda/adamw.cu (st_cuda_adamw_unit)
 * against the CPU reference, st_adamw, applied segment by segment as the
 * CPU backend does.  On a GPU (make check-gpu) and on the CPU under the
 * host emulation of tests/gpu/emu/ (tests/cuda_adamw_emu.sh, which also
 * counts the launches).  TAP.
 *
 * The segments mix decay and no decay, lengths from 0 to a few thousand,
 * and leave gaps (the padding of a shard), which must stay untouched, bf16
 * copy included.  Checked per case:
 *   - the moments: with grad_scale 1 the kernel does the CPU's fp32
 *     operations in the CPU's order, so m and v must be the same bits;
 *     otherwise the scaled gradient may differ by an ulp (fp32 product
 *     against the CPU's rounded fp64 one), and each moment must lie within
 *     2^-21 of the magnitude of its two terms;
 *   - the parameters: the CPU computes the update u = mhat / (sqrt(vhat) +
 *     eps) + wd p and p - lr u in fp64 and rounds once; the kernel rounds
 *     each of its ~8 fp32 operations (2^-24 relative each, and the fp32
 *     bias corrections another 2^-24).  Every new parameter must lie within
 *     ulp(p) + 2^-20 lr U of the CPU's, where U bounds |u| term by term
 *     (|b1 m| + |(1 - b1) g|) / c1 / (sqrt(vhat) + eps) + wd |p|): 16 times
 *     the expected rounding, so a miss is a wrong formula, not noise.  A
 *     wrong decay flag is off by lr wd |p|, thousands of times the bound;
 *   - the bf16 copy: exactly st_pack_bf16 of the kernel's own new
 *     parameters, bit for bit;
 *   - twice from the same inputs: the same bits (elementwise, no atomics);
 *   - the clip read from device memory (clip_sumsq): the same bits as the
 *     factor computed on the host and passed as grad_scale, with the norm
 *     above the clip (scaled) and below it (unscaled);
 *   - under the emulation: one launch for up to ST_CUDA_ADAMW_MAX_SEGMENTS
 *     segments, one more per further batch;
 *   - the 16-byte path (every segment on multiples of 8 elements: the "by
 *     8" cases, checked as above) against the one-element path on the same
 *     numbers, bit for bit, and under the emulation 16-byte accesses exactly
 *     on the first;
 *   - the step gate (src/kernels/step_gate.h): the one-thread verdict and
 *     gate kernels give the host functions' doubles over a sequence of
 *     finite, non-finite and forced steps up to the stop at the limit; an
 *     open gate gives the ungated update's bits at the gate's step (t passed
 *     wrong on purpose, so the gate's corrections must be the ones used),
 *     a shut gate writes nothing. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "adamw.h"
#include "base/dtype.h"
#include "gpu_check.h"
#include "kernels/cpu_adamw.h"
#include "kernels/step_gate.h"
#include "tap.h"

namespace {

struct Case {
    const char *name;
    double lr, b1, b2, eps, wd, gs;
    int64_t t;
};

/* The shard's layout: segments in order with gaps between some.  by8:
 * every length and gap rounded up to a multiple of 8 elements, the layout
 * the kernel's 16-byte path needs (the models' shards have it). */
std::vector<st_cuda_adamw_segment> layout(int n, int64_t *shard, bool by8 = false)
{
    static const int64_t lens[] = {1, 7, 1000, 0, 4097, 33, 300, 65, 2, 513};
    std::vector<st_cuda_adamw_segment> s;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = lens[i % 10] + (i / 10) * 3;
        if (by8)
            len = (len + 7) / 8 * 8;
        if (i % 4 == 3)
            at += by8 ? 8 : 5; /* a gap */
        s.push_back({at, len, (i % 3) != 1});
        at += len;
    }
    *shard = at + 11; /* trailing padding */
    return s;
}

struct Result {
    std::vector<float> p, m, v;
    std::vector<uint16_t> w;
};

template <class T> T *dev(const std::vector<T> &h)
{
    T *d;
    CK(cudaMalloc((void **)&d, sizeof(T) * h.size()));
    CK(cudaMemcpy(d, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice));
    return d;
}

template <class T> std::vector<T> host(const T *d, size_t n)
{
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
}

Result run_gpu(const std::vector<st_cuda_adamw_segment> &segs, const Case &c,
               const std::vector<float> &p, const std::vector<float> &g,
               const std::vector<float> &m, const std::vector<float> &v,
               const std::vector<uint16_t> &w, double sumsq = -1.0, double clip = 0.0,
               const std::vector<double> *gate = nullptr)
{
    float *dp = dev(p), *dg = dev(g), *dm = dev(m), *dv = dev(v);
    uint16_t *dw = dev(w);
    double *dss = sumsq >= 0.0 ? dev(std::vector<double>{sumsq}) : nullptr;
    double *dgate = gate ? dev(*gate) : nullptr;
    CK(st_cuda_adamw_unit(segs.data(), (int)segs.size(), dp, dg, dm, dv, dw, c.lr, c.b1, c.b2,
                          c.eps, c.wd, c.gs, dss, clip, gate ? 999999 : c.t, dgate, 0));
    CK(cudaDeviceSynchronize());
    if (dss)
        cudaFree(dss);
    if (dgate)
        cudaFree(dgate);
    Result r{host(dp, p.size()), host(dm, p.size()), host(dv, p.size()), host(dw, p.size())};
    cudaFree(dp);
    cudaFree(dg);
    cudaFree(dm);
    cudaFree(dv);
    cudaFree(dw);
    return r;
}

double ulp(float x)
{
    x = fabsf(x);
    return (double)nextafterf(x, INFINITY) - (double)x;
}

bool same_bits(const void *a, const void *b, size_t bytes) { return !memcmp(a, b, bytes); }

bool same_result(const Result &a, const Result &b, size_t n)
{
    return same_bits(a.p.data(), b.p.data(), 4 * n) && same_bits(a.m.data(), b.m.data(), 4 * n) &&
           same_bits(a.v.data(), b.v.data(), 4 * n) && same_bits(a.w.data(), b.w.data(), 2 * n);
}

/* A shard's parameters, gradient and moments, and stale bf16 words. */
void random_state(int64_t n, std::vector<float> &p, std::vector<float> &g, std::vector<float> &m,
                  std::vector<float> &v, std::vector<uint16_t> &w)
{
    p.resize(n);
    g.resize(n);
    m.resize(n);
    v.resize(n);
    w.assign(n, 0xabcd);
    for (int64_t i = 0; i < n; i++) {
        p[i] = uniform_pm1();
        g[i] = uniform_pm1();
        m[i] = 0.1f * uniform_pm1();
        v[i] = 0.01f * fabsf(uniform_pm1());
    }
}

/* st_clip_factor (src/kernels/kernels.h), what the host would pass. */
double clip_factor(double sumsq, double clip)
{
    const double norm = sqrt(sumsq);
    return clip > 0.0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
}

/* The clip read on the device against the host's factor as grad_scale. */
void clip_case(const Case &c)
{
    int64_t n;
    std::vector<st_cuda_adamw_segment> segs = layout(12, &n);
    std::vector<float> p, g, m, v;
    std::vector<uint16_t> w;
    random_state(n, p, g, m, v, w);
    const double sumsq = 7.3, clip = 1.0; /* norm 2.70...: clipped */
    Case host = c;
    host.gs = c.gs * clip_factor(sumsq, clip);
    const Result on_host = run_gpu(segs, host, p, g, m, v, w);
    const Result on_dev = run_gpu(segs, c, p, g, m, v, w, sumsq, clip);
    tap_ok(host.gs != c.gs && same_result(on_dev, on_host, (size_t)n),
           "%s: the clip read on the device gives the host factor's bits (scale %.6f)", c.name,
           host.gs);
    const Result unclipped = run_gpu(segs, c, p, g, m, v, w);
    const Result below = run_gpu(segs, c, p, g, m, v, w, sumsq, 3.0);
    tap_ok(same_result(below, unclipped, (size_t)n),
           "%s: a norm below the clip leaves the gradient unscaled", c.name);
}

/* Equal bits, or both NaN: a GPU's NaN results carry the canonical payload,
 * the host's the operand's. */
bool same_doubles(const double *a, const double *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && !same_bits(&a[i], &b[i], sizeof(double)))
            return false;
    return true;
}

/* The gate (src/kernels/step_gate.h): the verdict and gate kernels give
 * the host functions' doubles for a sequence of steps (finite, not
 * finite, a NaN loss, the stop at the limit), and AdamW under a gate runs
 * exactly as the ungated update at the gate's step, or writes nothing. */
void gate_case(const Case &c)
{
    /* Verdicts for: finite, infinite norm, NaN loss, finite, forced, then
     * three bad steps in a row reaching the limit 3, then a finite step
     * that must not apply after the stop. */
    struct Step { double loss0, loss1, sumsq; int force; };
    const Step steps[] = {{1.5, 2.25, 4.0, 0}, {1.0, 1.0, INFINITY, 0}, {NAN, 1.0, 1.0, 0},
                          {0.5, 0.25, 9.0, 0}, {0.5, 0.25, 9.0, 1}, {1.0, 1.0, NAN, 0},
                          {INFINITY, 1.0, 1.0, 0}, {1.0, 2.0, 3.0, 0}};
    const int want_applied[] = {1, 0, 0, 1, 0, 0, 0, 0};
    const int64_t limit = 3;
    std::vector<double> hgate(ST_GATE_N, 0.0);
    hgate[ST_GATE_T] = c.t - 1;
    double *dgate = dev(hgate), *drec = dev(std::vector<double>(ST_VERDICT_N, -7.0));
    int same = 1, applied_ok = 1, n = 0;
    for (const Step &st : steps) {
        const std::vector<double> losses{st.loss0, st.loss1}, ss{st.sumsq};
        double *dl = dev(losses), *dss = dev(ss);
        CK(st_cuda_step_verdict(drec, dl, 2, dss, st.force, 0));
        CK(st_cuda_step_gate(dgate, drec, limit, c.b1, c.b2, 0));
        CK(cudaDeviceSynchronize());
        double hrec[ST_VERDICT_N];
        st_verdict_local(hrec, losses.data(), 2, ss.data(), st.force);
        st_verdict_gate(hgate.data(), hrec, limit, c.b1, c.b2);
        const std::vector<double> grec = host(drec, ST_VERDICT_N), gg = host(dgate, ST_GATE_N);
        same &= same_doubles(grec.data(), hrec, ST_VERDICT_N) &&
                same_doubles(gg.data(), hgate.data(), ST_GATE_N);
        applied_ok &= (int)grec[ST_VERDICT_APPLIED] == want_applied[n++];
        cudaFree(dl);
        cudaFree(dss);
    }
    cudaFree(dgate);
    cudaFree(drec);
    tap_ok(same, "%s: the verdict and gate kernels give the host functions' bits, 8 steps",
           c.name);
    tap_ok(applied_ok && hgate[ST_GATE_T] == (double)(c.t + 1) && hgate[ST_GATE_STOPPED] == 1.0,
           "%s: finite steps apply, non-finite and forced ones do not, none after the stop "
           "(T %g, stopped %g)", c.name, hgate[ST_GATE_T], hgate[ST_GATE_STOPPED]);

    int64_t nel;
    std::vector<st_cuda_adamw_segment> segs = layout(12, &nel);
    std::vector<float> p, g, m, v;
    std::vector<uint16_t> w;
    random_state(nel, p, g, m, v, w);
    /* A gate at the case's step, from st_verdict_gate on a finite record. */
    std::vector<double> open(ST_GATE_N, 0.0);
    open[ST_GATE_T] = (double)(c.t - 1);
    double rec[ST_VERDICT_N] = {1.0, 0.0, 1.0, 0.0};
    st_verdict_gate(open.data(), rec, 0, c.b1, c.b2);
    const Result ungated = run_gpu(segs, c, p, g, m, v, w);
    const Result gated = run_gpu(segs, c, p, g, m, v, w, -1.0, 0.0, &open);
    tap_ok(open[ST_GATE_APPLY] == 1.0 && open[ST_GATE_T] == (double)c.t &&
               same_result(gated, ungated, (size_t)nel),
           "%s: an open gate updates as the ungated kernel at step %lld, bit for bit", c.name,
           (long long)c.t);
    std::vector<double> shut = open;
    shut[ST_GATE_APPLY] = 0.0;
    const Result skipped = run_gpu(segs, c, p, g, m, v, w, -1.0, 0.0, &shut);
    const Result before{p, m, v, w};
    tap_ok(same_result(skipped, before, (size_t)nel),
           "%s: a shut gate writes nothing (p, m, v and the bf16 copy unchanged)", c.name);
}

long vec_accesses(void)
{
#ifdef ST_CUDA_EMULATION
    return emu_vec_accesses;
#else
    return 0;
#endif
}

/* The 16-byte path against the one-element path on the same numbers: the
 * by8 layout (vector path), then the same segments one element further
 * into arrays one longer (offsets odd: the scalar path).  Same bits
 * required; under the emulation, 16-byte accesses in the first run only. */
void vec_case(const Case &c)
{
    int64_t n;
    std::vector<st_cuda_adamw_segment> segs = layout(12, &n, true), skew = segs;
    for (auto &sg : skew)
        sg.offset += 1;
    std::vector<float> p, g, m, v;
    std::vector<uint16_t> w;
    random_state(n, p, g, m, v, w);
    /* The skewed arrays: one element in front, so element i + 1 there is
     * element i here. */
    std::vector<float> ps = p, gs = g, ms = m, vs = v;
    std::vector<uint16_t> ws = w;
    ps.insert(ps.begin(), 0.5f), gs.insert(gs.begin(), 0.5f);
    ms.insert(ms.begin(), 0.0f), vs.insert(vs.begin(), 0.0f), ws.insert(ws.begin(), 0xabcd);
    const long c0 = vec_accesses();
    const Result a = run_gpu(segs, c, p, g, m, v, w);
    const long c1 = vec_accesses();
    const Result b = run_gpu(skew, c, ps, gs, ms, vs, ws);
    const long c2 = vec_accesses();
    const Result b1{std::vector<float>(b.p.begin() + 1, b.p.end()),
                    std::vector<float>(b.m.begin() + 1, b.m.end()),
                    std::vector<float>(b.v.begin() + 1, b.v.end()),
                    std::vector<uint16_t>(b.w.begin() + 1, b.w.end())};
    tap_ok(same_result(a, b1, (size_t)n),
           "%s: the 16-byte path and the one-element path give the same bits", c.name);
#ifdef ST_CUDA_EMULATION
    tap_ok(c1 > c0 && c2 == c1,
           "%s: 16-byte accesses on the by-8 layout (%ld), none when skewed (%ld)", c.name,
           c1 - c0, c2 - c1);
#else
    (void)c0, (void)c1, (void)c2;
#endif
}

void run_case(const Case &c_in, int n_segs, bool by8 = false)
{
    const std::string name = std::string(c_in.name) + (by8 ? ", by 8" : "");
    Case c = c_in;
    c.name = name.c_str();
    int64_t n;
    std::vector<st_cuda_adamw_segment> segs = layout(n_segs, &n, by8);
    std::vector<float> p(n), g(n), m(n), v(n);
    std::vector<uint16_t> w(n, 0xabcd); /* the copy before: stale words */
    for (int64_t i = 0; i < n; i++) {
        p[i] = uniform_pm1();
        g[i] = uniform_pm1() * (i % 17 == 0 ? 1e-3f : 1.0f);
        m[i] = 0.1f * uniform_pm1();
        v[i] = 0.01f * fabsf(uniform_pm1());
    }
    /* The reference: st_adamw on each segment, as the CPU backend. */
    std::vector<float> rp = p, rm = m, rv = v;
    std::vector<char> inside(n, 0); /* 0: a gap, 1: no decay, 2: decay */
    for (const auto &s : segs) {
        st_adamw(&rp[s.offset], &g[s.offset], &rm[s.offset], &rv[s.offset], s.length, c.lr,
                 c.b1, c.b2, c.eps, s.decay ? c.wd : 0.0, c.gs, c.t);
        memset(&inside[s.offset], s.decay ? 2 : 1, (size_t)s.length);
    }
#ifndef __CUDACC__
    const long launches_before = emu_launch_count("adamw_unit_kernel");
#endif
    Result r = run_gpu(segs, c, p, g, m, v, w);
#ifndef __CUDACC__
    const long launches = emu_launch_count("adamw_unit_kernel") - launches_before;
    const long want = (n_segs + ST_CUDA_ADAMW_MAX_SEGMENTS - 1) / ST_CUDA_ADAMW_MAX_SEGMENTS;
    tap_ok(launches == want, "%s, %d segments: %ld launch(es) (want %ld)", c.name, n_segs,
           launches, want);
#endif

    const double c1 = 1.0 - pow(c.b1, (double)c.t), c2 = 1.0 - pow(c.b2, (double)c.t);
    double worst_m = 0, worst_v = 0, worst_p = 0;
    int64_t exact_p = 0, exact_mv = 0, in = 0, bad_gap = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!inside[i]) {
            bad_gap += !same_bits(&r.p[i], &p[i], 4) || !same_bits(&r.m[i], &m[i], 4) ||
                       !same_bits(&r.v[i], &v[i], 4) || r.w[i] != 0xabcd;
            continue;
        }
        in++;
        const double gi = fabs((double)g[i] * c.gs);
        const double mt = fabs(c.b1 * m[i]) + (1 - c.b1) * gi;
        const double vt = c.b2 * v[i] + (1 - c.b2) * gi * gi;
        worst_m = fmax(worst_m, fabs((double)r.m[i] - rm[i]) / (ldexp(mt, -21) + 1e-38));
        worst_v = fmax(worst_v, fabs((double)r.v[i] - rv[i]) / (ldexp(vt, -21) + 1e-38));
        exact_mv += same_bits(&r.m[i], &rm[i], 4) && same_bits(&r.v[i], &rv[i], 4);
        const double U = mt / c1 / (sqrt((double)rv[i] / c2) + c.eps) +
                         (inside[i] == 2 ? c.wd * fabs(p[i]) : 0.0);
        const double bound = fmax(ulp(rp[i]), ulp(r.p[i])) + ldexp(c.lr * U, -20);
        const double err = fabs((double)r.p[i] - rp[i]);
        if (!(err <= bound * 1e9)) /* NaN, or wildly off */
            worst_p = INFINITY;
        else
            worst_p = fmax(worst_p, err / bound);
        exact_p += same_bits(&r.p[i], &rp[i], 4);
    }
    if (c.gs == 1.0)
        tap_ok(exact_mv == in, "%s, %d segments: m and v are the CPU's bits (%lld of %lld)",
               c.name, n_segs, (long long)exact_mv, (long long)in);
    else
        tap_ok(worst_m <= 1.0 && worst_v <= 1.0,
               "%s, %d segments: m, v within 2^-21 of their terms (worst %.3g, %.3g of it)",
               c.name, n_segs, worst_m, worst_v);
    tap_ok(worst_p <= 1.0,
           "%s, %d segments: p within ulp + 2^-20 lr |u| of the CPU (worst %.3g of the bound)",
           c.name, n_segs, worst_p);
    tap_diag("%s: %lld of %lld parameters bit-identical to the fp64 CPU update", c.name,
             (long long)exact_p, (long long)in);
    tap_ok(bad_gap == 0, "%s, %d segments: elements outside the segments untouched (%lld moved)",
           c.name, n_segs, (long long)bad_gap);

    std::vector<uint16_t> want16(n);
    st_pack_bf16(want16.data(), r.p.data(), n);
    int64_t bad16 = 0;
    for (int64_t i = 0; i < n; i++)
        bad16 += inside[i] && r.w[i] != want16[i];
    tap_ok(bad16 == 0, "%s, %d segments: the bf16 copy is st_pack_bf16 of the new p (%lld differ)",
           c.name, n_segs, (long long)bad16);

    Result again = run_gpu(segs, c, p, g, m, v, w);
    tap_ok(same_bits(again.p.data(), r.p.data(), 4 * n) &&
               same_bits(again.m.data(), r.m.data(), 4 * n) &&
               same_bits(again.v.data(), r.v.data(), 4 * n) &&
               same_bits(again.w.data(), r.w.data(), 2 * n),
           "%s, %d segments: a second run gives the same bits", c.name, n_segs);
}

} /* namespace */

int main(void)
{
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        printf("Bail out! no usable CUDA GPU (%s): test_cuda_adamw needs one\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 1;
    }
    const Case cases[] = {
        {"first step, wd 0.1", 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0, 1},
        {"step 10, clipped 0.73", 3e-3, 0.9, 0.95, 1e-8, 0.1, 0.73, 10},
        {"step 1000, beta2 0.999", 6e-4, 0.9, 0.999, 1e-8, 0.01, 1.0, 1000},
    };
    for (const Case &c : cases) {
        run_case(c, 10);
        run_case(c, 10, true); /* the 16-byte path */
    }
    vec_case(cases[1]);
    /* More segments than one launch carries: the batching path. */
    run_case(cases[1], ST_CUDA_ADAMW_MAX_SEGMENTS + 6);
    clip_case(cases[0]);
    gate_case(cases[1]);
    gate_case(cases[2]);
    return tap_done();
}
