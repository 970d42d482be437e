/* Fused causal attention kernels (forward and backward) for the CUDA
 * backend; API and layout in attention.h, the numerical reference is
 * st_attention_forward / st_attention_backward in src/kernels/cpu_ops.c.
 *
 * bf16 storage goes to the tensor-core kernels of attention_tc.cu whenever
 * every pointer is 16-byte aligned and every row stride a multiple of 8
 * elements (always so in training: cudaMalloc'd buffers, widths that are
 * multiples of the head dim); the CUDA-core kernels below remain the fp32
 * path and the bf16 fallback for other layouts.  The backward's D pass
 * (rowdot) serves both.
 *
 * The CUDA-core kernels favour indexing that can be checked by reading over
 * speed: tiles of Q, K, V, dO are staged in shared memory as fp32, every
 * product and reduction is plain fp32 on the CUDA cores (no tensor cores),
 * and one lane of a warp owns one key (forward, dQ) or one query (dK/dV)
 * of the current tile, so a score is one lane's private dot product and a
 * softmax reduction is a handful of warp shuffles.
 *
 * Backward = three launches, none with atomics, so it is deterministic
 * (bit-identical from run to run on the same GPU):
 *   1. D[b,h,t] = rowsum(dO * O)                    (one warp per row)
 *   2. dK, dV: one block per (batch, kv head, key tile); it loops over the
 *      query heads of its group and the query tiles at or after the
 *      diagonal, so each dK/dV element is summed by one thread in the same
 *      (head, query) order as the CPU reference.
 *   3. dQ: one block per (batch, head, query tile), looping over the key
 *      tiles up to the diagonal, again one thread per element.
 * Splitting dQ into its own pass recomputes the scores once more (about
 * 1.5x the backward arithmetic of the atomic-add variant) but needs no
 * fp32 dQ scratch, no zeroing pass and no atomics, and stays deterministic.
 *
 * Causal masking: query row t sees keys j <= t.  Every query row sees key
 * 0, and key tiles are visited from 0 upwards, so the running max of the
 * online softmax is finite after the first tile and exp(-inf - m) = 0
 * masks the rest without NaN. */
#include "attention.h"

#include <cuda_bf16.h>
#include <type_traits>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>

#include "attention_tc.h"

namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 4;                 /* warps per block */
constexpr int kThreads = kWarp * kWarps;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kStaticSmemLimit = 48 * 1024; /* no cudaFuncSetAttribute needed */

/* Storage <-> fp32: every kernel converts on load and rounds on store, so
 * the arithmetic is the same code for both storage modes. */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float *p, float x) { *p = x; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_max(float x)
{
    for (int off = kWarp / 2; off > 0; off /= 2)
        x = fmaxf(x, __shfl_xor_sync(kFullMask, x, off));
    return x;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int off = kWarp / 2; off > 0; off /= 2)
        x += __shfl_xor_sync(kFullMask, x, off);
    return x;
}

/* Stage `rows` rows of one head (columns col0 .. col0+HD-1) starting at
 * global row `row0` into shared memory as fp32 with row stride `srow`.
 * Rows at or past `valid` lie beyond T and are zero-filled, so the padded
 * rows of a tail tile hold finite values and are never read from global
 * memory.  Consecutive threads take consecutive columns: coalesced. */
template <int HD, typename S>
__device__ void stage_tile(float *dst, int srow, int rows, int valid,
                           const S *src, int64_t ld, int64_t row0, int64_t col0)
{
    for (int i = threadIdx.x; i < rows * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        dst[r * srow + d] = r < valid ? to_f32(src[(row0 + r) * ld + col0 + d]) : 0.0f;
    }
}

/* Sequential fp32 dot product of two shared-memory rows (same order as the
 * CPU's dotf, which keeps the fp32 comparison tight). */
template <int HD>
__device__ __forceinline__ float dot_row(const float *a, const float *b)
{
    float s = 0.0f;
#pragma unroll 16
    for (int d = 0; d < HD; d++)
        s += a[d] * b[d];
    return s;
}

/* ---- forward ---------------------------------------------------------------
 * Block = (query tile of kBQ rows, head h, batch b); warp w owns rows
 * w*ROWS .. w*ROWS+ROWS-1 of the tile; for each key tile of 32 keys lane l
 * scores key k0+l, and lane l accumulates output dims l, l+32, ...
 * K is stored with stride HD+1 so the 32 lanes reading 32 different key
 * rows at the same column hit 32 different banks. */
template <int HD, typename S>
__global__ void __launch_bounds__(kThreads)
attn_fwd_kernel(S *out, int64_t ldo, float *lse,
                const S *q, int64_t ldq, const S *k, int64_t ldk, const S *v, int64_t ldv,
                int T, int H, int group, float scale)
{
    constexpr int ROWS = 4, BQ = ROWS * kWarps, BK = kWarp;
    constexpr int DPL = HD / kWarp; /* output dims per lane */
    constexpr int KSTRIDE = HD + 1;
    __shared__ float qs[BQ * HD];
    __shared__ float ks[BK * KSTRIDE];
    __shared__ float vs[BK * HD];
    static_assert(sizeof(qs) + sizeof(ks) + sizeof(vs) <= kStaticSmemLimit, "smem");

    const int b = blockIdx.z, h = blockIdx.y, g = h / group;
    const int q0 = blockIdx.x * BQ;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t base = (int64_t)b * T; /* global row of (b, t = 0) */
    const int q_last = min(q0 + BQ, T) - 1; /* last real query row here */

    stage_tile<HD>(qs, HD, BQ, T - q0, q, ldq, base + q0, (int64_t)h * HD);

    float m[ROWS], l[ROWS], o[ROWS][DPL];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; c++)
            o[r][c] = 0.0f;
    }

    for (int k0 = 0; k0 <= q_last; k0 += BK) {
        __syncthreads(); /* everyone is done with the previous K/V tile */
        stage_tile<HD>(ks, KSTRIDE, BK, T - k0, k, ldk, base + k0, (int64_t)g * HD);
        stage_tile<HD>(vs, HD, BK, T - k0, v, ldv, base + k0, (int64_t)g * HD);
        __syncthreads();
        const int j = k0 + lane;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int t = q0 + warp * ROWS + r; /* may be >= T: computed, never stored */
            float s = dot_row<HD>(qs + (warp * ROWS + r) * HD, ks + lane * KSTRIDE) * scale;
            if (j > t)
                s = -INFINITY;
            const float m_new = fmaxf(m[r], warp_max(s)); /* finite: see top */
            const float p = expf(s - m_new);
            const float alpha = expf(m[r] - m_new); /* 0 on the first tile */
            l[r] = l[r] * alpha + warp_sum(p);
            m[r] = m_new;
#pragma unroll
            for (int c = 0; c < DPL; c++)
                o[r][c] *= alpha;
            for (int jj = 0; jj < BK; jj++) {
                const float pj = __shfl_sync(kFullMask, p, jj);
#pragma unroll
                for (int c = 0; c < DPL; c++)
                    o[r][c] += pj * vs[jj * HD + lane + c * kWarp];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int t = q0 + warp * ROWS + r;
        if (t >= T)
            continue;
        const float inv = 1.0f / l[r];
        S *orow = out + (base + t) * ldo + (int64_t)h * HD;
#pragma unroll
        for (int c = 0; c < DPL; c++)
            store(orow + lane + c * kWarp, o[r][c] * inv);
        if (lane == 0)
            lse[((int64_t)b * H + h) * T + t] = m[r] + logf(l[r]);
    }
}

/* ---- backward 1: D = rowsum(dO * O), laid out like lse [B, H, T] ---------- */
template <int HD, typename S>
__global__ void __launch_bounds__(kThreads)
attn_bwd_rowdot_kernel(float *D, const S *dout, int64_t lddo, const S *out, int64_t ldo,
                       int T, int H, int64_t n_rows)
{
    const int64_t row = (int64_t)blockIdx.x * kWarps + threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (row >= n_rows) /* whole warp leaves together: shuffles stay full */
        return;
    const int64_t t = row % T, bh = row / T;
    const int64_t h = bh % H, b = bh / H;
    const S *dorow = dout + (b * T + t) * lddo + h * HD;
    const S *orow = out + (b * T + t) * ldo + h * HD;
    float s = 0.0f;
    for (int d = lane; d < HD; d += kWarp)
        s += to_f32(dorow[d]) * to_f32(orow[d]);
    s = warp_sum(s);
    if (lane == 0)
        D[row] = s;
}

/* ---- backward 2: dK, dV ----------------------------------------------------
 * Block = (key tile of BK keys, kv head g, batch b); warp w owns keys
 * w*KEYS .. w*KEYS+KEYS-1; per query tile of 32 rows lane l handles query
 * row qt0+l (its p and dS), then the warp sums over the 32 queries with
 * shuffles while lane l accumulates dims l, l+32, ... of dK and dV.
 * Q and dO are stored with stride HD+1 (lane l reads row l). */
template <int HD, typename S>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dkdv_kernel(S *dk, int64_t lddk, S *dv, int64_t lddv,
                     const S *dout, int64_t lddo, const float *lse, const float *D,
                     const S *q, int64_t ldq, const S *k, int64_t ldk, const S *v, int64_t ldv,
                     int T, int H, int group, float scale)
{
    constexpr int KEYS = HD <= 64 ? 4 : 2, BK = KEYS * kWarps, BQ = kWarp;
    constexpr int DPL = HD / kWarp;
    constexpr int QSTRIDE = HD + 1;
    __shared__ float qs[BQ * QSTRIDE];
    __shared__ float dos[BQ * QSTRIDE];
    __shared__ float ks[BK * HD];
    __shared__ float vs[BK * HD];
    __shared__ float lse_s[BQ], drow_s[BQ];
    static_assert(sizeof(qs) + sizeof(dos) + sizeof(ks) + sizeof(vs) + sizeof(lse_s) +
                  sizeof(drow_s) <= kStaticSmemLimit, "smem");

    const int b = blockIdx.z, g = blockIdx.y;
    const int k0 = blockIdx.x * BK;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t base = (int64_t)b * T;

    stage_tile<HD>(ks, HD, BK, T - k0, k, ldk, base + k0, (int64_t)g * HD);
    stage_tile<HD>(vs, HD, BK, T - k0, v, ldv, base + k0, (int64_t)g * HD);

    float dk_acc[KEYS][DPL], dv_acc[KEYS][DPL];
#pragma unroll
    for (int kk = 0; kk < KEYS; kk++)
#pragma unroll
        for (int c = 0; c < DPL; c++)
            dk_acc[kk][c] = dv_acc[kk][c] = 0.0f;

    /* Query tiles are aligned to multiples of BQ; the first one that holds
     * a row >= k0 starts at the multiple of BQ at or below k0. */
    const int qt_first = (k0 / BQ) * BQ;
    for (int h = g * group; h < (g + 1) * group; h++) {
        const int64_t lse_base = ((int64_t)b * H + h) * T;
        for (int qt0 = qt_first; qt0 < T; qt0 += BQ) {
            __syncthreads(); /* previous Q/dO tile no longer read (and K/V staged) */
            stage_tile<HD>(qs, QSTRIDE, BQ, T - qt0, q, ldq, base + qt0, (int64_t)h * HD);
            stage_tile<HD>(dos, QSTRIDE, BQ, T - qt0, dout, lddo, base + qt0, (int64_t)h * HD);
            if (threadIdx.x < BQ) {
                const int t = qt0 + threadIdx.x;
                lse_s[threadIdx.x] = t < T ? lse[lse_base + t] : 0.0f;
                drow_s[threadIdx.x] = t < T ? D[lse_base + t] : 0.0f;
            }
            __syncthreads();
            const int i = qt0 + lane; /* this lane's query row */
#pragma unroll
            for (int kk = 0; kk < KEYS; kk++) {
                const int j = k0 + warp * KEYS + kk; /* j >= T only if i >= T too */
                const float *krow = ks + (warp * KEYS + kk) * HD;
                const float *vrow = vs + (warp * KEYS + kk) * HD;
                const float s = dot_row<HD>(qs + lane * QSTRIDE, krow);
                const float dp = dot_row<HD>(dos + lane * QSTRIDE, vrow);
                const float p = (i >= j && i < T) ? expf(s * scale - lse_s[lane]) : 0.0f;
                const float dsc = p * (dp - drow_s[lane]) * scale;
                for (int ii = 0; ii < BQ; ii++) {
                    const float pi = __shfl_sync(kFullMask, p, ii);
                    const float dsi = __shfl_sync(kFullMask, dsc, ii);
#pragma unroll
                    for (int c = 0; c < DPL; c++) {
                        dv_acc[kk][c] += pi * dos[ii * QSTRIDE + lane + c * kWarp];
                        dk_acc[kk][c] += dsi * qs[ii * QSTRIDE + lane + c * kWarp];
                    }
                }
            }
        }
    }

#pragma unroll
    for (int kk = 0; kk < KEYS; kk++) {
        const int j = k0 + warp * KEYS + kk;
        if (j >= T)
            continue;
        S *dkrow = dk + (base + j) * lddk + (int64_t)g * HD;
        S *dvrow = dv + (base + j) * lddv + (int64_t)g * HD;
#pragma unroll
        for (int c = 0; c < DPL; c++) {
            store(dkrow + lane + c * kWarp, dk_acc[kk][c]);
            store(dvrow + lane + c * kWarp, dv_acc[kk][c]);
        }
    }
}

/* ---- backward 3: dQ --------------------------------------------------------
 * Same shape as the forward: block = (query tile, head, batch), warp w
 * owns ROWS query rows, lane l scores key k0+l and accumulates dQ dims
 * l, l+32, ...  K and V are both read by key row per lane (padded). */
template <int HD, typename S>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dq_kernel(S *dq, int64_t lddq, const S *dout, int64_t lddo,
                   const float *lse, const float *D,
                   const S *q, int64_t ldq, const S *k, int64_t ldk, const S *v, int64_t ldv,
                   int T, int H, int group, float scale)
{
    constexpr int ROWS = HD <= 64 ? 4 : 2, BQ = ROWS * kWarps, BK = kWarp;
    constexpr int DPL = HD / kWarp;
    constexpr int KSTRIDE = HD + 1;
    __shared__ float qs[BQ * HD];
    __shared__ float dos[BQ * HD];
    __shared__ float ks[BK * KSTRIDE];
    __shared__ float vs[BK * KSTRIDE];
    static_assert(sizeof(qs) + sizeof(dos) + sizeof(ks) + sizeof(vs) <= kStaticSmemLimit, "smem");

    const int b = blockIdx.z, h = blockIdx.y, g = h / group;
    const int q0 = blockIdx.x * BQ;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t base = (int64_t)b * T;
    const int64_t lse_base = ((int64_t)b * H + h) * T;
    const int q_last = min(q0 + BQ, T) - 1;

    stage_tile<HD>(qs, HD, BQ, T - q0, q, ldq, base + q0, (int64_t)h * HD);
    stage_tile<HD>(dos, HD, BQ, T - q0, dout, lddo, base + q0, (int64_t)h * HD);

    float row_l[ROWS], row_d[ROWS], acc[ROWS][DPL];
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int t = q0 + warp * ROWS + r;
        row_l[r] = t < T ? lse[lse_base + t] : 0.0f;
        row_d[r] = t < T ? D[lse_base + t] : 0.0f;
#pragma unroll
        for (int c = 0; c < DPL; c++)
            acc[r][c] = 0.0f;
    }

    for (int k0 = 0; k0 <= q_last; k0 += BK) {
        __syncthreads();
        stage_tile<HD>(ks, KSTRIDE, BK, T - k0, k, ldk, base + k0, (int64_t)g * HD);
        stage_tile<HD>(vs, KSTRIDE, BK, T - k0, v, ldv, base + k0, (int64_t)g * HD);
        __syncthreads();
        const int j = k0 + lane;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int t = q0 + warp * ROWS + r;
            const float s = dot_row<HD>(qs + (warp * ROWS + r) * HD, ks + lane * KSTRIDE);
            const float dp = dot_row<HD>(dos + (warp * ROWS + r) * HD, vs + lane * KSTRIDE);
            const float p = (j <= t && t < T) ? expf(s * scale - row_l[r]) : 0.0f;
            const float dsc = p * (dp - row_d[r]) * scale;
            for (int jj = 0; jj < BK; jj++) {
                const float dsj = __shfl_sync(kFullMask, dsc, jj);
#pragma unroll
                for (int c = 0; c < DPL; c++)
                    acc[r][c] += dsj * ks[jj * KSTRIDE + lane + c * kWarp];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int t = q0 + warp * ROWS + r;
        if (t >= T)
            continue;
        S *dqrow = dq + (base + t) * lddq + (int64_t)h * HD;
#pragma unroll
        for (int c = 0; c < DPL; c++)
            store(dqrow + lane + c * kWarp, acc[r][c]);
    }
}

/* Query-tile heights, mirrored from the kernels for the grid sizes. */
constexpr int fwd_bq(int) { return 4 * kWarps; }
constexpr int dq_bq(int hd) { return (hd <= 64 ? 4 : 2) * kWarps; }
constexpr int dkdv_bk(int hd) { return (hd <= 64 ? 4 : 2) * kWarps; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Everything the kernels assume: grid y/z limits, int-sized T, strides that
 * cover a row, and a supported head dim. */
bool args_ok(int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
             int64_t ld_h, int64_t ld_h2, int64_t ld_kv, int64_t ld_kv2)
{
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || (hd != 64 && hd != 128))
        return false;
    if (H % KV != 0 || B > 65535 || H > 65535 || T > INT_MAX / 2)
        return false;
    return ld_h >= H * hd && ld_h2 >= H * hd && ld_kv >= KV * hd && ld_kv2 >= KV * hd;
}

int launch_status(void)
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : (int)e;
}

template <int HD, typename S>
int forward_hd(S *out, int64_t ldo, float *lse, const S *q, int64_t ldq,
               const S *k, int64_t ldk, const S *v, int64_t ldv,
               int64_t B, int64_t T, int64_t H, int64_t KV, cudaStream_t stream)
{
    const dim3 grid((unsigned)ceil_div(T, fwd_bq(HD)), (unsigned)H, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)HD);
    attn_fwd_kernel<HD, S><<<grid, kThreads, 0, stream>>>(
        out, ldo, lse, q, ldq, k, ldk, v, ldv, (int)T, (int)H, (int)(H / KV), scale);
    return launch_status();
}

template <typename S>
int forward_any(S *out, int64_t ldo, float *lse, const S *q, int64_t ldq,
                const S *k, int64_t ldk, const S *v, int64_t ldv,
                int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, cudaStream_t stream)
{
    if (!args_ok(B, T, H, KV, hd, ldq, ldo, ldk, ldv) || !out || !lse || !q || !k || !v)
        return ST_CUDA_ATTN_EINVAL;
    if constexpr (std::is_same<S, __nv_bfloat16>::value) {
        const void *ptr[] = {out, q, k, v};
        const int64_t ld[] = {ldo, ldq, ldk, ldv};
        if (st_cuda::attn_tc_layout_ok(ptr, 4, ld, 4))
            return st_cuda::attn_tc_forward(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV,
                                            hd, stream);
    }
    if (hd == 64)
        return forward_hd<64>(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV, stream);
    return forward_hd<128>(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV, stream);
}

template <int HD, typename S>
int backward_hd(S *dq, int64_t lddq, S *dk, int64_t lddk, S *dv, int64_t lddv,
                const S *dout, int64_t lddo, const S *out, int64_t ldo, const float *lse,
                const S *q, int64_t ldq, const S *k, int64_t ldk, const S *v, int64_t ldv,
                int64_t B, int64_t T, int64_t H, int64_t KV, float *D, cudaStream_t stream)
{
    const float scale = 1.0f / sqrtf((float)HD);
    const int group = (int)(H / KV);
    const int64_t n_rows = B * H * T;
    attn_bwd_rowdot_kernel<HD, S><<<(unsigned)ceil_div(n_rows, kWarps), kThreads, 0, stream>>>(
        D, dout, lddo, out, ldo, (int)T, (int)H, n_rows);
    int rc = launch_status();
    if (rc)
        return rc;
    if constexpr (std::is_same<S, __nv_bfloat16>::value) {
        const void *ptr[] = {dq, dk, dv, dout, q, k, v};
        const int64_t ld[] = {lddq, lddk, lddv, lddo, ldq, ldk, ldv};
        if (st_cuda::attn_tc_layout_ok(ptr, 7, ld, 7))
            return st_cuda::attn_tc_backward(dq, lddq, dk, lddk, dv, lddv, dout, lddo, lse, D,
                                             q, ldq, k, ldk, v, ldv, B, T, H, KV, HD, stream);
    }
    const dim3 grid_kv((unsigned)ceil_div(T, dkdv_bk(HD)), (unsigned)KV, (unsigned)B);
    attn_bwd_dkdv_kernel<HD, S><<<grid_kv, kThreads, 0, stream>>>(
        dk, lddk, dv, lddv, dout, lddo, lse, D, q, ldq, k, ldk, v, ldv,
        (int)T, (int)H, group, scale);
    if ((rc = launch_status()))
        return rc;
    const dim3 grid_q((unsigned)ceil_div(T, dq_bq(HD)), (unsigned)H, (unsigned)B);
    attn_bwd_dq_kernel<HD, S><<<grid_q, kThreads, 0, stream>>>(
        dq, lddq, dout, lddo, lse, D, q, ldq, k, ldk, v, ldv, (int)T, (int)H, group, scale);
    return launch_status();
}

template <typename S>
int backward_any(S *dq, int64_t lddq, S *dk, int64_t lddk, S *dv, int64_t lddv,
                 const S *dout, int64_t lddo, const S *out, int64_t ldo, const float *lse,
                 const S *q, int64_t ldq, const S *k, int64_t ldk, const S *v, int64_t ldv,
                 int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, void *workspace,
                 cudaStream_t stream)
{
    if (!args_ok(B, T, H, KV, hd, ldq, lddq, ldk, ldv) || lddo < H * hd || ldo < H * hd ||
        lddk < KV * hd || lddv < KV * hd)
        return ST_CUDA_ATTN_EINVAL;
    if (!dq || !dk || !dv || !dout || !out || !lse || !q || !k || !v || !workspace)
        return ST_CUDA_ATTN_EINVAL;
    float *D = static_cast<float *>(workspace);
    if (hd == 64)
        return backward_hd<64>(dq, lddq, dk, lddk, dv, lddv, dout, lddo, out, ldo, lse,
                               q, ldq, k, ldk, v, ldv, B, T, H, KV, D, stream);
    return backward_hd<128>(dq, lddq, dk, lddk, dv, lddv, dout, lddo, out, ldo, lse,
                            q, ldq, k, ldk, v, ldv, B, T, H, KV, D, stream);
}

const __nv_bfloat16 *as_bf16(const uint16_t *p) { return reinterpret_cast<const __nv_bfloat16 *>(p); }
__nv_bfloat16 *as_bf16(uint16_t *p) { return reinterpret_cast<__nv_bfloat16 *>(p); }

} /* namespace */

extern "C" int st_cuda_attention_forward_f32(float *out, int64_t ldo, float *lse,
                                             const float *q, int64_t ldq,
                                             const float *k, int64_t ldk,
                                             const float *v, int64_t ldv,
                                             int64_t B, int64_t T, int64_t H, int64_t KV,
                                             int64_t hd, cudaStream_t stream)
{
    return forward_any(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV, hd, stream);
}

extern "C" int st_cuda_attention_forward_bf16(uint16_t *out, int64_t ldo, float *lse,
                                              const uint16_t *q, int64_t ldq,
                                              const uint16_t *k, int64_t ldk,
                                              const uint16_t *v, int64_t ldv,
                                              int64_t B, int64_t T, int64_t H, int64_t KV,
                                              int64_t hd, cudaStream_t stream)
{
    return forward_any(as_bf16(out), ldo, lse, as_bf16(q), ldq, as_bf16(k), ldk,
                       as_bf16(v), ldv, B, T, H, KV, hd, stream);
}

extern "C" size_t st_cuda_attention_backward_workspace_bytes(int64_t B, int64_t H, int64_t T)
{
    if (B <= 0 || H <= 0 || T <= 0)
        return 0;
    return sizeof(float) * (size_t)B * (size_t)H * (size_t)T;
}

extern "C" int st_cuda_attention_backward_f32(float *dq, int64_t lddq, float *dk, int64_t lddk,
                                              float *dv, int64_t lddv,
                                              const float *dout, int64_t lddo,
                                              const float *out, int64_t ldo, const float *lse,
                                              const float *q, int64_t ldq,
                                              const float *k, int64_t ldk,
                                              const float *v, int64_t ldv,
                                              int64_t B, int64_t T, int64_t H, int64_t KV,
                                              int64_t hd, void *workspace, cudaStream_t stream)
{
    return backward_any(dq, lddq, dk, lddk, dv, lddv, dout, lddo, out, ldo, lse,
                        q, ldq, k, ldk, v, ldv, B, T, H, KV, hd, workspace, stream);
}

extern "C" int st_cuda_attention_backward_bf16(uint16_t *dq, int64_t lddq,
                                               uint16_t *dk, int64_t lddk,
                                               uint16_t *dv, int64_t lddv,
                                               const uint16_t *dout, int64_t lddo,
                                               const uint16_t *out, int64_t ldo,
                                               const float *lse,
                                               const uint16_t *q, int64_t ldq,
                                               const uint16_t *k, int64_t ldk,
                                               const uint16_t *v, int64_t ldv,
                                               int64_t B, int64_t T, int64_t H, int64_t KV,
                                               int64_t hd, void *workspace, cudaStream_t stream)
{
    return backward_any(as_bf16(dq), lddq, as_bf16(dk), lddk, as_bf16(dv), lddv,
                        as_bf16(dout), lddo, as_bf16(out), ldo, lse,
                        as_bf16(q), ldq, as_bf16(k), ldk, as_bf16(v), ldv,
                        B, T, H, KV, hd, workspace, stream);
}
