/* The rules a matrix product (st_cuda_gemm_desc of cuda/ops.h) must meet,
 * checked on the host before anything runs.  One function serves both
 * implementations: cuda/gemm_lt.cu calls it before building the cuBLASLt
 * descriptors, and the host emulation (tests/gpu/emu/gemm_host.cpp) calls
 * it on every call, so a caller's mistake that cuBLASLt would refuse, or
 * that would silently corrupt memory on the device, fails the emulated
 * runs on a machine without a GPU instead of surfacing later on one.
 *
 * Two tiers.  The base rules are what cuBLASLt documents as required (or
 * what would be a data race: overlapping outputs), plus the limits of our
 * own interface (beta 0 or 1, bias of D's type).  The fast-path rules
 * (fast_path = 1) add what the 16-byte vectorised tensor-core kernels need:
 * every pointer 16-byte aligned and every row stride a multiple of 16 bytes
 * (8 bf16, 4 fp32 elements).  cuBLASLt itself runs a call that misses them
 * on slower kernels, so the real path checks the base rules only (a GPT-2
 * vocabulary of 50257 gives logits rows of an odd stride and must still
 * run there); the emulation checks both, so a caller that falls off the
 * fast path by mistake fails its tests.
 *
 * Header-only and plain C++ (no CUDA types beyond ops.h's), so nvcc and
 * g++ compile the same text; the reason is one line, written to buf. */
#ifndef ST_CUDA_GEMM_CHECK_H
#define ST_CUDA_GEMM_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "ops.h"

namespace st_gemm_check_detail {

inline int64_t elem_bytes(int type) { return type == ST_CUDA_BF16 ? 2 : 4; }
inline const char *type_name(int type) { return type == ST_CUDA_BF16 ? "bf16" : "fp32"; }

/* The bytes a rows x cols row-major matrix at row stride ld spans (the
 * last row stops at its last column, as cuBLASLt reads it). */
struct span {
    uintptr_t lo, hi; /* [lo, hi); lo == hi: absent */
};
inline span extent(const void *p, int64_t rows, int64_t cols, int64_t ld, int type)
{
    span s = {(uintptr_t)p, (uintptr_t)p};
    if (p && rows > 0 && cols > 0)
        s.hi = s.lo + (uintptr_t)(((rows - 1) * ld + cols) * elem_bytes(type));
    return s;
}
inline bool overlap(span a, span b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

inline const char *epilogue_name(int e)
{
    switch (e) {
    case ST_CUDA_EPI_NONE: return "NONE";
    case ST_CUDA_EPI_BIAS: return "BIAS";
    case ST_CUDA_EPI_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case ST_CUDA_EPI_DGELU: return "DGELU";
    case ST_CUDA_EPI_BGRADB: return "BGRADB";
    }
    return "?";
}

} /* namespace st_gemm_check_detail */

/* NULL when *d may run, else the reason (one line, in buf). */
inline const char *st_gemm_check(const st_cuda_gemm_desc *d, int fast_path, char *buf,
                                 size_t n)
{
    using namespace st_gemm_check_detail;
#define ST_GEMM_REFUSE(...)                                                                \
    do {                                                                                   \
        snprintf(buf, n, __VA_ARGS__);                                                     \
        return buf;                                                                        \
    } while (0)
    if (!d)
        ST_GEMM_REFUSE("no descriptor");
    const int64_t M = d->M, N = d->N, K = d->K;
    const int ep = d->epilogue;
    const bool ck = d->C != NULL;

    /* ---- what the call is ---- */
    if ((d->ab_type != ST_CUDA_F32 && d->ab_type != ST_CUDA_BF16) ||
        (d->c_type != ST_CUDA_F32 && d->c_type != ST_CUDA_BF16) ||
        (d->d_type != ST_CUDA_F32 && d->d_type != ST_CUDA_BF16))
        ST_GEMM_REFUSE("unknown storage type (ab %d, c %d, d %d)", d->ab_type, d->c_type,
                       d->d_type);
    if ((d->trans_a != 0 && d->trans_a != 1) || (d->trans_b != 0 && d->trans_b != 1))
        ST_GEMM_REFUSE("trans_a=%d trans_b=%d: each must be 0 or 1", d->trans_a, d->trans_b);
    if (M <= 0 || N <= 0 || K < 0)
        ST_GEMM_REFUSE("M=%lld N=%lld K=%lld: M and N must be >= 1, K >= 0", (long long)M,
                       (long long)N, (long long)K);
    if (ep < ST_CUDA_EPI_NONE || ep > ST_CUDA_EPI_BGRADB)
        ST_GEMM_REFUSE("unknown epilogue %d", ep);
    if (K == 0 && ep != ST_CUDA_EPI_NONE)
        ST_GEMM_REFUSE("K=0 with epilogue %s: an empty product takes no epilogue",
                       epilogue_name(ep));
    if (d->beta != 0.0f && d->beta != 1.0f)
        ST_GEMM_REFUSE("beta=%g: only 0 and 1 are supported", (double)d->beta);
    if (d->beta == 1.0f && !ck)
        ST_GEMM_REFUSE("beta=1 reads C, but C is NULL");
    if (!d->D)
        ST_GEMM_REFUSE("D is NULL");
    if (K > 0 && (!d->A || !d->B))
        ST_GEMM_REFUSE("%s is NULL", d->A ? "B" : "A");

    /* ---- shapes: each row stride covers a stored row ---- */
    const int64_t a_rows = d->trans_a ? K : M, a_cols = d->trans_a ? M : K;
    const int64_t b_rows = d->trans_b ? N : K, b_cols = d->trans_b ? K : N;
    if (K > 0 && d->lda < a_cols)
        ST_GEMM_REFUSE("lda=%lld < %lld: A is stored %lld x %lld (trans_a=%d)",
                       (long long)d->lda, (long long)a_cols, (long long)a_rows,
                       (long long)a_cols, d->trans_a);
    if (K > 0 && d->ldb < b_cols)
        ST_GEMM_REFUSE("ldb=%lld < %lld: B is stored %lld x %lld (trans_b=%d)",
                       (long long)d->ldb, (long long)b_cols, (long long)b_rows,
                       (long long)b_cols, d->trans_b);
    if (ck && d->ldc < N)
        ST_GEMM_REFUSE("ldc=%lld < N=%lld", (long long)d->ldc, (long long)N);
    if (d->ldd < N)
        ST_GEMM_REFUSE("ldd=%lld < N=%lld", (long long)d->ldd, (long long)N);

    /* ---- C and D: the same matrix exactly, or disjoint ---- */
    /* cuBLASLt takes C and D of one type (fp8 outputs aside). */
    if (ck && d->c_type != d->d_type)
        ST_GEMM_REFUSE("C is %s but D is %s: C and D must have one type",
                       type_name(d->c_type), type_name(d->d_type));
    const span sa = K > 0 ? extent(d->A, a_rows, a_cols, d->lda, d->ab_type) : span{0, 0};
    const span sb = K > 0 ? extent(d->B, b_rows, b_cols, d->ldb, d->ab_type) : span{0, 0};
    const span sc = ck ? extent(d->C, M, N, d->ldc, d->c_type) : span{0, 0};
    const span sd = extent(d->D, M, N, d->ldd, d->d_type);
    if (d->in_place) {
        if (d->D != d->C)
            ST_GEMM_REFUSE("in_place declared but D (%p) is not C (%p)", d->D, d->C);
        if (d->ldd != d->ldc)
            ST_GEMM_REFUSE("in_place declared but ldd=%lld != ldc=%lld", (long long)d->ldd,
                           (long long)d->ldc);
    } else {
        if (ck && d->D == d->C)
            ST_GEMM_REFUSE("D is C (%p) but in_place is not declared", d->D);
        if (overlap(sd, sc))
            ST_GEMM_REFUSE("D overlaps C (distinct declared: they must not share memory)");
    }
    if (overlap(sd, sa))
        ST_GEMM_REFUSE("D overlaps A");
    if (overlap(sd, sb))
        ST_GEMM_REFUSE("D overlaps B");

    /* ---- epilogue operands ---- */
    const bool wants_bias = ep == ST_CUDA_EPI_BIAS || ep == ST_CUDA_EPI_GELU_AUX_BIAS ||
                            ep == ST_CUDA_EPI_BGRADB;
    const bool wants_aux = ep == ST_CUDA_EPI_GELU_AUX_BIAS || ep == ST_CUDA_EPI_DGELU;
    /* A pointer the epilogue ignores is a caller who meant another one. */
    if (!wants_bias && d->bias)
        ST_GEMM_REFUSE("bias given but epilogue %s does not use it", epilogue_name(ep));
    if (!wants_aux && d->aux)
        ST_GEMM_REFUSE("aux given but epilogue %s does not use it", epilogue_name(ep));
    span sbias = {0, 0}, saux = {0, 0};
    if (wants_bias) {
        /* BIAS adds one value per column of our row-major D (cuBLASLt's
         * rows); BGRADB sums op(A)'s rows, one value per row of D. */
        const int64_t len = ep == ST_CUDA_EPI_BGRADB ? M : N;
        if (!d->bias)
            ST_GEMM_REFUSE("epilogue %s needs a bias vector, but bias is NULL",
                           epilogue_name(ep));
        if (d->bias_type != d->d_type)
            ST_GEMM_REFUSE("bias is %s but D is %s: cuBLASLt takes a bias of D's type",
                           type_name(d->bias_type), type_name(d->d_type));
        if (d->bias_len != len)
            ST_GEMM_REFUSE("bias_len=%lld but epilogue %s needs %s=%lld entries",
                           (long long)d->bias_len, epilogue_name(ep),
                           ep == ST_CUDA_EPI_BGRADB ? "M" : "N", (long long)len);
        sbias = extent(d->bias, 1, len, len, d->bias_type);
        if (overlap(sbias, sd))
            ST_GEMM_REFUSE("bias overlaps D");
        if (ep == ST_CUDA_EPI_BGRADB && (overlap(sbias, sa) || overlap(sbias, sb) ||
                                         overlap(sbias, sc)))
            ST_GEMM_REFUSE("the BGRADB output (bias) overlaps A, B or C");
    }
    if (wants_aux) {
        if (!d->aux)
            ST_GEMM_REFUSE("epilogue %s needs the aux matrix, but aux is NULL",
                           epilogue_name(ep));
        if (d->aux_ld < N || d->aux_ld % 8 != 0)
            ST_GEMM_REFUSE("aux_ld=%lld: must be >= N=%lld and a multiple of 8",
                           (long long)d->aux_ld, (long long)N);
        /* The combinations we rely on (bf16 in and out, or fp32 throughout,
         * aux in D's type); mixed bf16 -> fp32 GELU is not one. */
        if (d->ab_type != d->d_type)
            ST_GEMM_REFUSE("epilogue %s with %s A/B and %s D: GELU epilogues need one type",
                           epilogue_name(ep), type_name(d->ab_type), type_name(d->d_type));
        saux = extent(d->aux, M, N, d->aux_ld, d->d_type);
        if (overlap(saux, sd))
            ST_GEMM_REFUSE("aux overlaps D");
        if (ep == ST_CUDA_EPI_GELU_AUX_BIAS &&
            (overlap(saux, sa) || overlap(saux, sb) || overlap(saux, sc) ||
             overlap(saux, sbias)))
            ST_GEMM_REFUSE("the GELU_AUX_BIAS output aux overlaps A, B, C or bias");
    }

    /* ---- the 16-byte fast path ---- */
    if (fast_path) {
        struct {
            const char *name;
            int64_t ld;
            int type;
            bool used;
        } lds[] = {{"lda", d->lda, d->ab_type, K > 0},
                   {"ldb", d->ldb, d->ab_type, K > 0},
                   {"ldc", d->ldc, d->c_type, ck && !d->in_place},
                   {"ldd", d->ldd, d->d_type, true}};
        for (const auto &l : lds)
            if (l.used && (l.ld * elem_bytes(l.type)) % 16 != 0)
                ST_GEMM_REFUSE("%s=%lld: a %s row stride must be a multiple of %d elements "
                               "(16 bytes)",
                               l.name, (long long)l.ld, type_name(l.type),
                               (int)(16 / elem_bytes(l.type)));
        struct {
            const char *name;
            const void *p;
        } ptrs[] = {{"A", K > 0 ? d->A : NULL}, {"B", K > 0 ? d->B : NULL}, {"C", d->C},
                    {"D", d->D}, {"bias", d->bias}, {"aux", d->aux}};
        for (const auto &p : ptrs)
            if (p.p && (uintptr_t)p.p % 16 != 0)
                ST_GEMM_REFUSE("%s (%p) is not 16-byte aligned", p.name, p.p);
    }
#undef ST_GEMM_REFUSE
    return NULL;
}

#endif
