/* C shims over the CPU reference functions whose headers are not C++-clean
 * or whose arguments are a whole model (the embedding takes an st_model and
 * a flat parameter buffer), for tests/gpu/test_cuda_ops.cu.  Compiled by
 * the C compiler and linked with libshardtrain.a. */
#include "cpu_ref.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_model.h"

/* The embedding unit as src/model/model.c lays it out: [wpe, wte] for
 * GPT-2, [embed_tokens] for Llama (st_model_wte_offset finds the token
 * table).  Only arch, V, C, T and unit 0's tensor table are used. */
typedef struct {
    st_model m;
    st_unit unit;
    st_tensor tensors[2];
} embed_model;

static void embed_model_init(embed_model *e, int gpt2, int64_t V, int64_t T, int64_t C)
{
    memset(e, 0, sizeof *e);
    e->m.arch = gpt2 ? ST_ARCH_GPT2 : ST_ARCH_LLAMA;
    e->m.V = e->m.Vp = V;
    e->m.T = T;
    e->m.C = C;
    e->m.n_units = 1;
    e->m.units = &e->unit;
    e->m.tensors = e->tensors;
    e->m.n_tensors = e->unit.n_tensors = gpt2 ? 2 : 1;
    e->tensors[e->unit.n_tensors - 1].offset = gpt2 ? T * C : 0;
}

/* The flat unit buffer from the two tables, and back. */
static float *embed_pack(int64_t V, int64_t T, int64_t C, const float *wte, const float *wpe)
{
    float *p = malloc(sizeof(float) * (size_t)(V * C + T * C));
    if (!p)
        return NULL;
    const int64_t at = wpe ? T * C : 0;
    memcpy(p + at, wte, sizeof(float) * (size_t)(V * C));
    if (wpe)
        memcpy(p, wpe, sizeof(float) * (size_t)(T * C));
    return p;
}

int ref_embed_forward(float *out, const float *wte, const float *wpe,
                      const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t V)
{
    embed_model e;
    embed_model_init(&e, wpe != NULL, V, T, C);
    float *p = embed_pack(V, T, C, wte, wpe);
    if (!p)
        return -1;
    st_embed_forward(&e.m, p, tokens, B, out);
    free(p);
    return 0;
}

int ref_embed_backward(float *dwte, float *dwpe, const int32_t *tokens, const float *dout,
                       int64_t B, int64_t T, int64_t C, int64_t V)
{
    embed_model e;
    embed_model_init(&e, dwpe != NULL, V, T, C);
    float *g = embed_pack(V, T, C, dwte, dwpe);
    if (!g)
        return -1;
    st_embed_backward(&e.m, g, tokens, B, dout);
    const int64_t at = dwpe ? T * C : 0;
    memcpy(dwte, g + at, sizeof(float) * (size_t)(V * C));
    if (dwpe)
        memcpy(dwpe, g, sizeof(float) * (size_t)(T * C));
    free(g);
    return 0;
}
