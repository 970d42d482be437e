/* The CPU kernels backend (see kernels.h): host memory from the tracking
 * allocator, and thin adapters onto the model.h ops, cpu_ops.h and
 * st_adamw, which stay the numerical reference.  Nothing here computes
 * differently from the direct calls the engine used to make, so results are
 * bit-identical to them.
 *
 * Also the test-only "cpu-bf16params" backend: the same ops behind
 * params_bf16 = 1, unpacking the gathered bf16 words into fp32 before each
 * op.  bf16 words unpacked are exactly the rounded floats the engine would
 * otherwise have made, so a run on it must match a run on "cpu" bit for
 * bit; tests/kernels.sh checks that, which is how the engine's
 * params_bf16 path is tested before a backend with native bf16 kernels
 * exists.  It is reachable only through SHARDTRAIN_TEST_KERNELS, which
 * the selector (kernels_select.c) reads through base/test_faults.h. */
#include "kernels/kernels_backends.h"
#include "kernels/cpu_model.h"
#include "kernels/cpu_ops.h"
#include "base/log.h"
#include "kernels/cpu_adamw.h"

#include <string.h>

/* ---- memory ---------------------------------------------------------- */

static void *cpu_alloc(st_kernels *k, size_t bytes, st_mem_cat cat)
{
    (void)k;
    return st_alloc(bytes, cat);
}

static void cpu_free(st_kernels *k, void *p)
{
    (void)k;
    st_free(p);
}

static void cpu_zero(st_kernels *k, void *p, size_t bytes)
{
    (void)k;
    if (bytes)
        memset(p, 0, bytes);
}

/* Host memory both sides: every direction is a plain copy. */
static void cpu_copy(st_kernels *k, void *dst, const void *src, size_t bytes)
{
    (void)k;
    if (bytes)
        memcpy(dst, src, bytes);
}

/* Every op has finished when it returns. */
static void cpu_sync(st_kernels *k) { (void)k; }

static size_t cpu_block_acts_bytes(st_kernels *k, const st_model *m, int64_t B)
{
    (void)k;
    return sizeof(float) * st_block_acts_floats(m, B);
}

static size_t cpu_scratch_bytes(st_kernels *k, const st_model *m, int64_t B)
{
    (void)k;
    return sizeof(float) * st_model_scratch_floats(m, B);
}

/* ---- model ops ---------------------------------------------------------- */

/* The plain backend never sets params_bf16, so the engine never hands it
 * bf16 words; one that did would read garbage, so stop instead. */
static const float *f32(const void *p, st_dtype pdt)
{
    if (pdt != ST_DT_F32)
        st_bug("the cpu kernels were given bf16 parameters");
    return p;
}

static void cpu_embed_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                              const int32_t *tokens, int64_t B, void *out)
{
    (void)k;
    st_embed_forward(m, f32(p, pdt), tokens, B, out);
}

static void cpu_embed_backward(st_kernels *k, const st_model *m, float *g,
                               const int32_t *tokens, int64_t B, const void *dout)
{
    (void)k;
    st_embed_backward(m, g, tokens, B, dout);
}

static void cpu_block_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                              const st_lora_args *la, int64_t B, const void *in, void *out,
                              void *acts, void *scratch)
{
    (void)k;
    st_block_acts a;
    st_block_acts_bind(&a, m, B, acts);
    st_block_forward(m, f32(p, pdt), la, la ? f32(la->p, pdt) : NULL, B, in, out, &a, scratch);
}

static void cpu_block_backward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                               float *g, const st_lora_args *la, int64_t B, const void *in,
                               const void *acts, const void *dout, void *din, void *scratch)
{
    (void)k;
    st_block_acts a;
    /* bind only computes pointers; backward reads through them. */
    st_block_acts_bind(&a, m, B, (float *)acts);
    st_block_backward(m, f32(p, pdt), g, la, la ? f32(la->p, pdt) : NULL, B, in, &a, dout,
                      din, scratch);
}

static void cpu_head(st_kernels *k, const st_model *m, const void *head_p,
                     const void *embed_p, st_dtype pdt, float *head_g, float *embed_g,
                     int64_t B, const void *in, const int32_t *targets, float grad_scale,
                     void *din, float *logits_out, void *scratch, double *loss_sum)
{
    (void)k;
    *loss_sum += st_head_forward_backward(m, f32(head_p, pdt),
                                          embed_p ? f32(embed_p, pdt) : NULL, head_g,
                                          embed_g, B, in, targets, grad_scale, din,
                                          logits_out, scratch);
}

/* ---- engine helpers ------------------------------------------------------ */

static void cpu_pack_bf16(st_kernels *k, uint16_t *dst, const float *src, int64_t n)
{
    (void)k;
    st_pack_bf16(dst, src, n);
}

static void cpu_unpack_bf16(st_kernels *k, float *dst, const uint16_t *src, int64_t n)
{
    (void)k;
    st_unpack_bf16(dst, src, n);
}

static void cpu_round_bf16(st_kernels *k, float *dst, const float *src, int64_t n)
{
    (void)k;
    st_round_bf16(dst, src, n);
}

static void cpu_add_inplace(st_kernels *k, float *y, const float *x, int64_t n)
{
    (void)k;
    st_add_inplace(y, x, n);
}

/* One thread, in element order: the norm must not depend on the number of
 * threads (cpu_ops.h). */
static void cpu_sumsq(st_kernels *k, const float *x, int64_t n, double *acc)
{
    (void)k;
    double s = *acc;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    *acc = s;
}

/* st_adamw on each segment, the reference's bits unchanged (it is
 * elementwise, so splitting the shard differently changes nothing), and the
 * bf16 copy packed right after each segment's update, while it is still in
 * cache.  st_pack_bf16 of the fp32 result is by definition what the gather
 * would have packed, so bf16 runs keep their bits too. */
static void cpu_adamw_unit(st_kernels *k, const st_adamw_segment *segs, int n_segs, float *p,
                           const float *g, float *m, float *v, uint16_t *p_bf16,
                           const st_adamw_args *a)
{
    (void)k;
    if (a->gate && a->gate[ST_GATE_APPLY] == 0.0)
        return;
    const int64_t t = a->gate ? (int64_t)a->gate[ST_GATE_T] : a->t;
    const double scale =
        a->clip_sumsq ? a->grad_scale * st_clip_factor(*a->clip_sumsq, a->clip) : a->grad_scale;
    for (int i = 0; i < n_segs; i++) {
        const int64_t o = segs[i].offset, n = segs[i].length;
        st_adamw(p + o, g + o, m + o, v + o, n, a->lr, a->beta1, a->beta2, a->eps,
                 segs[i].decay ? a->weight_decay : 0.0, scale, t);
        if (p_bf16)
            st_pack_bf16(p_bf16 + o, p + o, n);
    }
}

static void cpu_step_verdict(st_kernels *k, double *rec, const double *losses, int n_losses,
                             const double *sumsq, int force_bad)
{
    (void)k;
    st_verdict_local(rec, losses, n_losses, sumsq, force_bad);
}

static void cpu_step_gate(st_kernels *k, double *gate, double *rec, int64_t limit,
                          double beta1, double beta2)
{
    (void)k;
    st_verdict_gate(gate, rec, limit, beta1, beta2);
}

#define CPU_COMMON                                                               \
    .alloc = cpu_alloc, .alloc_raw = cpu_alloc, .free = cpu_free, .zero = cpu_zero, \
    .to_host = cpu_copy,                                                          \
    .from_host = cpu_copy, .copy = cpu_copy, .sync = cpu_sync,                   \
    .block_acts_bytes = cpu_block_acts_bytes, .scratch_bytes = cpu_scratch_bytes, \
    .embed_backward = cpu_embed_backward, .pack_bf16 = cpu_pack_bf16,            \
    .unpack_bf16 = cpu_unpack_bf16, .round_bf16 = cpu_round_bf16,                \
    .add_inplace = cpu_add_inplace, .sumsq = cpu_sumsq, .adamw_unit = cpu_adamw_unit, \
    .step_verdict = cpu_step_verdict, .step_gate = cpu_step_gate, .destroy = NULL

static const st_kernels_ops cpu_ops = {
    CPU_COMMON,
    .embed_forward = cpu_embed_forward,
    .block_forward = cpu_block_forward,
    .block_backward = cpu_block_backward,
    .head_forward_backward = cpu_head,
};

/* Never written: the backend keeps no state, so one instance serves every
 * caller. */
static st_kernels cpu_kernels = {.ops = &cpu_ops, .name = "cpu", .act_bytes = 4};

st_kernels *st_kernels_cpu(void) { return &cpu_kernels; }

/* ---- cpu-bf16params (tests) --------------------------------------------- */

/* fp32 copy of the first numel elements of a gathered unit; in fp32 mode
 * the engine passes fp32 and this is the pointer itself. */
static const float *widen(const void *p, st_dtype pdt, int64_t numel)
{
    if (pdt == ST_DT_F32)
        return p;
    float *w = st_alloc(sizeof(float) * (size_t)numel, ST_MEM_COMM);
    st_unpack_bf16(w, p, numel);
    return w;
}

static void unwiden(const float *w, const void *p)
{
    if ((const void *)w != p)
        st_free((void *)w);
}

static int64_t block_numel(const st_model *m) { return m->units[1].numel; }

static void b16_embed_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                              const int32_t *tokens, int64_t B, void *out)
{
    (void)k;
    const float *w = widen(p, pdt, m->units[0].numel);
    st_embed_forward(m, w, tokens, B, out);
    unwiden(w, p);
}

/* The adapters widened as the base is: a copy of the args pointing at the
 * fp32 words. */
static const st_lora_args *widen_lora(const st_model *m, const st_lora_args *la, st_dtype pdt,
                                      st_lora_args *tmp)
{
    if (!la)
        return NULL;
    *tmp = *la;
    tmp->p = widen(la->p, pdt, m->units[1].lora_numel);
    return tmp;
}

static void unwiden_lora(const st_lora_args *w, const st_lora_args *la)
{
    if (la)
        unwiden(w->p, la->p);
}

static void b16_block_forward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                              const st_lora_args *la, int64_t B, const void *in, void *out,
                              void *acts, void *scratch)
{
    const float *w = widen(p, pdt, block_numel(m));
    st_lora_args tmp;
    const st_lora_args *wl = widen_lora(m, la, pdt, &tmp);
    cpu_block_forward(k, m, w, ST_DT_F32, wl, B, in, out, acts, scratch);
    unwiden(w, p);
    unwiden_lora(wl, la);
}

static void b16_block_backward(st_kernels *k, const st_model *m, const void *p, st_dtype pdt,
                               float *g, const st_lora_args *la, int64_t B, const void *in,
                               const void *acts, const void *dout, void *din, void *scratch)
{
    const float *w = widen(p, pdt, block_numel(m));
    st_lora_args tmp;
    const st_lora_args *wl = widen_lora(m, la, pdt, &tmp);
    cpu_block_backward(k, m, w, ST_DT_F32, g, wl, B, in, acts, dout, din, scratch);
    unwiden(w, p);
    unwiden_lora(wl, la);
}

static void b16_head(st_kernels *k, const st_model *m, const void *head_p,
                     const void *embed_p, st_dtype pdt, float *head_g, float *embed_g,
                     int64_t B, const void *in, const int32_t *targets, float grad_scale,
                     void *din, float *logits_out, void *scratch, double *loss_sum)
{
    const float *hw = widen(head_p, pdt, m->units[m->n_units - 1].numel);
    const float *ew = embed_p ? widen(embed_p, pdt, m->units[0].numel) : NULL;
    cpu_head(k, m, hw, ew, ST_DT_F32, head_g, embed_g, B, in, targets, grad_scale, din,
             logits_out, scratch, loss_sum);
    unwiden(hw, head_p);
    if (ew)
        unwiden(ew, embed_p);
}

static const st_kernels_ops cpu_bf16params_ops = {
    CPU_COMMON,
    .embed_forward = b16_embed_forward,
    .block_forward = b16_block_forward,
    .block_backward = b16_block_backward,
    .head_forward_backward = b16_head,
};

static st_kernels cpu_bf16params_kernels = {
    .ops = &cpu_bf16params_ops, .name = "cpu-bf16params", .params_bf16 = 1, .act_bytes = 4};

st_kernels *st_kernels_cpu_bf16params(void) { return &cpu_bf16params_kernels; }
