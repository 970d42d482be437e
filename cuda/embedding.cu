/* The token and position embedding of the CUDA backend and its backward
 * (src/kernels/cpu_model.c's st_embed_forward / st_embed_backward on the
 * device).  The forward is a gather, one thread per output element or per
 * 16 bytes of them.  The backward's position table is a sum over the
 * batch per element, in the CPU's order; its token table is a scatter-add
 * done without atomics, by sorting the rows by token on the device (a
 * multi-block bitonic network) and giving each distinct token's run to a
 * block row that adds the rows in ascending order, so in fp32 it
 * reproduces the CPU bit for bit and does not depend on scheduling.  The
 * sort is the file's only part that is not a plain grid-stride loop: its
 * comment below explains the launches. */
#include "common.cuh"

using namespace st_cuda;

namespace {

const int kThreads = 256;

/* ---- forward ----------------------------------------------------------------- */
/* Item: V consecutive columns of one output row (C a multiple of V). */
template <typename T, bool kVec>
__global__ void embed_forward_kernel(T *out, const T *wte, const T *wpe,
                                     const int32_t *tokens, int64_t rows, int64_t Tlen,
                                     int64_t C)
{
    constexpr int V = vec_width<T, kVec>();
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < rows * C / V;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = k * V, r = e / C, c = e - r * C;
        float o[V], p[V];
        load_vec(&wte[(int64_t)tokens[r] * C + c], o);
        if (wpe) {
            load_vec(&wpe[(r % Tlen) * C + c], p);
            for (int v = 0; v < V; v++)
                o[v] += p[v];
        }
        store_vec(&out[e], o);
    }
}

/* ---- token-embedding gradient: the sort -------------------------------------
 *
 * The scatter-add dwte[tokens[r]] += dout[r] is done without atomics: the
 * rows are sorted by token, and each distinct token's run of rows is then
 * added in ascending row order by one thread per column group (the CPU's
 * order, st_embed_backward), so fp32 results equal the CPU's bit for bit
 * and do not depend on scheduling.
 *
 * The sort is a bitonic network over P = N rounded up to a power of two
 * keys (token << 32 | row; keys past N are all ones and sort last).  The
 * keys are distinct, so the order is total: whichever thread swaps what,
 * the result is the one sorted sequence, rows of one token adjacent and
 * ascending.  Pass (k, j) of the network compares key i with key i + j
 * (i with bit j clear), ascending where (i & k) == 0.  A pass with j below
 * the tile (kSortTile keys) pairs keys inside one tile, so a block does a
 * run of such passes in shared memory, a barrier between passes; a pass
 * with a larger j pairs keys of two tiles and is one launch of its own
 * over the whole array.  The launches for P keys, tile = min(P, kSortTile):
 *   - embed_sort_tile_kernel: every stage k <= tile (all of its passes);
 *   - for each stage k = 2 tile, 4 tile, .. P: the passes j = k/2 .. tile,
 *     one embed_sort_span_kernel each, then embed_sort_merge_kernel for
 *     j = tile/2 .. 1.
 * For gpt2-124m's 65,536 rows that is 21 launches, 15 of them one pass of
 * 0.5 MiB each and 6 of 32 blocks in shared memory, where a one-block
 * network (before) made 136 barrier-separated passes on one SM.  A radix
 * sort would need fewer passes over memory but a stable scatter, whose
 * ranking is more code than this; the passes here are in L2 at this size.
 *
 * The run list (where each distinct token's rows start, ascending) is
 * three launches: each block of kRunThreads sorted positions counts the
 * run starts in it, one warp turns the counts into offsets (an exclusive
 * scan), and each block writes its starts at its offset. */
const int kSortTile = 2048;     /* keys per block: 16 KiB of shared memory */
const int kRunThreads = 1024;   /* sorted positions per block of the run list */
const int kOffsetThreads = 32;  /* the one block that scans the run list's counts */

/* Index of the lower key of pair p in a pass of distance j (a power of
 * two): p's bits below j stay, the others move up one, bit j is clear. */
__device__ __forceinline__ int64_t sort_pair_low(int64_t p, int64_t j)
{
    return ((p & ~(j - 1)) << 1) | (p & (j - 1));
}

__device__ __forceinline__ void sort_exchange(uint64_t *a, uint64_t *b, bool ascending)
{
    const uint64_t x = *a, y = *b;
    if ((x > y) == ascending) {
        *a = y;
        *b = x;
    }
}

/* Passes (k, j0), (k, j0 / 2), .., (k, 1) over the block's tile, held in
 * s; base is the tile's first global index, which sets the direction. */
__device__ void sort_tile_passes(uint64_t *s, int64_t base, int64_t tile, int64_t k,
                                 int64_t j0)
{
    for (int64_t j = j0; j > 0; j >>= 1) {
        for (int64_t p = threadIdx.x; p < tile / 2; p += blockDim.x) {
            const int64_t i = sort_pair_low(p, j);
            sort_exchange(&s[i], &s[i + j], ((base + i) & k) == 0);
        }
        __syncthreads();
    }
}

/* Block b builds the keys of tile b from the tokens and sorts it through
 * every stage k <= tile: ascending or descending by the tile's global
 * index, so pairs of tiles form the bitonic sequences of the next stage. */
__global__ void embed_sort_tile_kernel(uint64_t *keys, const int32_t *tokens, int64_t N,
                                       int64_t tile)
{
    __shared__ uint64_t s[kSortTile];
    const int64_t base = (int64_t)blockIdx.x * tile;
    for (int64_t i = threadIdx.x; i < tile; i += blockDim.x) {
        const int64_t g = base + i;
        s[i] = g < N ? (uint64_t)(uint32_t)tokens[g] << 32 | (uint64_t)g : ~(uint64_t)0;
    }
    __syncthreads();
    for (int64_t k = 2; k <= tile; k <<= 1)
        sort_tile_passes(s, base, tile, k, k >> 1);
    for (int64_t i = threadIdx.x; i < tile; i += blockDim.x)
        keys[base + i] = s[i];
}

/* One pass (k, j) with j >= tile over all P keys, a thread per pair. */
__global__ void embed_sort_span_kernel(uint64_t *keys, int64_t P, int64_t k, int64_t j)
{
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < P / 2;
         p += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = sort_pair_low(p, j);
        sort_exchange(&keys[i], &keys[i + j], (i & k) == 0);
    }
}

/* The rest of stage k, passes j = tile/2 .. 1, in shared memory. */
__global__ void embed_sort_merge_kernel(uint64_t *keys, int64_t k, int64_t tile)
{
    __shared__ uint64_t s[kSortTile];
    const int64_t base = (int64_t)blockIdx.x * tile;
    for (int64_t i = threadIdx.x; i < tile; i += blockDim.x)
        s[i] = keys[base + i];
    __syncthreads();
    sort_tile_passes(s, base, tile, k, tile >> 1);
    for (int64_t i = threadIdx.x; i < tile; i += blockDim.x)
        keys[base + i] = s[i];
}

__device__ __forceinline__ bool run_starts_at(const uint64_t *keys, int64_t i)
{
    return i == 0 || keys[i] >> 32 != keys[i - 1] >> 32;
}

/* Exclusive prefix sum of v over a block of kN threads (all of them must
 * call it); *total gets the block's sum.  A Hillis-Steele scan in shared
 * memory: integer additions, exact in any order. */
template <int kN> __device__ int32_t block_exclusive_scan(int32_t v, int32_t *total)
{
    __shared__ int32_t s[kN];
    const int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (int d = 1; d < kN; d <<= 1) {
        const int32_t add = t >= d ? s[t - d] : 0;
        __syncthreads();
        s[t] += add;
        __syncthreads();
    }
    const int32_t inclusive = s[t];
    *total = s[kN - 1];
    __syncthreads(); /* s is overwritten by the next call */
    return inclusive - v;
}

/* count[b]: the run starts among sorted positions [b, b + 1) x kRunThreads. */
__global__ void embed_runs_count_kernel(int32_t *count, const uint64_t *keys, int64_t N)
{
    const int64_t i = (int64_t)blockIdx.x * kRunThreads + threadIdx.x;
    int32_t total;
    block_exclusive_scan<kRunThreads>(i < N && run_starts_at(keys, i), &total);
    if (threadIdx.x == 0)
        count[blockIdx.x] = total;
}

/* One block of kOffsetThreads: count[] becomes the exclusive prefix of
 * the counts (where each block's starts go in seg), *nseg the number of
 * runs, and seg[*nseg] = N closes the last run.  The counts are scanned a
 * chunk of kOffsetThreads at a time, a carry between chunks: one warp, so
 * a scan step is cheap, and a batch of more than 32 Ki rows already takes
 * the loop (the emulated tests reach it). */
__global__ void embed_runs_offsets_kernel(int32_t *count, int64_t blocks, int32_t *seg,
                                          int32_t *nseg, int64_t N)
{
    int32_t carry = 0;
    for (int64_t b0 = 0; b0 < blocks; b0 += kOffsetThreads) {
        const int64_t b = b0 + threadIdx.x;
        int32_t total;
        const int32_t off =
            block_exclusive_scan<kOffsetThreads>(b < blocks ? count[b] : 0, &total);
        if (b < blocks)
            count[b] = carry + off;
        carry += total;
    }
    if (threadIdx.x == 0) {
        *nseg = carry;
        seg[carry] = (int32_t)N;
    }
}

/* seg[offset[b] + n] = the position of block b's n-th run start. */
__global__ void embed_runs_list_kernel(int32_t *seg, const int32_t *offset,
                                       const uint64_t *keys, int64_t N)
{
    const int64_t i = (int64_t)blockIdx.x * kRunThreads + threadIdx.x;
    const bool start = i < N && run_starts_at(keys, i);
    int32_t total;
    const int32_t n = block_exclusive_scan<kRunThreads>(start, &total);
    if (start)
        seg[offset[blockIdx.x] + n] = (int32_t)i;
}

/* ---- token-embedding gradient: the sums ------------------------------------
 *
 * embed_backward_wte_kernel gives each run (token) to one block row of the
 * grid and each column to one thread; the thread adds the run's rows in
 * ascending row order onto dwte[token, c], which is exactly the CPU's
 * sequence of float additions (st_embed_backward walks rows in order), so
 * fp32 results equal the CPU's bit for bit.  The parallelism is distinct
 * tokens x C, and the sequential depth the longest run.  With kVec a
 * thread owns V adjacent columns, read and accumulated 16 bytes at a
 * time, each column's additions in the same order. */
template <typename T, bool kVec>
__global__ void embed_backward_wte_kernel(float *dwte, const uint64_t *keys,
                                          const int32_t *seg, const int32_t *nseg,
                                          const T *dout, int64_t C)
{
    constexpr int V = vec_width<T, kVec>();
    const int64_t c = ((int64_t)blockIdx.y * blockDim.x + threadIdx.x) * V;
    if (c >= C)
        return;
    const int32_t runs = *nseg;
    for (int32_t s = blockIdx.x; s < runs; s += gridDim.x) {
        const int32_t i0 = seg[s], i1 = seg[s + 1];
        float *e = dwte + (int64_t)(keys[i0] >> 32) * C + c;
        float acc[V], q[V];
        load_vec(e, acc);
        for (int32_t i = i0; i < i1; i++) {
            load_vec(&dout[(int64_t)(uint32_t)keys[i] * C + c], q);
            for (int v = 0; v < V; v++)
                acc[v] += q[v];
        }
        store_vec(e, acc);
    }
}

/* Position table: element (t, c) receives rows b*T + t for b = 0..B-1, in
 * that order (the CPU's row order), so one thread per item of V elements,
 * no race. */
template <typename T, bool kVec>
__global__ void embed_backward_wpe_kernel(float *dwpe, const T *dout, int64_t B,
                                          int64_t Tlen, int64_t C)
{
    constexpr int V = vec_width<T, kVec>();
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < Tlen * C / V;
         k += (int64_t)gridDim.x * blockDim.x) {
        float acc[V], q[V];
        load_vec(&dwpe[k * V], acc);
        for (int64_t b = 0; b < B; b++) {
            load_vec(&dout[b * Tlen * C + k * V], q);
            for (int v = 0; v < V; v++)
                acc[v] += q[v];
        }
        store_vec(&dwpe[k * V], acc);
    }
}

/* ---- host-side launchers ---------------------------------------------------- */

template <typename T>
cudaError_t embed_forward(T *out, const T *wte, const T *wpe, const int32_t *tokens,
                          int64_t B, int64_t Tlen, int64_t C, cudaStream_t s)
{
    const int64_t work = B * Tlen * C;
    const bool vec = aligned16(out, wte, wpe) && widths_vec<T>(C);
    if (work > 0)
        with_vec_items<T>(vec, work, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            embed_forward_kernel<T, kVec><<<grid, kThreads, 0, s>>>(
                out, wte, wpe, tokens, B * Tlen, Tlen, C);
        });
    return launch_status();
}

/* Workspace of the token-embedding backward for N rows, each part 256-byte
 * aligned: the sort keys (N rounded up to a power of two), the run starts
 * (N + 1), the run count, and the run list's per-block counts. */
static size_t align256(size_t n) { return (n + 255) / 256 * 256; }
static int64_t pow2_at_least(int64_t n)
{
    int64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}
static int64_t run_blocks(int64_t N) { return (N + kRunThreads - 1) / kRunThreads; }
static size_t embed_ws_bytes(int64_t N, size_t *seg_at, size_t *nseg_at, size_t *count_at)
{
    *seg_at = align256(pow2_at_least(N) * 8);
    *nseg_at = *seg_at + align256((N + 1) * 4);
    *count_at = *nseg_at + align256(4);
    return *count_at + align256(run_blocks(N) * 4);
}

/* The sort and the run list of the rows' tokens (launch order in the
 * comment of the sort kernels). */
static void embed_sort_runs(uint64_t *keys, int32_t *seg, int32_t *nseg, int32_t *count,
                            const int32_t *tokens, int64_t N, cudaStream_t s)
{
    const int64_t P = pow2_at_least(N);
    const int64_t tile = P < kSortTile ? P : kSortTile;
    const unsigned tiles = (unsigned)(P / tile);
    const int threads = tile > 1 ? (int)(tile / 2) : 1;
    embed_sort_tile_kernel<<<tiles, threads, 0, s>>>(keys, tokens, N, tile);
    for (int64_t k = 2 * tile; k <= P; k <<= 1) {
        for (int64_t j = k >> 1; j >= tile; j >>= 1)
            embed_sort_span_kernel<<<grid_for(P / 2, kThreads), kThreads, 0, s>>>(keys, P, k,
                                                                                   j);
        embed_sort_merge_kernel<<<tiles, threads, 0, s>>>(keys, k, tile);
    }
    const unsigned blocks = (unsigned)run_blocks(N);
    embed_runs_count_kernel<<<blocks, kRunThreads, 0, s>>>(count, keys, N);
    embed_runs_offsets_kernel<<<1, kOffsetThreads, 0, s>>>(count, blocks, seg, nseg, N);
    embed_runs_list_kernel<<<blocks, kRunThreads, 0, s>>>(seg, count, keys, N);
}

template <typename T>
cudaError_t embed_backward(float *dwte, float *dwpe, const int32_t *tokens, const T *dout,
                           int64_t B, int64_t Tlen, int64_t C, void *ws, cudaStream_t s)
{
    const int64_t N = B * Tlen;
    if (N * C <= 0)
        return launch_status();
    if (!ws || N > INT32_MAX - 1)
        return cudaErrorInvalidValue;
    size_t seg_at, nseg_at, count_at;
    embed_ws_bytes(N, &seg_at, &nseg_at, &count_at);
    char *w = static_cast<char *>(ws);
    uint64_t *keys = reinterpret_cast<uint64_t *>(w);
    int32_t *seg = reinterpret_cast<int32_t *>(w + seg_at);
    int32_t *nseg = reinterpret_cast<int32_t *>(w + nseg_at);
    embed_sort_runs(keys, seg, nseg, reinterpret_cast<int32_t *>(w + count_at), tokens, N, s);
    /* A block row per run up to 4096 runs (then each loops), 256 columns
     * per block: enough blocks for any GPU once a batch has a few hundred
     * distinct tokens; a fixed function of N, so the work split is too. */
    const unsigned gx = (unsigned)(N < 4096 ? N : 4096);
    with_vec(aligned16(dwte, dout) && widths_vec<T>(C), [&](auto tag) {
        constexpr bool kVec = decltype(tag)::value;
        constexpr int V = vec_width<T, kVec>();
        const dim3 grid(gx, (unsigned)((C / V + 255) / 256));
        embed_backward_wte_kernel<T, kVec><<<grid, 256, 0, s>>>(dwte, keys, seg, nseg, dout, C);
    });
    const bool vec = aligned16(dwpe, dout) && widths_vec<T>(C); /* dwpe NULL: not used */
    if (dwpe)
        with_vec_items<T>(vec, Tlen * C, kThreads, [&](auto tag, unsigned grid) {
            constexpr bool kVec = decltype(tag)::value;
            embed_backward_wpe_kernel<T, kVec><<<grid, kThreads, 0, s>>>(
                dwpe, dout, B, Tlen, C);
        });
    return launch_status();
}

} /* namespace */

/* ---- C entry points ---------------------------------------------------------- */

extern "C" {

cudaError_t st_cuda_embed_forward_f32(float *out, const float *wte, const float *wpe,
                                      const int32_t *tokens, int64_t B, int64_t T,
                                      int64_t C, cudaStream_t s)
{
    return embed_forward(out, wte, wpe, tokens, B, T, C, s);
}
cudaError_t st_cuda_embed_forward_bf16(uint16_t *out, const uint16_t *wte,
                                       const uint16_t *wpe, const int32_t *tokens,
                                       int64_t B, int64_t T, int64_t C, cudaStream_t s)
{
    return embed_forward(as_bf16(out), as_bf16(wte), as_bf16(wpe), tokens, B, T, C, s);
}
size_t st_cuda_embed_backward_workspace_bytes(int64_t N)
{
    size_t seg_at, nseg_at, count_at;
    return N > 0 ? embed_ws_bytes(N, &seg_at, &nseg_at, &count_at) : 0;
}
cudaError_t st_cuda_embed_backward_f32(float *dwte, float *dwpe, const int32_t *tokens,
                                       const float *dout, int64_t B, int64_t T,
                                       int64_t C, void *ws, cudaStream_t s)
{
    return embed_backward(dwte, dwpe, tokens, dout, B, T, C, ws, s);
}
cudaError_t st_cuda_embed_backward_bf16(float *dwte, float *dwpe, const int32_t *tokens,
                                        const uint16_t *dout, int64_t B, int64_t T,
                                        int64_t C, void *ws, cudaStream_t s)
{
    return embed_backward(dwte, dwpe, tokens, as_bf16(dout), B, T, C, ws, s);
}

} /* extern "C" */
