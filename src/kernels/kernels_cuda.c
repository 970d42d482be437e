/* The cuda kernels backend (see kernels.h): device memory, and adapters
 * from the engine's calls onto the model units of cuda/model_cuda.h and the
 * ops of cuda/ops.h.  NONE OF THIS HAS RUN ON A GPU YET (cuda/README).
 *
 * One compute stream per instance.  Every call queues work on the
 * instance's non-blocking stream (st_kernels.stream, which the layer above
 * hands to the nccl backend when it creates the groups, so collectives wait
 * for it and make it wait for them through events), and nothing here
 * synchronises the host except to_host, which by kernels.h's contract must
 * return complete values, and sync.  The stream, the model context, the
 * sumsq workspace and the block table live in the instance: the file holds
 * no mutable state, so two instances would not share anything.  Memory
 * comes from the stream-ordered allocator (cudaMallocAsync / cudaFreeAsync
 * on the compute stream, with a pool that keeps what it has): the engine allocates and frees gathered units and
 * reduction buffers every step, and cudaFree would stall the device each
 * time.  A block freed on the stream is reused only by work queued after
 * the free, which is exactly the engine's order.
 *
 * Storage modes.  fp32 runs the _f32 units as they are.  In bf16 mode the
 * engine hands over the gathered units as bf16 words (params_bf16) and
 * keeps the residual stream and its gradient as bf16 words too
 * (act_bytes 2, kernels.h), which the _bf16 units read and write as they
 * are: nothing is converted between units.  (The units' bf16 outputs were
 * once unpacked into an fp32 stream and packed again for the next unit;
 * the values were the same bf16 numbers, so the results are too, bit for
 * bit.)  The saved activations and the scratch are in the mode's layout
 * (the engine never opens them).
 *
 * Errors.  A failed CUDA call is a failed device: the message names the
 * call and the CUDA error, and the process exits (ST_EXIT_FAILURE); there
 * is no recovering mid-step, as with the host allocator's out of memory. */
#include "st_build.h"

#include "kernels/kernels_backends.h"
#include "base/log.h"
#include "config/origin.h"

/* The fused attention kernels (cuda/attention.h) are written for two head
 * widths; say so before any work rather than fail at the first block.
 * LoRA adapters run in the CUDA units too (cuda/model_common.cu). */
int st_kernels_cuda_check(const st_config *cfg)
{
    const int64_t hd = cfg->model.d_model / cfg->model.n_head;
    if (hd == 64 || hd == 128)
        return 0;
    return st_config_error(cfg, "model", "n_head", "the CUDA kernels take attention head "
                           "widths 64 and 128, not d_model %lld / n_head %lld = %lld; "
                           "hint: change model.n_head or model.d_model, or set "
                           "train.device = cpu", (long long)cfg->model.d_model,
                           (long long)cfg->model.n_head, (long long)hd);
}

#ifdef HAVE_CUDA

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "adamw.h"
#include "model_cuda.h"

/* One instance's state (st_kernels.impl). */
typedef struct {
    int bf16;                     /* storage mode: 1 bf16, 0 fp32 */
    cudaStream_t stream;
    const st_model *model;        /* the model ctx was made for */
    st_cuda_model_ctx *ctx;
    double *partials;             /* st_cuda_sumsq's workspace */
    /* device block -> (bytes, category), for the memory counters */
    struct dev_block { void *p; size_t bytes; int cat; } *blocks;
    size_t n_blocks, cap_blocks;
} cuda_state;

static cuda_state *state(st_kernels *k) { return k->impl; }

static void check(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return;
    /* The kernels interface returns nothing, and a failed launch leaves the
     * device state unknown: the run cannot continue. */
    st_fatal("CUDA: %s failed: %s; hint: %s", call, cudaGetErrorString(e),
             e == cudaErrorMemoryAllocation
                 ? "lower train.micro_batch, turn on train.activation_checkpointing or "
                   "shard over more ranks (shardtrain estimate --device-mem)"
                 : "check the GPU with nvidia-smi; rerun under compute-sanitizer to "
                   "find a faulting kernel");
}

/* ---- memory ---------------------------------------------------------- */

/* The block table is searched from the end: most frees are of recent
 * allocations (gathered units, reduction buffers, per-call temporaries). */
static void remember(cuda_state *cu, void *p, size_t bytes, int cat)
{
    if (cu->n_blocks == cu->cap_blocks) {
        size_t cap = cu->cap_blocks ? 2 * cu->cap_blocks : 256;
        struct dev_block *b = realloc(cu->blocks, cap * sizeof *b);
        if (!b)
            st_fatal("out of host memory for the device block table"); /* like st_alloc */
        cu->blocks = b;
        cu->cap_blocks = cap;
    }
    cu->blocks[cu->n_blocks++] = (struct dev_block){p, bytes, cat};
    st_mem_count_alloc((st_mem_cat)cat, bytes);
}

static void forget(cuda_state *cu, void *p)
{
    for (size_t i = cu->n_blocks; i-- > 0;) {
        if (cu->blocks[i].p != p)
            continue;
        st_mem_count_free((st_mem_cat)cu->blocks[i].cat, cu->blocks[i].bytes);
        cu->blocks[i] = cu->blocks[--cu->n_blocks];
        return;
    }
    st_bug("freeing device memory the cuda backend did not allocate");
}

/* Stream-ordered device memory, counted; zeroed for alloc (kernels.h
 * promises it), not for alloc_raw, whose callers write the block whole
 * before they read it.  The emulation (tests/gpu/emu/devmem.c) fills every
 * fresh block with NaN, so a raw block read before its write fails the
 * emulated runs rather than reading a lucky zero. */
static void *device_alloc(st_kernels *k, size_t bytes, st_mem_cat cat, int zeroed)
{
    cuda_state *cu = state(k);
    void *p = NULL;
    /* A zero-byte block still needs a distinct pointer to free. */
    check(cudaMallocAsync(&p, bytes ? bytes : 1, cu->stream), "cudaMallocAsync");
    if (bytes && zeroed)
        check(cudaMemsetAsync(p, 0, bytes, cu->stream), "cudaMemsetAsync");
    remember(cu, p, bytes, (int)cat);
    return p;
}

static void *cuda_alloc(st_kernels *k, size_t bytes, st_mem_cat cat)
{
    return device_alloc(k, bytes, cat, 1);
}

static void *cuda_alloc_raw(st_kernels *k, size_t bytes, st_mem_cat cat)
{
    return device_alloc(k, bytes, cat, 0);
}

static void cuda_free(st_kernels *k, void *p)
{
    if (!p)
        return;
    forget(state(k), p);
    check(cudaFreeAsync(p, state(k)->stream), "cudaFreeAsync");
}

static void cuda_zero(st_kernels *k, void *p, size_t bytes)
{
    if (bytes)
        check(cudaMemsetAsync(p, 0, bytes, state(k)->stream), "cudaMemsetAsync");
}

static void cuda_sync(st_kernels *k)
{
    check(cudaStreamSynchronize(state(k)->stream), "cudaStreamSynchronize");
}

static void cuda_to_host(st_kernels *k, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, state(k)->stream),
          "cudaMemcpyAsync (device to host)");
    cuda_sync(k);
}

/* Pageable host memory: the copy is staged by the driver and src may be
 * reused once this returns. */
static void cuda_from_host(st_kernels *k, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state(k)->stream),
              "cudaMemcpyAsync (host to device)");
}

static void cuda_copy(st_kernels *k, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state(k)->stream),
              "cudaMemcpyAsync (device to device)");
}

static int dtype(st_kernels *k) { return state(k)->bf16 ? ST_CUDA_BF16 : ST_CUDA_F32; }

/* The engine lays saved-activation sets back to back: keep each set on
 * model_cuda.h's 256-byte alignment. */
static size_t round256(size_t n) { return (n + 255) / 256 * 256; }

static size_t cuda_block_acts_bytes(st_kernels *k, const st_model *m, int64_t B)
{
    return round256(st_cuda_block_acts_bytes(m, B, dtype(k)));
}

/* With LoRA the CUDA scratch holds the adapters' buffers in its own layout
 * (model_units.cuh's LoraScratch), not the CPU's st_lora_scratch_floats
 * that `shardtrain estimate` counts (plan/estimate.c): the rank-sized
 * products at a row stride of the rank rounded up to 8 (fp32, plus bf16
 * copies in bf16 mode), B and its gradient padded to that stride, and for
 * GPT-2's c_fc adapter its [N, F] share in the storage type; the dropout
 * buffers [N, widest in] are the CPU's, in the storage type.  The scratch
 * is the larger of this and the head's, which usually dominates. */
static size_t cuda_scratch_bytes(st_kernels *k, const st_model *m, int64_t B)
{
    return round256(st_cuda_model_scratch_bytes(m, B, dtype(k)));
}

/* ---- model units ------------------------------------------------------ */

/* The units' context belongs to one model (its RoPE tables); made on first
 * use, which is set-up (the table copy waits for the host). */
static st_cuda_model_ctx *ctx_for(st_kernels *k, const st_model *m)
{
    cuda_state *cu = state(k);
    if (cu->ctx && cu->model == m)
        return cu->ctx;
    if (cu->ctx)
        st_cuda_model_ctx_destroy(cu->ctx);
    cu->ctx = NULL;
    check(st_cuda_model_ctx_create(&cu->ctx, m, cu->stream, 0), "creating the model's CUDA "
          "context (cuBLASLt, RoPE tables)");
    cu->model = m;
    return cu->ctx;
}

/* The engine passes bf16 words exactly when the mode is bf16. */
static void expect_mode(st_kernels *k, st_dtype pdt)
{
    const int bf16 = state(k)->bf16;
    if ((pdt == ST_DT_BF16) != bf16)
        st_bug("the cuda kernels in %s mode were given %s parameters",
               bf16 ? "bf16" : "fp32", pdt == ST_DT_BF16 ? "bf16" : "fp32");
}

static void pack(st_kernels *k, uint16_t *dst, const float *src, int64_t n)
{
    check(st_cuda_pack_bf16(dst, src, n, state(k)->stream), "st_cuda_pack_bf16");
}

static void unpack(st_kernels *k, float *dst, const uint16_t *src, int64_t n)
{
    check(st_cuda_unpack_bf16(dst, src, n, state(k)->stream), "st_cuda_unpack_bf16");
}

/* The activations are in the mode's type (act_bytes), so each call goes
 * to the _f32 or the _bf16 unit with its pointers as they are. */
static void cuda_embed_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                               const int32_t *tokens, int64_t B, void *out)
{
    expect_mode(k, pdt);
    st_cuda_model_ctx *c = ctx_for(k, m);
    check(state(k)->bf16 ? st_cuda_model_embed_forward_bf16(m, p, tokens, B, out, c)
                         : st_cuda_model_embed_forward_f32(m, p, tokens, B, out, c),
          "embedding forward");
}

static void cuda_embed_backward(st_kernels *k, const st_model *m, float *g,
                                const int32_t *tokens, int64_t B, const void *dout)
{
    st_cuda_model_ctx *c = ctx_for(k, m);
    check(state(k)->bf16 ? st_cuda_model_embed_backward_bf16(m, g, tokens, B, dout, c)
                         : st_cuda_model_embed_backward_f32(m, g, tokens, B, dout, c),
          "embedding backward");
}

/* kernels.h's LoRA arguments as the CUDA units take them (NULL: none). */
static const st_cuda_lora *lora_args(const st_lora_args *la, st_cuda_lora *out)
{
    if (!la)
        return NULL;
    *out = (st_cuda_lora){la->p, la->g, la->layer, la->dropout, la->seed, la->step,
                          la->first_seq};
    return out;
}

/* The adapters (la) and frozen base weights (g NULL, LoRA) go to the units
 * as they are; the forward's adapters use the scratch. */
static void cuda_block_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                               const st_lora_args *la, int64_t B, const void *in, void *out,
                               void *acts, void *scratch)
{
    expect_mode(k, pdt);
    st_cuda_model_ctx *c = ctx_for(k, m);
    st_cuda_block_acts a;
    st_cuda_block_acts_bind(&a, m, B, dtype(k), acts);
    st_cuda_lora lb;
    const st_cuda_lora *lora = lora_args(la, &lb);
    check(state(k)->bf16
              ? st_cuda_model_block_forward_bf16(m, p, lora, B, in, out, &a, scratch, c)
              : st_cuda_model_block_forward_f32(m, p, lora, B, in, out, &a, scratch, c),
          "block forward");
}

static void cuda_block_backward(st_kernels *k, const st_model *m, const void *p,
                                st_dtype pdt, float *g, const st_lora_args *la, int64_t B,
                                const void *in, const void *acts, const void *dout,
                                void *din, void *scratch)
{
    expect_mode(k, pdt);
    st_cuda_model_ctx *c = ctx_for(k, m);
    st_cuda_block_acts a;
    /* bind only computes pointers; backward reads through them. */
    st_cuda_block_acts_bind(&a, m, B, dtype(k), (void *)acts);
    st_cuda_lora lb;
    const st_cuda_lora *lora = lora_args(la, &lb);
    check(state(k)->bf16 ? st_cuda_model_block_backward_bf16(m, p, g, lora, B, in, &a, dout,
                                                             din, scratch, c)
                         : st_cuda_model_block_backward_f32(m, p, g, lora, B, in, &a, dout,
                                                            din, scratch, c),
          "block backward");
}

/* din is written only when training (grad_scale != 0), as on the CPU. */
static void cuda_head(st_kernels *k, const st_model *m, const void *head_p,
                      const void *embed_p, st_dtype pdt, float *head_g, float *embed_g,
                      int64_t B, const void *in, const int32_t *targets, float grad_scale,
                      void *din, float *logits_out, void *scratch, double *loss_sum)
{
    expect_mode(k, pdt);
    st_cuda_model_ctx *c = ctx_for(k, m);
    check(state(k)->bf16
              ? st_cuda_model_head_forward_backward_bf16(m, head_p, embed_p, head_g, embed_g,
                                                         B, in, targets, grad_scale, din,
                                                         logits_out, scratch, loss_sum, c)
              : st_cuda_model_head_forward_backward_f32(m, head_p, embed_p, head_g, embed_g,
                                                        B, in, targets, grad_scale, din,
                                                        logits_out, scratch, loss_sum, c),
          "head forward and backward");
}

/* ---- engine helpers --------------------------------------------------- */

static void cuda_round_bf16(st_kernels *k, float *dst, const float *src, int64_t n)
{
    check(st_cuda_round_bf16(dst, src, n, state(k)->stream), "st_cuda_round_bf16");
}

static void cuda_add_inplace(st_kernels *k, float *y, const float *x, int64_t n)
{
    check(st_cuda_add_inplace_f32(y, x, n, state(k)->stream), "st_cuda_add_inplace_f32");
}

static void cuda_sumsq(st_kernels *k, const float *x, int64_t n, double *acc)
{
    cuda_state *cu = state(k);
    check(st_cuda_sumsq(x, n, acc, cu->partials, cu->stream), "st_cuda_sumsq");
}

/* One launch per unit (cuda/adamw.cu): the segments cross as the
 * launch's parameters and the clip is read from device memory, so nothing
 * is copied or waited for. */
static void cuda_adamw_unit(st_kernels *k, const st_adamw_segment *segs, int n_segs, float *p,
                            const float *g, float *m, float *v, uint16_t *p_bf16,
                            const st_adamw_args *a)
{
    st_cuda_adamw_segment cs[ST_CUDA_ADAMW_MAX_SEGMENTS];
    for (int first = 0; first < n_segs; first += ST_CUDA_ADAMW_MAX_SEGMENTS) {
        int n = n_segs - first < ST_CUDA_ADAMW_MAX_SEGMENTS ? n_segs - first
                                                           : ST_CUDA_ADAMW_MAX_SEGMENTS;
        for (int i = 0; i < n; i++)
            cs[i] = (st_cuda_adamw_segment){segs[first + i].offset, segs[first + i].length,
                                            segs[first + i].decay};
        check(st_cuda_adamw_unit(cs, n, p, g, m, v, p_bf16, a->lr, a->beta1, a->beta2, a->eps,
                                 a->weight_decay, a->grad_scale,
                                 a->clip > 0.0 ? a->clip_sumsq : NULL, a->clip, a->t,
                                 a->gate, state(k)->stream),
              "st_cuda_adamw_unit");
    }
}

static void cuda_step_verdict(st_kernels *k, double *rec, const double *losses, int n_losses,
                              const double *sumsq, int force_bad)
{
    check(st_cuda_step_verdict(rec, losses, n_losses, sumsq, force_bad, state(k)->stream),
          "st_cuda_step_verdict");
}

static void cuda_step_gate(st_kernels *k, double *gate, double *rec, int64_t limit,
                           double beta1, double beta2)
{
    check(st_cuda_step_gate(gate, rec, limit, beta1, beta2, state(k)->stream),
          "st_cuda_step_gate");
}

/* ---- the instance ------------------------------------------------------ */

/* Teardown: what is queued finishes first; a failure here changes nothing
 * the run produced, so it is not reported. */
static void cuda_destroy(st_kernels *k)
{
    cuda_state *cu = state(k);
    if (cu->stream)
        (void)cudaStreamSynchronize(cu->stream);
    if (cu->ctx)
        st_cuda_model_ctx_destroy(cu->ctx);
    if (cu->partials)
        (void)cudaFree(cu->partials);
    if (cu->stream)
        (void)cudaStreamDestroy(cu->stream);
    free(cu->blocks);
    free(cu);
    free(k);
}

static const st_kernels_ops cuda_ops = {
    .alloc = cuda_alloc,
    .alloc_raw = cuda_alloc_raw,
    .free = cuda_free,
    .zero = cuda_zero,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .block_acts_bytes = cuda_block_acts_bytes,
    .scratch_bytes = cuda_scratch_bytes,
    .embed_forward = cuda_embed_forward,
    .embed_backward = cuda_embed_backward,
    .block_forward = cuda_block_forward,
    .block_backward = cuda_block_backward,
    .head_forward_backward = cuda_head,
    .pack_bf16 = pack,
    .unpack_bf16 = unpack,
    .round_bf16 = cuda_round_bf16,
    .add_inplace = cuda_add_inplace,
    .sumsq = cuda_sumsq,
    .adamw_unit = cuda_adamw_unit,
    .step_verdict = cuda_step_verdict,
    .step_gate = cuda_step_gate,
    .destroy = cuda_destroy,
};

/* The compute stream, and the device pool set to keep freed blocks for
 * reuse instead of returning them to the driver at each synchronisation:
 * the engine frees and reallocates the same sizes every step. */
static cudaError_t cuda_setup(cuda_state *cu)
{
    cudaError_t e = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
    cudaMemPool_t pool;
    int dev = 0;
    if (e == cudaSuccess)
        e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetDefaultMemPool(&pool, dev);
    if (e == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&cu->partials, sizeof(double) * ST_CUDA_SUMSQ_PARTIALS);
    return e;
}

int st_kernels_cuda_open(int bf16, st_kernels **out)
{
    st_kernels *k = calloc(1, sizeof *k);
    cuda_state *cu = calloc(1, sizeof *cu);
    if (!k || !cu)
        st_fatal("out of host memory for the cuda kernels"); /* like st_alloc */
    *k = (st_kernels){.ops = &cuda_ops, .name = "cuda", .on_device = 1, .params_bf16 = 1,
                      .act_bytes = bf16 ? 2 : 4, .impl = cu};
    cu->bf16 = bf16;
    cudaError_t e = cuda_setup(cu);
    if (e != cudaSuccess) {
        /* Set-up allocates a few megabytes: out of memory there means the
         * device is already full, almost always of another process's. */
        st_error(NULL, "cannot set up the cuda kernels: %s; hint: %s", cudaGetErrorString(e),
                 e == cudaErrorMemoryAllocation
                     ? "another process may hold the GPU's memory (nvidia-smi lists them), "
                       "or set train.device = cpu"
                     : "check the GPU with nvidia-smi or set train.device = cpu");
        cuda_destroy(k);
        return ST_EXIT_FAILURE;
    }
    k->stream = cu->stream;
    *out = k;
    return 0;
}

#else /* !HAVE_CUDA */

int st_kernels_cuda_open(int bf16, st_kernels **out)
{
    (void)bf16;
    (void)out;
    st_error(NULL, "this build has no CUDA backend; hint: set train.device = cpu or "
             "rebuild with the CUDA toolkit");
    return ST_EXIT_USAGE;
}

#endif
