/* Causal attention on the tensor cores, bf16 storage, in the manner of
 * FlashAttention-2: the bf16 path of attention.h (attention.cu dispatches
 * here when the layout is 16-byte aligned).  The CPU reference is
 * st_attention_forward / st_attention_backward in src/kernels/cpu_ops.c.
 *
 * Every product is mma.sync m16n8k16 (bf16 in, fp32 accumulate) on
 * fragments loaded with ldmatrix from shared memory; K/V (forward, dQ) and
 * Q/dO (dK/dV) tiles arrive by cp.async into two buffers, so the next
 * tile's copy overlaps the current tile's arithmetic.  A block is four
 * warps; each warp owns 16 rows of the block's tile (query rows, or key
 * rows for dK/dV), so a score row never leaves its warp's registers: the
 * online softmax reduces over the 4 lanes of a quad with two shuffles,
 * and the probabilities are repacked from the accumulator layout straight
 * into the A fragment of the next product (the C layout of two adjacent
 * n8 tiles is the A layout of one k16 step).  The T x T matrix is never
 * stored.
 *
 * Shared tiles are row-major with HD bf16 per row and an XOR swizzle:
 * 16-byte chunk c of row r sits at chunk c ^ (r & 7), so the eight row
 * addresses of one ldmatrix phase (same column, eight rows) fall in eight
 * different bank groups.  HD is 64 or 128 (8 or 16 chunks per row), so the
 * swizzle stays inside the row.
 *
 * Causal masking: query t sees keys j <= t.  Key tiles past a block's last
 * query are never loaded; a warp skips the arithmetic of a tile in which
 * none of its rows sees a key (the block still shares the tile's loads and
 * barriers); the mask is evaluated only on tiles that cross the diagonal
 * or the end of the sequence.  Key 0 is visible to every row, so the
 * running max is finite after the first tile and exp2(-inf - m) = 0.
 *
 * The softmax works in base 2 (scores pre-multiplied by log2(e)/sqrt(hd),
 * exp2f on the special-function unit); the saved log-sum-exp is converted
 * back to natural log, the unit of the CPU reference and of attention.h.
 *
 * Backward: deterministic, with no atomics.  Two kernels recompute the
 * probabilities from the saved log-sum-exp: dK/dV (a block per key tile of
 * a kv head, looping over the query heads of its group and the query tiles
 * at or after the diagonal, in a fixed order) and dQ (a block per query
 * tile, looping over the key tiles up to the diagonal).  Compared with
 * FlashAttention-2's single pass with floating-point atomics on dQ, this
 * spends 7 instead of 5 matrix products per score tile, for bit-identical
 * results from run to run.  D = rowsum(dO * O) comes from attention.cu.
 *
 * NOTHING HERE HAS RUN ON A GPU YET: it runs under the exact emulation of
 * tests/gpu/emu/tensor_core.h (tests/cuda_attention_emu.sh). */
#include "attention_tc.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "tensor_core.cuh"

namespace st_cuda {
namespace {

typedef __nv_bfloat16 bf16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 16;             /* the M of m16n8k16 */
constexpr int kBlockRows = kWarps * kRowsPerWarp;
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

/* Element (r, c) of a swizzled row-major tile of HD columns. */
template <int HD> __device__ __forceinline__ int swz(int r, int c)
{
    return r * HD + (((c >> 3) ^ (r & 7)) << 3) + (c & 7);
}

/* Queue the copy of ROWS rows of one head (HD bf16 each) starting at global
 * row row0 into a swizzled tile; rows at or past `valid` are zero-filled
 * (src-size 0, reading nothing; the address given is the tile's first row,
 * which exists).  Consecutive threads take consecutive 16-byte chunks of a
 * row, so the global reads coalesce. */
template <int HD, int ROWS>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, int64_t ld, int64_t row0,
                                          int valid)
{
    constexpr int kChunks = HD / 8;
    for (int i = threadIdx.x; i < ROWS * kChunks; i += kThreads) {
        const int r = i / kChunks, c = (i % kChunks) * 8;
        const bool in = r < valid;
        st_cp_async_16(dst + swz<HD>(r, c), src + (row0 + (in ? r : 0)) * ld + c, in ? 16 : 0);
    }
}

/* A fragment of rows r0..r0+15, columns c0..c0+15 of a tile. */
template <int HD>
__device__ __forceinline__ void ldsm_a(uint32_t *a, const bf16 *tile, int r0, int c0)
{
    const int lane = threadIdx.x & 31;
    st_ldmatrix_x4(a, tile + swz<HD>(r0 + (lane & 15), c0 + (lane >> 4) * 8));
}

/* B fragments of two n8 tiles where B = tile^T: tile rows n0..n0+15 are
 * the n index, columns c0..c0+15 the k index (K for Q K^T, V for dO V^T).
 * b[0..1]: n-tile n0, b[2..3]: n-tile n0 + 8. */
template <int HD>
__device__ __forceinline__ void ldsm_b_nk(uint32_t *b, const bf16 *tile, int n0, int c0)
{
    const int lane = threadIdx.x & 31;
    st_ldmatrix_x4(b, tile + swz<HD>(n0 + (lane & 7) + ((lane >> 4) << 3),
                                     c0 + ((lane >> 3) & 1) * 8));
}

/* B fragments of two n8 tiles where B = tile: rows k0..k0+15 are the k
 * index, columns n0..n0+15 the n index (V for P V, dO for P^T dO, Q for
 * dS^T Q, K for dS K): the transposing ldmatrix. */
template <int HD>
__device__ __forceinline__ void ldsm_b_kn(uint32_t *b, const bf16 *tile, int k0, int n0)
{
    const int lane = threadIdx.x & 31;
    st_ldmatrix_x4_trans(b, tile + swz<HD>(k0 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                           n0 + (lane >> 4) * 8));
}

__device__ __forceinline__ void mma(float *acc, const uint32_t *a, const uint32_t *b)
{
    st_mma_bf16_16816(acc, a, b, acc);
}

/* The accumulators of n8 tiles 2s and 2s+1 (16 rows x 16 columns) as the
 * A fragment of k16 step s, rounded to bf16. */
__device__ __forceinline__ void acc_to_a(uint32_t *a, const float (*acc)[4], int s)
{
    a[0] = pack_bf16x2(acc[2 * s][0], acc[2 * s][1]);
    a[1] = pack_bf16x2(acc[2 * s][2], acc[2 * s][3]);
    a[2] = pack_bf16x2(acc[2 * s + 1][0], acc[2 * s + 1][1]);
    a[3] = pack_bf16x2(acc[2 * s + 1][2], acc[2 * s + 1][3]);
}

/* Store a warp's 16 x HD accumulator rows (times `mul`) to global memory,
 * rows at or past `limit` skipped; two bf16 per lane and store. */
template <int HD>
__device__ __forceinline__ void store_rows(bf16 *dst, int64_t ld, int row0, int limit,
                                           const float (*acc)[4], float mul)
{
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = row0 + gid + 8 * half;
        if (r >= limit)
            continue;
        uint32_t *row = reinterpret_cast<uint32_t *>(dst + (int64_t)r * ld + 2 * tig);
#pragma unroll
        for (int dt = 0; dt < HD / 8; dt++)
            row[dt * 4] = pack_bf16x2(acc[dt][2 * half] * mul, acc[dt][2 * half + 1] * mul);
    }
}

template <int N> __device__ __forceinline__ void zero_acc(float (*acc)[4])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
}

/* Before using the current tile: wait for its copies (the next tile's
 * group may stay in flight when it was issued after it), then a barrier
 * makes every thread's copies visible to all. */
__device__ __forceinline__ void await_tile(bool next_in_flight)
{
    if (next_in_flight)
        st_cp_async_wait<1>();
    else
        st_cp_async_wait<0>();
    __syncthreads();
}

/* The backward's paired products for one warp: x = Ax Bx^T and
 * y = Ay By^T, where the A tiles give the warp's 16 rows from a_row0 and
 * the B tiles NT*8 rows, both over HD columns (S and dP in the dQ kernel,
 * S^T and dP^T in the dK/dV kernel). */
template <int HD, int NT>
__device__ __forceinline__ void paired_products(float (*x)[4], float (*y)[4], const bf16 *ax,
                                                const bf16 *ay, int a_row0, const bf16 *bx,
                                                const bf16 *by)
{
    zero_acc<NT>(x);
    zero_acc<NT>(y);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t xa[4], ya[4];
        ldsm_a<HD>(xa, ax, a_row0, kk * 16);
        ldsm_a<HD>(ya, ay, a_row0, kk * 16);
#pragma unroll
        for (int n2 = 0; n2 < NT / 2; n2++) {
            uint32_t xb[4], yb[4];
            ldsm_b_nk<HD>(xb, bx, n2 * 16, kk * 16);
            ldsm_b_nk<HD>(yb, by, n2 * 16, kk * 16);
            mma(x[2 * n2], xa, xb);
            mma(x[2 * n2 + 1], xa, xb + 2);
            mma(y[2 * n2], ya, yb);
            mma(y[2 * n2 + 1], ya, yb + 2);
        }
    }
}

/* acc (the warp's 16 x HD accumulators) += P B: P is the warp's 16 x NT*8
 * score-shaped tile in registers (rounded to bf16 as the A fragments), B
 * rows 0 .. NT*8-1 of a [k][n] tile (V for P V, K for dS K, dO for
 * P^T dO, Q for dS^T Q). */
template <int HD, int NT>
__device__ __forceinline__ void accumulate_product(float (*acc)[4], const float (*p)[4],
                                                   const bf16 *b_tile)
{
#pragma unroll
    for (int ks2 = 0; ks2 < NT / 2; ks2++) {
        uint32_t pa[4];
        acc_to_a(pa, p, ks2);
#pragma unroll
        for (int d2 = 0; d2 < HD / 16; d2++) {
            uint32_t b[4];
            ldsm_b_kn<HD>(b, b_tile, ks2 * 16, d2 * 16);
            mma(acc[2 * d2], pa, b);
            mma(acc[2 * d2 + 1], pa, b + 2);
        }
    }
}

/* ---- shapes ----------------------------------------------------------------
 * Dynamic shared memory: forward Q + 2 x (K, V); dQ Q, dO + 2 x (K, V);
 * dK/dV K, V + 2 x (Q, dO).  dK/dV at HD 128 takes 16 query rows per tile:
 * its dK and dV accumulators alone are 128 floats per lane, and with 32
 * query rows ptxas spilled (24 bytes) at the 255-register limit. */
__host__ __device__ constexpr int fwd_bk(int) { return 64; }
__host__ __device__ constexpr int dq_bk(int) { return 64; }
__host__ __device__ constexpr int dkdv_bq(int hd) { return hd == 64 ? 64 : 16; }
constexpr size_t tile_bytes(int rows, int hd) { return sizeof(bf16) * (size_t)rows * hd; }
constexpr size_t fwd_smem(int hd) { return tile_bytes(kBlockRows + 4 * fwd_bk(hd), hd); }
constexpr size_t dq_smem(int hd) { return tile_bytes(2 * kBlockRows + 4 * dq_bk(hd), hd); }
constexpr size_t dkdv_smem(int hd) { return tile_bytes(2 * kBlockRows + 4 * dkdv_bq(hd), hd); }

/* ---- forward ---------------------------------------------------------------
 * Block = (query tile of 64 rows, head h, batch b), blocks with the longest
 * rows first.  Warp w owns query rows q0 + 16w .. q0 + 16w + 15; its Q
 * fragments stay in registers for the whole key loop. */
template <int HD>
__global__ void __launch_bounds__(kThreads)
attn_fwd_tc_kernel(bf16 *out, int64_t ldo, float *lse, const bf16 *q, int64_t ldq,
                   const bf16 *k, int64_t ldk, const bf16 *v, int64_t ldv,
                   int T, int H, int group, float scale_log2)
{
    constexpr int BQ = kBlockRows, BK = fwd_bk(HD), NT = BK / 8, DT = HD / 8, KS = HD / 16;
    ST_DYNAMIC_SMEM(smem);
    bf16 *qs = reinterpret_cast<bf16 *>(smem);
    bf16 *ks = qs + BQ * HD; /* two buffers of BK x HD each */
    bf16 *vs = ks + 2 * BK * HD;

    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BQ;
    const int h = blockIdx.y, b = blockIdx.z, g = h / group;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int wq0 = q0 + warp * kRowsPerWarp;
    const int64_t base = (int64_t)b * T;
    const int n_tiles = (min(q0 + BQ, T) - 1) / BK + 1;
    const bf16 *kh = k + (int64_t)g * HD, *vh = v + (int64_t)g * HD;

    load_tile<HD, BQ>(qs, q + (int64_t)h * HD, ldq, base + q0, T - q0);
    load_tile<HD, BK>(ks, kh, ldk, base, T);
    load_tile<HD, BK>(vs, vh, ldv, base, T);
    st_cp_async_commit();

    float o[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    zero_acc<DT>(o);
    uint32_t qf[KS][4];

    for (int j = 0; j < n_tiles; j++) {
        const int k0 = j * BK;
        if (j + 1 < n_tiles) {
            const int buf = (j + 1) & 1;
            load_tile<HD, BK>(ks + buf * BK * HD, kh, ldk, base + k0 + BK, T - k0 - BK);
            load_tile<HD, BK>(vs + buf * BK * HD, vh, ldv, base + k0 + BK, T - k0 - BK);
            st_cp_async_commit();
        }
        await_tile(j + 1 < n_tiles);
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < KS; kk++)
                ldsm_a<HD>(qf[kk], qs, warp * kRowsPerWarp, kk * 16);
        }
        if (k0 <= wq0 + kRowsPerWarp - 1) { /* some row of this warp sees a key here */
            const bf16 *kt = ks + (j & 1) * BK * HD, *vt = vs + (j & 1) * BK * HD;
            float s[NT][4];
            zero_acc<NT>(s);
#pragma unroll
            for (int kk = 0; kk < KS; kk++)
#pragma unroll
                for (int n2 = 0; n2 < NT / 2; n2++) {
                    uint32_t kb[4];
                    ldsm_b_nk<HD>(kb, kt, n2 * 16, kk * 16);
                    mma(s[2 * n2], qf[kk], kb);
                    mma(s[2 * n2 + 1], qf[kk], kb + 2);
                }
            const bool edge = k0 + BK - 1 > wq0 || k0 + BK > T;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float x = s[nt][i] * scale_log2;
                    if (edge) {
                        const int row = wq0 + gid + (i >> 1) * 8;
                        const int col = k0 + nt * 8 + 2 * tig + (i & 1);
                        if (col > row || col >= T)
                            x = -INFINITY;
                    }
                    s[nt][i] = x;
                }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
                const float m_new = fmaxf(m[r], mx); /* finite: see the top */
                const float alpha = exp2f(m[r] - m_new);
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float p = exp2f(s[nt][2 * r + e] - m_new);
                        s[nt][2 * r + e] = p;
                        sum += p;
                    }
                l[r] = l[r] * alpha + sum; /* this lane's columns; quad-summed at the end */
                m[r] = m_new;
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    o[dt][2 * r] *= alpha;
                    o[dt][2 * r + 1] *= alpha;
                }
            }
            accumulate_product<HD, NT>(o, s, vt);
        }
        __syncthreads(); /* buffer j & 1 is refilled by the next iteration's copy */
    }

    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lt = l[r];
        lt += __shfl_xor_sync(kFull, lt, 1);
        lt += __shfl_xor_sync(kFull, lt, 2);
        inv[r] = 1.0f / lt;
        const int row = wq0 + gid + 8 * r;
        if (row < T && tig == 0)
            lse[((int64_t)b * H + h) * T + row] = (m[r] + log2f(lt)) * kLn2;
    }
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
        o[dt][0] *= inv[0];
        o[dt][1] *= inv[0];
        o[dt][2] *= inv[1];
        o[dt][3] *= inv[1];
    }
    store_rows<HD>(out + base * ldo + (int64_t)h * HD, ldo, wq0, T, o, 1.0f);
}

/* ---- backward: dQ ----------------------------------------------------------
 * Same blocks as the forward.  Per key tile: S = Q K^T and dP = dO V^T,
 * P = exp(S - lse), dS = P (dP - D), dQ += dS K.  dQ is scaled by
 * 1/sqrt(hd) once at the end. */
template <int HD>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dq_tc_kernel(bf16 *dq, int64_t lddq, const bf16 *dout, int64_t lddo,
                      const float *lse, const float *D, const bf16 *q, int64_t ldq,
                      const bf16 *k, int64_t ldk, const bf16 *v, int64_t ldv,
                      int T, int H, int group, float scale_log2, float scale)
{
    constexpr int BQ = kBlockRows, BK = dq_bk(HD), NT = BK / 8, DT = HD / 8;
    ST_DYNAMIC_SMEM(smem);
    bf16 *qs = reinterpret_cast<bf16 *>(smem);
    bf16 *dos = qs + BQ * HD;
    bf16 *ks = dos + BQ * HD; /* two buffers each */
    bf16 *vs = ks + 2 * BK * HD;

    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * BQ;
    const int h = blockIdx.y, b = blockIdx.z, g = h / group;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int wq0 = q0 + warp * kRowsPerWarp;
    const int64_t base = (int64_t)b * T, lse_base = ((int64_t)b * H + h) * T;
    const int n_tiles = (min(q0 + BQ, T) - 1) / BK + 1;
    const bf16 *kh = k + (int64_t)g * HD, *vh = v + (int64_t)g * HD;

    load_tile<HD, BQ>(qs, q + (int64_t)h * HD, ldq, base + q0, T - q0);
    load_tile<HD, BQ>(dos, dout + (int64_t)h * HD, lddo, base + q0, T - q0);
    load_tile<HD, BK>(ks, kh, ldk, base, T);
    load_tile<HD, BK>(vs, vh, ldv, base, T);
    st_cp_async_commit();

    float lse2[2], drow[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = wq0 + gid + 8 * r;
        lse2[r] = row < T ? lse[lse_base + row] * kLog2e : 0.0f;
        drow[r] = row < T ? D[lse_base + row] : 0.0f;
    }
    float acc[DT][4];
    zero_acc<DT>(acc);

    for (int j = 0; j < n_tiles; j++) {
        const int k0 = j * BK;
        if (j + 1 < n_tiles) {
            const int buf = (j + 1) & 1;
            load_tile<HD, BK>(ks + buf * BK * HD, kh, ldk, base + k0 + BK, T - k0 - BK);
            load_tile<HD, BK>(vs + buf * BK * HD, vh, ldv, base + k0 + BK, T - k0 - BK);
            st_cp_async_commit();
        }
        await_tile(j + 1 < n_tiles);
        if (k0 <= wq0 + kRowsPerWarp - 1) {
            const bf16 *kt = ks + (j & 1) * BK * HD, *vt = vs + (j & 1) * BK * HD;
            float s[NT][4], dp[NT][4];
            paired_products<HD, NT>(s, dp, qs, dos, warp * kRowsPerWarp, kt, vt);
            const bool edge = k0 + BK - 1 > wq0 || k0 + BK > T || wq0 + kRowsPerWarp > T;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int r = i >> 1;
                    bool visible = true;
                    if (edge) {
                        const int row = wq0 + gid + 8 * r;
                        const int col = k0 + nt * 8 + 2 * tig + (i & 1);
                        visible = col <= row && col < T && row < T;
                    }
                    const float p = visible ? exp2f(s[nt][i] * scale_log2 - lse2[r]) : 0.0f;
                    s[nt][i] = p * (dp[nt][i] - drow[r]); /* dS, unscaled */
                }
            accumulate_product<HD, NT>(acc, s, kt);
        }
        __syncthreads();
    }
    store_rows<HD>(dq + base * lddq + (int64_t)h * HD, lddq, wq0, T, acc, scale);
}

/* ---- backward: dK, dV ------------------------------------------------------
 * Block = (key tile of 64 keys, kv head g, batch b); warp w owns keys
 * k0 + 16w .. k0 + 16w + 15.  The block walks (query head of the group,
 * query tile from the diagonal on) in one fixed order, the Q/dO tiles
 * double-buffered across that whole walk.  Per tile, in the transposed
 * frame (keys down, queries across): S^T = K Q^T, dP^T = V dO^T,
 * P^T = exp(S^T - lse), dS^T = P^T (dP^T - D), dV += P^T dO, dK += dS^T Q.
 * lse and D of a query come straight from global memory (L2-resident:
 * 8 bytes per query row for a whole tile of keys). */
template <int HD>
__global__ void __launch_bounds__(kThreads)
attn_bwd_dkdv_tc_kernel(bf16 *dk, int64_t lddk, bf16 *dv, int64_t lddv,
                        const bf16 *dout, int64_t lddo, const float *lse, const float *D,
                        const bf16 *q, int64_t ldq, const bf16 *k, int64_t ldk,
                        const bf16 *v, int64_t ldv, int T, int H, int group,
                        float scale_log2, float scale)
{
    constexpr int BKV = kBlockRows, BQ = dkdv_bq(HD), NT = BQ / 8, DT = HD / 8;
    ST_DYNAMIC_SMEM(smem);
    bf16 *ks = reinterpret_cast<bf16 *>(smem);
    bf16 *vs = ks + BKV * HD;
    bf16 *qs = vs + BKV * HD; /* two buffers each */
    bf16 *dos = qs + 2 * BQ * HD;

    const int k0 = blockIdx.x * BKV;
    const int g = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int wk0 = k0 + warp * kRowsPerWarp;
    const int64_t base = (int64_t)b * T;
    const int qt_first = k0 / BQ;
    const int n_qt = (T + BQ - 1) / BQ - qt_first; /* >= 1: qt_first * BQ <= k0 < T */
    const int iters = group * n_qt;

    load_tile<HD, BKV>(ks, k + (int64_t)g * HD, ldk, base + k0, T - k0);
    load_tile<HD, BKV>(vs, v + (int64_t)g * HD, ldv, base + k0, T - k0);
    {
        const int h = g * group, qt0 = qt_first * BQ;
        load_tile<HD, BQ>(qs, q + (int64_t)h * HD, ldq, base + qt0, T - qt0);
        load_tile<HD, BQ>(dos, dout + (int64_t)h * HD, lddo, base + qt0, T - qt0);
    }
    st_cp_async_commit();

    float dka[DT][4], dva[DT][4];
    zero_acc<DT>(dka);
    zero_acc<DT>(dva);

    for (int it = 0; it < iters; it++) {
        const int h = g * group + it / n_qt, qt0 = (qt_first + it % n_qt) * BQ;
        if (it + 1 < iters) {
            const int hn = g * group + (it + 1) / n_qt, qn = (qt_first + (it + 1) % n_qt) * BQ;
            const int buf = (it + 1) & 1;
            load_tile<HD, BQ>(qs + buf * BQ * HD, q + (int64_t)hn * HD, ldq, base + qn, T - qn);
            load_tile<HD, BQ>(dos + buf * BQ * HD, dout + (int64_t)hn * HD, lddo, base + qn,
                              T - qn);
            st_cp_async_commit();
        }
        await_tile(it + 1 < iters);
        if (qt0 + BQ - 1 >= wk0 && wk0 < T) { /* some query here sees a key of this warp */
            const bf16 *qt = qs + (it & 1) * BQ * HD, *dot = dos + (it & 1) * BQ * HD;
            float st[NT][4], dpt[NT][4];
            paired_products<HD, NT>(st, dpt, ks, vs, warp * kRowsPerWarp, qt, dot);
            const int64_t lse_base = ((int64_t)b * H + h) * T;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int col = qt0 + nt * 8 + 2 * tig + e; /* the query */
                    const float lq = col < T ? lse[lse_base + col] * kLog2e : 0.0f;
                    const float dq_ = col < T ? D[lse_base + col] : 0.0f;
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int key = wk0 + gid + 8 * r, i = 2 * r + e;
                        const bool visible = col >= key && col < T && key < T;
                        const float p = visible ? exp2f(st[nt][i] * scale_log2 - lq) : 0.0f;
                        st[nt][i] = p;
                        dpt[nt][i] = p * (dpt[nt][i] - dq_);
                    }
                }
            accumulate_product<HD, NT>(dva, st, dot);
            accumulate_product<HD, NT>(dka, dpt, qt);
        }
        __syncthreads();
    }
    store_rows<HD>(dk + base * lddk + (int64_t)g * HD, lddk, wk0, T, dka, scale);
    store_rows<HD>(dv + base * lddv + (int64_t)g * HD, lddv, wk0, T, dva, 1.0f);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Kernels over 48 KiB of dynamic shared memory must say so first. */
template <auto Kernel> int allow_smem(size_t bytes)
{
    const cudaError_t e = allow_dynamic_smem<Kernel>(bytes);
    return e == cudaSuccess ? 0 : (int)e;
}

int launch_status()
{
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : (int)e;
}

float scale_of(int hd) { return 1.0f / sqrtf((float)hd); }

template <int HD>
int forward_hd(bf16 *out, int64_t ldo, float *lse, const bf16 *q, int64_t ldq, const bf16 *k,
               int64_t ldk, const bf16 *v, int64_t ldv, int64_t B, int64_t T, int64_t H,
               int64_t KV, cudaStream_t stream)
{
    const size_t smem = fwd_smem(HD);
    int rc = allow_smem<attn_fwd_tc_kernel<HD>>(smem);
    if (rc)
        return rc;
    const dim3 grid((unsigned)ceil_div(T, kBlockRows), (unsigned)H, (unsigned)B);
    attn_fwd_tc_kernel<HD><<<grid, kThreads, smem, stream>>>(
        out, ldo, lse, q, ldq, k, ldk, v, ldv, (int)T, (int)H, (int)(H / KV),
        scale_of(HD) * kLog2e);
    return launch_status();
}

template <int HD>
int backward_hd(bf16 *dq, int64_t lddq, bf16 *dk, int64_t lddk, bf16 *dv, int64_t lddv,
                const bf16 *dout, int64_t lddo, const float *lse, const float *D,
                const bf16 *q, int64_t ldq, const bf16 *k, int64_t ldk, const bf16 *v,
                int64_t ldv, int64_t B, int64_t T, int64_t H, int64_t KV, cudaStream_t stream)
{
    const float scale = scale_of(HD), scale_log2 = scale * kLog2e;
    const int group = (int)(H / KV);
    int rc = allow_smem<attn_bwd_dkdv_tc_kernel<HD>>(dkdv_smem(HD));
    if (!rc)
        rc = allow_smem<attn_bwd_dq_tc_kernel<HD>>(dq_smem(HD));
    if (rc)
        return rc;
    const dim3 grid_kv((unsigned)ceil_div(T, kBlockRows), (unsigned)KV, (unsigned)B);
    attn_bwd_dkdv_tc_kernel<HD><<<grid_kv, kThreads, dkdv_smem(HD), stream>>>(
        dk, lddk, dv, lddv, dout, lddo, lse, D, q, ldq, k, ldk, v, ldv, (int)T, (int)H, group,
        scale_log2, scale);
    if ((rc = launch_status()))
        return rc;
    const dim3 grid_q((unsigned)ceil_div(T, kBlockRows), (unsigned)H, (unsigned)B);
    attn_bwd_dq_tc_kernel<HD><<<grid_q, kThreads, dq_smem(HD), stream>>>(
        dq, lddq, dout, lddo, lse, D, q, ldq, k, ldk, v, ldv, (int)T, (int)H, group,
        scale_log2, scale);
    return launch_status();
}

} /* namespace */

bool attn_tc_layout_ok(const void *const *ptr, int n_ptr, const int64_t *ld, int n_ld)
{
    for (int i = 0; i < n_ptr; i++)
        if ((uintptr_t)ptr[i] % 16 != 0)
            return false;
    for (int i = 0; i < n_ld; i++)
        if (ld[i] % 8 != 0)
            return false;
    return true;
}

int attn_tc_forward(bf16 *out, int64_t ldo, float *lse, const bf16 *q, int64_t ldq,
                    const bf16 *k, int64_t ldk, const bf16 *v, int64_t ldv, int64_t B, int64_t T,
                    int64_t H, int64_t KV, int64_t hd, cudaStream_t stream)
{
    if (hd == 64)
        return forward_hd<64>(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV, stream);
    return forward_hd<128>(out, ldo, lse, q, ldq, k, ldk, v, ldv, B, T, H, KV, stream);
}

int attn_tc_backward(bf16 *dq, int64_t lddq, bf16 *dk, int64_t lddk, bf16 *dv, int64_t lddv,
                     const bf16 *dout, int64_t lddo, const float *lse, const float *D,
                     const bf16 *q, int64_t ldq, const bf16 *k, int64_t ldk, const bf16 *v,
                     int64_t ldv, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                     cudaStream_t stream)
{
    if (hd == 64)
        return backward_hd<64>(dq, lddq, dk, lddk, dv, lddv, dout, lddo, lse, D, q, ldq, k,
                               ldk, v, ldv, B, T, H, KV, stream);
    return backward_hd<128>(dq, lddq, dk, lddk, dv, lddv, dout, lddo, lse, D, q, ldq, k, ldk,
                            v, ldv, B, T, H, KV, stream);
}

} /* namespace st_cuda */
