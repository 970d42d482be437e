/* The block units' architecture-neutral half (cuda/model_cuda.h): the
 * extern "C" block entry points, which pick the architecture's forward or
 * backward out of one table indexed by enum st_arch (the sequences
 * themselves are in cuda/model_gpt2.cu and cuda/model_llama.cu), and the
 * LoRA adapters' elementwise kernels (model_common.cuh's launchers), which
 * both architectures use.  The kernels live here once so that their code
 * and register use are the same whichever architecture launches them. */
#include "model_common.cuh"

namespace {

using st_cuda::load_f;
using st_cuda::store_f;

const int kLoraThreads = 256;
inline unsigned lora_grid(int64_t n) { return st_cuda::grid_for(n, kLoraThreads); }

template <class T>
__global__ void lora_dropout_kernel(T *xd, const T *x, int64_t ldx, int64_t N, int64_t in,
                                    KeepArgs k, float keep_scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * in;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = e / in, c = e % in;
        const bool keep = st_lora_keep_at(k.seed, k.layer, k.target, k.step, k.first_seq, k.T,
                                          n, c, in, k.dropout);
        store_f(&xd[e], keep ? load_f(&x[n * ldx + c]) * keep_scale : 0.0f);
    }
}

/* dst may be src (fp32 mode: xa is xa32). */
template <class T>
__global__ void lora_scale_kernel(T *dst, const float *src, int64_t N, int64_t r, int64_t ld,
                                  float scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * r;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / r * ld + e % r;
        store_f(&dst[i], src[i] * scale);
    }
}

/* Exact copies: the zero columns keep the padded products' extra terms 0. */
template <class T>
__global__ void lora_pad_kernel(T *Bp, const T *B, int64_t out, int64_t r, int64_t rp)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < out * rp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / rp, j = e % rp;
        store_f(&Bp[e], j < r ? load_f(&B[o * r + j]) : 0.0f);
    }
}

__global__ void lora_add_db_kernel(float *dB, const float *dBp, int64_t out, int64_t r,
                                   int64_t rp)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < out * r;
         e += (int64_t)gridDim.x * blockDim.x)
        dB[e] += dBp[e / r * rp + e % r];
}

template <class T>
__global__ void lora_mask_add_kernel(T *dx, int64_t lddx, const T *dxd, int64_t N, int64_t in,
                                     int accumulate, KeepArgs k, float keep_scale)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < N * in;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = e / in, c = e % in;
        const bool keep = st_lora_keep_at(k.seed, k.layer, k.target, k.step, k.first_seq, k.T,
                                          n, c, in, k.dropout);
        T *d = &dx[n * lddx + c];
        const float base = accumulate ? load_f(d) : 0.0f;
        store_f(d, keep ? base + load_f(&dxd[e]) * keep_scale : base);
    }
}

/* Indexed by enum st_arch: C++ has no array designators, so the order is
 * checked instead. */
static_assert(ST_ARCH_GPT2 == 0 && ST_ARCH_LLAMA == 1, "kBlocks follows enum st_arch");
const st_cuda_block::BlockOps *const kBlocks[] = {&st_cuda_block::gpt2_block_ops,
                                                  &st_cuda_block::llama_block_ops};

} /* namespace */

namespace st_cuda_block {

template <class T>
void lora_dropout(T *xd, const T *x, int64_t ldx, int64_t N, int64_t in, KeepArgs k,
                  float keep_scale, cudaStream_t s)
{
    lora_dropout_kernel<<<lora_grid(N * in), kLoraThreads, 0, s>>>(xd, x, ldx, N, in, k,
                                                                   keep_scale);
}
template <class T>
void lora_scale(T *dst, const float *src, int64_t N, int64_t r, int64_t ld, float scale,
                cudaStream_t s)
{
    lora_scale_kernel<<<lora_grid(N * r), kLoraThreads, 0, s>>>(dst, src, N, r, ld, scale);
}
template <class T>
void lora_pad(T *Bp, const T *B, int64_t out, int64_t r, int64_t rp, cudaStream_t s)
{
    lora_pad_kernel<<<lora_grid(out * rp), kLoraThreads, 0, s>>>(Bp, B, out, r, rp);
}
void lora_add_db(float *dB, const float *dBp, int64_t out, int64_t r, int64_t rp,
                 cudaStream_t s)
{
    lora_add_db_kernel<<<lora_grid(out * r), kLoraThreads, 0, s>>>(dB, dBp, out, r, rp);
}
template <class T>
void lora_mask_add(T *dx, int64_t lddx, const T *dxd, int64_t N, int64_t in, int accumulate,
                   KeepArgs k, float keep_scale, cudaStream_t s)
{
    lora_mask_add_kernel<<<lora_grid(N * in), kLoraThreads, 0, s>>>(dx, lddx, dxd, N, in,
                                                                    accumulate, k, keep_scale);
}

#define ST_LORA_INSTANTIATE(T)                                                             \
    template void lora_dropout<T>(T *, const T *, int64_t, int64_t, int64_t, KeepArgs, float, \
                                  cudaStream_t);                                           \
    template void lora_scale<T>(T *, const float *, int64_t, int64_t, int64_t, float,       \
                                cudaStream_t);                                             \
    template void lora_pad<T>(T *, const T *, int64_t, int64_t, int64_t, cudaStream_t);     \
    template void lora_mask_add<T>(T *, int64_t, const T *, int64_t, int64_t, int, KeepArgs, \
                                   float, cudaStream_t);
ST_LORA_INSTANTIATE(float)
ST_LORA_INSTANTIATE(st_cuda::bf16)
#undef ST_LORA_INSTANTIATE

} /* namespace st_cuda_block */

extern "C" {

cudaError_t st_cuda_model_block_forward_f32(const st_model *m, const float *p,
                                            const st_cuda_lora *lora, int64_t B,
                                            const float *in, float *out,
                                            const st_cuda_block_acts *a, void *scratch,
                                            st_cuda_model_ctx *ctx)
{
    return kBlocks[m->arch]->f32.forward(m, p, lora, B, in, out, a, scratch, ctx);
}

cudaError_t st_cuda_model_block_backward_f32(const st_model *m, const float *p, float *g,
                                             const st_cuda_lora *lora, int64_t B,
                                             const float *in, const st_cuda_block_acts *a,
                                             const float *dout, float *din, void *scratch,
                                             st_cuda_model_ctx *ctx)
{
    return kBlocks[m->arch]->f32.backward(m, p, g, lora, B, in, a, dout, din, scratch, ctx);
}

cudaError_t st_cuda_model_block_forward_bf16(const st_model *m, const uint16_t *p,
                                             const st_cuda_lora *lora, int64_t B,
                                             const uint16_t *in, uint16_t *out,
                                             const st_cuda_block_acts *a, void *scratch,
                                             st_cuda_model_ctx *ctx)
{
    return kBlocks[m->arch]->bf16.forward(m, p, lora, B, in, out, a, scratch, ctx);
}

cudaError_t st_cuda_model_block_backward_bf16(const st_model *m, const uint16_t *p,
                                              float *g, const st_cuda_lora *lora, int64_t B,
                                              const uint16_t *in, const st_cuda_block_acts *a,
                                              const uint16_t *dout, uint16_t *din,
                                              void *scratch, st_cuda_model_ctx *ctx)
{
    return kBlocks[m->arch]->bf16.backward(m, p, g, lora, B, in, a, dout, din, scratch, ctx);
}

} /* extern "C" */
