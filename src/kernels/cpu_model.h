/* The forward and backward of each unit on the CPU backend: the embedding,
 * a transformer block (GPT-2 or Llama) and the head with a fused softmax
 * cross-entropy, plus the saved activations and scratch they need.  The
 * engine reaches these only through kernels.h; the estimator sizes memory
 * with the same functions. */
#ifndef ST_CPU_MODEL_H
#define ST_CPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/lora_args.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saved activations of one block for B sequences (N = B x T rows). */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;
    float *qkv;              /* [N, (H + 2 KV) hd]: q | k | v, after RoPE */
    float *att;              /* [N, C] attention output before projection */
    float *lse;              /* [B, H, T] */
    float *res_mid;          /* [N, C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc;               /* gpt2: [N, F] pre-GELU; llama: [N, 2F] gate | up */
    float *act;              /* [N, F] GELU or SwiGLU output */
} st_block_acts;

size_t st_block_acts_floats(const st_model *m, int64_t B);
void st_block_acts_bind(st_block_acts *a, const st_model *m, int64_t B, float *mem);
/* Scratch floats any backward or the head needs for B sequences. */
size_t st_model_scratch_floats(const st_model *m, int64_t B);

/* out[B*T, C] = embeddings of tokens (+ positions for gpt2). */
void st_embed_forward(const st_model *m, const float *p, const int32_t *tokens,
                      int64_t B, float *out);
/* g += d(embedding) */
void st_embed_backward(const st_model *m, float *g, const int32_t *tokens,
                       int64_t B, const float *dout);

/* la and lp: the block's LoRA adapters (cpu_lora.h), NULL without them;
 * the adapters use scratch (which may then not be NULL). */
void st_block_forward(const st_model *m, const float *p, const st_lora_args *la,
                      const float *lp, int64_t B, const float *in, float *out,
                      st_block_acts *a, float *scratch);
/* g += parameter gradients (none when g is NULL: frozen base weights);
 * la->g += the adapters' gradients; din overwritten. */
void st_block_backward(const st_model *m, const float *p, float *g, const st_lora_args *la,
                       const float *lp, int64_t B, const float *in, const st_block_acts *a,
                       const float *dout, float *din, float *scratch);

/* Final norm, output head and softmax cross-entropy, forward and (when
 * grad_scale != 0) backward in one pass, in row chunks so the B x T x V
 * logits never exist at once.  Returns the summed loss over B*T tokens.
 * head_g/embed_g/din are accumulated (g) or overwritten (din); logits_out,
 * when not NULL, receives the [B*T, V] logits (tests only). */
double st_head_forward_backward(const st_model *m, const float *head_p,
                                const float *embed_p, float *head_g,
                                float *embed_g, int64_t B, const float *in,
                                const int32_t *targets, float grad_scale,
                                float *din, float *logits_out, float *scratch);

#ifdef __cplusplus
}
#endif

#endif
