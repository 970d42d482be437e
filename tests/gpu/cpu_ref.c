/* C shims over the CPU reference functions whose headers are not C++-clean
 * or whose arguments are a whole model (the embedding takes an st_model and
 * a flat parameter buffer), for tests/gpu/test_cuda_ops.cu.  Compiled by
 * the C compiler and linked with libshardtrain.a. */
#include "cpu_ref.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu_model.h"

/* The embedding reads wte at p and, for GPT-2, wpe right after the V x C
 * token table; only arch, V, C and T of the model are used. */
static st_model embed_model(int gpt2, int64_t V, int64_t T, int64_t C)
{
    st_model m;
    memset(&m, 0, sizeof m);
    m.arch = gpt2 ? ST_ARCH_GPT2 : ST_ARCH_LLAMA;
    m.V = V;
    m.T = T;
    m.C = C;
    return m;
}

int ref_embed_forward(float *out, const float *wte, const float *wpe,
                      const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t V)
{
    st_model m = embed_model(wpe != NULL, V, T, C);
    float *p = malloc(sizeof(float) * (size_t)(V * C + T * C));
    if (!p)
        return -1;
    memcpy(p, wte, sizeof(float) * (size_t)(V * C));
    if (wpe)
        memcpy(p + V * C, wpe, sizeof(float) * (size_t)(T * C));
    st_embed_forward(&m, p, tokens, B, out);
    free(p);
    return 0;
}

int ref_embed_backward(float *dwte, float *dwpe, const int32_t *tokens, const float *dout,
                       int64_t B, int64_t T, int64_t C, int64_t V)
{
    st_model m = embed_model(dwpe != NULL, V, T, C);
    float *g = malloc(sizeof(float) * (size_t)(V * C + T * C));
    if (!g)
        return -1;
    memcpy(g, dwte, sizeof(float) * (size_t)(V * C));
    if (dwpe)
        memcpy(g + V * C, dwpe, sizeof(float) * (size_t)(T * C));
    st_embed_backward(&m, g, tokens, B, dout);
    memcpy(dwte, g, sizeof(float) * (size_t)(V * C));
    if (dwpe)
        memcpy(dwpe, g + V * C, sizeof(float) * (size_t)(T * C));
    free(g);
    return 0;
}
