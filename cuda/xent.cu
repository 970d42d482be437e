/* Fused softmax cross-entropy over the vocabulary for the CUDA backend:
 * the loss of each row and, in the same pass over the logits, their
 * gradient written in place (st_softmax_xent in src/kernels/cpu_ops.c is the
 * reference).  The logits are the largest activation of the model
 * (N x V, V up to 128k), so they are read twice and written once and
 * nothing of size N x V is ever allocated.  Rows are ld apart, ld >= V:
 * the LM head pads its logits rows to a multiple of 128 so that cuBLASLt
 * gets 16-byte row strides for any vocabulary (50257 included); the kernel
 * reads only the first V columns, so the padding may hold anything, and
 * when it writes the gradient it writes zero into the columns from V to
 * ld: the head's weight-gradient product runs over the stored vocabulary
 * rows (model.vocab_padding), and those rows' gradient must stay zero.
 *
 * One block per row.  Pass 1: each thread keeps a running (max, sum of
 * exp(x - max)) over its strided share of the row (16-byte vectors of it
 * where the rows are aligned), rescaling the sum when
 * the max grows (the "online softmax"), so the row is read once for both;
 * the per-thread pairs are merged by a warp-shuffle tree and then across
 * warps.  Pass 2: write (softmax - onehot) * grad_scale.  Pass 1 also keeps
 * the row's first `cached` elements in shared memory (up to 110 KiB, the
 * row cache), and pass 2 reads them from there instead of from global
 * memory: a bf16 row of gpt2's 50,257 fits whole, so its logits cross the
 * memory bus once each way instead of twice in and once out; of llama's
 * 128,256 the first 56,320 are cached.  A row whose
 * target is negative is ignored (loss 0, gradient 0), as on the CPU.  A second,
 * one-block kernel adds the row losses in double in a fixed order, so the
 * total is deterministic and the call never synchronises with the host.
 *
 * Precision: the CPU sums exp in double; here in fp32 with the tree merge,
 * so lse agrees to ~1e-6 relative, the gradient likewise. */
#include "common.cuh"

#include <math.h>

using namespace st_cuda;

namespace {

const int kXentThreads = 512;
/* The row cache's size: two blocks of 512 threads with 110 KiB each fit on
 * an sm_90 SM (228 KiB of shared memory, 1 KiB of it reserved per block,
 * plus the kernel's 384 bytes of static arrays, as ptxas -v reports), so
 * the SM keeps 1024 threads streaming. */
const int64_t kXentCacheBytes = 110 * 1024;
const int kSumThreads = 256;

/* Merge two partial softmax states (m, s): s counts exp(x - m).  An empty
 * state has m = -inf, s = 0 and must not produce exp(-inf - -inf) = NaN. */
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2)
{
    if (m2 == -INFINITY)
        return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    float mx = fmaxf(m, m2);
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

/* One element into the thread's running (m, s). */
__device__ __forceinline__ void online_add(float &m, float &s, float x)
{
    if (x > m) {
        s = (m == -INFINITY ? 0.0f : s * expf(m - x)) + 1.0f;
        m = x;
    } else if (x != -INFINITY) {
        s += expf(x - m);
    }
}

/* kVec: every row start is 16-byte aligned (the launcher checks the
 * pointer and the row stride), so the first V rounded down to 16 bytes of
 * a row go as 128-bit loads and stores, thread t taking vectors t,
 * t + blockDim.x, ...; the rest, fewer than one vector, one by one.  The
 * split changes which thread adds which element, hence the rounding of the
 * row's sum, not which elements are added; without kVec every element is
 * scalar and strided.  The row cache holds elements [0, cached) at their own
 * index, each written and later read by the same thread; with kVec, cached
 * is a multiple of the vector, at most V rounded down to one. */
template <typename T, bool kVec>
__global__ void xent_rows_kernel(T *logits, const int32_t *targets, int64_t V, int64_t ld,
                                 int64_t cached, float grad_scale, float *row_loss)
{
    constexpr int VE = 16 / sizeof(T);
    ST_DYNAMIC_SMEM(smem);
    T *cache = reinterpret_cast<T *>(smem);
    __shared__ float sm[32], ss[32];
    __shared__ float row_lse;
    const int64_t n = blockIdx.x;
    T *row = logits + n * ld;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    const int32_t tgt = targets[n];
    const int64_t nvec = kVec ? V / VE : 0, tail0 = nvec * VE;
    if (tgt < 0) {
        /* An ignored position (a prompt token of instruction data): no
         * loss and a zero gradient row.  tgt is the same for the whole
         * block, so every thread leaves here together. */
        if (threadIdx.x == 0)
            row_loss[n] = 0.0f;
        if (grad_scale != 0.0f) {
            float z[VE] = {};
            for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x)
                store16(row + j * VE, z);
            for (int64_t i = tail0 + threadIdx.x; i < ld; i += blockDim.x)
                store_f(&row[i], 0.0f);
        }
        return;
    }
    /* Read before any thread of the block can overwrite the row (the
     * writes come after the barriers of the reduction below). */
    const float x_target = threadIdx.x == 0 ? load_f(&row[tgt]) : 0.0f;

    float m = -INFINITY, s = 0.0f;
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
        float q[VE];
        load16(row + j * VE, q);
        if (j * VE < cached)
            store16(cache + j * VE, q); /* exact: the values came from T */
        for (int v = 0; v < VE; v++)
            online_add(m, s, q[v]);
    }
    for (int64_t i = tail0 + threadIdx.x; i < V; i += blockDim.x) {
        const T x = row[i];
        if (i < cached)
            cache[i] = x;
        online_add(m, s, load_f(&x));
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sm[lane] : -INFINITY;
        s = lane < nwarps ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o);
            float s2 = __shfl_xor_sync(0xffffffffu, s, o);
            merge(m, s, m2, s2);
        }
        if (lane == 0) {
            float lse = m + logf(s);
            row_lse = lse;
            row_loss[n] = lse - x_target;
        }
    }
    __syncthreads();
    if (grad_scale == 0.0f)
        return;
    const float lse = row_lse;
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
        float q[VE];
        load16(j * VE < cached ? cache + j * VE : row + j * VE, q);
        for (int v = 0; v < VE; v++) {
            q[v] = expf(q[v] - lse) * grad_scale;
            if (j * VE + v == tgt)
                q[v] -= grad_scale;
        }
        store16(row + j * VE, q);
    }
    for (int64_t i = tail0 + threadIdx.x; i < V; i += blockDim.x) {
        float g = expf(load_f(i < cached ? &cache[i] : &row[i]) - lse) * grad_scale;
        if (i == tgt)
            g -= grad_scale;
        store_f(&row[i], g);
    }
    /* The padding columns: no probability, zero gradient (ld - V is small,
     * under 128 plus the vocabulary padding). */
    for (int64_t i = V + threadIdx.x; i < ld; i += blockDim.x)
        store_f(&row[i], 0.0f);
}

/* Sum of the N row losses in double: thread j adds rows j, j + 256, ...
 * in order, then a fixed tree over the 256 partials. */
__global__ void sum_losses_kernel(const float *row_loss, int64_t N, double *loss_sum)
{
    __shared__ double part[kSumThreads];
    double s = 0.0;
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
        s += row_loss[n];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = kSumThreads / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *loss_sum = part[0];
}

/* The row kernel on one path: the cache holds as much of the row as
 * kXentCacheBytes allows, in whole vectors on the vector path.  Over
 * 48 KiB of dynamic shared memory the kernel must be allowed it first
 * (allow_dynamic_smem, which calls the runtime once per instantiation). */
template <typename T, bool kVec>
cudaError_t launch_xent_rows(T *logits, const int32_t *targets, int64_t N, int64_t V,
                             int64_t ld, float grad_scale, float *row_loss, cudaStream_t s)
{
    constexpr int64_t VE = vec_width<T, kVec>();
    const int64_t cap = kXentCacheBytes / (int64_t)sizeof(T) / VE;
    const int64_t cached = (V / VE < cap ? V / VE : cap) * VE;
    const cudaError_t e = allow_dynamic_smem<xent_rows_kernel<T, kVec>>((size_t)cached * sizeof(T));
    if (e != cudaSuccess)
        return e;
    xent_rows_kernel<T, kVec><<<(unsigned)N, kXentThreads, (size_t)cached * sizeof(T), s>>>(
        logits, targets, V, ld, cached, grad_scale, row_loss);
    return cudaSuccess;
}

template <typename T>
cudaError_t softmax_xent(T *logits, const int32_t *targets, int64_t N, int64_t V,
                         int64_t ld, float grad_scale, float *row_loss, double *loss_sum,
                         cudaStream_t s)
{
    if (ld < V)
        return cudaErrorInvalidValue;
    /* 128-bit accesses when every row starts on 16 bytes (the LM head's
     * rows are a multiple of 128 elements apart). */
    const bool vec = (uintptr_t)logits % 16 == 0 && (ld * (int64_t)sizeof(T)) % 16 == 0;
    cudaError_t e = cudaSuccess;
    if (N > 0 && V > 0)
        e = vec ? launch_xent_rows<T, true>(logits, targets, N, V, ld, grad_scale, row_loss, s)
                : launch_xent_rows<T, false>(logits, targets, N, V, ld, grad_scale, row_loss, s);
    if (e != cudaSuccess)
        return e;
    sum_losses_kernel<<<1, kSumThreads, 0, s>>>(row_loss, N, loss_sum);
    return launch_status();
}

} /* namespace */

extern "C" {

cudaError_t st_cuda_softmax_xent_f32(float *logits, const int32_t *targets, int64_t N,
                                     int64_t V, int64_t ld, float grad_scale,
                                     float *row_loss, double *loss_sum, cudaStream_t s)
{
    return softmax_xent(logits, targets, N, V, ld, grad_scale, row_loss, loss_sum, s);
}
cudaError_t st_cuda_softmax_xent_bf16(uint16_t *logits, const int32_t *targets,
                                      int64_t N, int64_t V, int64_t ld, float grad_scale,
                                      float *row_loss, double *loss_sum, cudaStream_t s)
{
    return softmax_xent(as_bf16(logits), targets, N, V, ld, grad_scale, row_loss,
                        loss_sum, s);
}

} /* extern "C" */
