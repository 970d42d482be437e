/* CPU reference shims for the GPU op test (see cpu_ref.c). */
#ifndef ST_TEST_GPU_CPU_REF_H
#define ST_TEST_GPU_CPU_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* st_embed_forward / st_embed_backward with explicit tables; wpe / dwpe
 * NULL means Llama (no position table).  Return -1 when out of memory. */
int ref_embed_forward(float *out, const float *wte, const float *wpe,
                      const int32_t *tokens, int64_t B, int64_t T, int64_t C, int64_t V);
int ref_embed_backward(float *dwte, float *dwpe, const int32_t *tokens, const float *dout,
                       int64_t B, int64_t T, int64_t C, int64_t V);

#ifdef __cplusplus
}
#endif

#endif
