/* The model: parameter layout (named tensors grouped into units) and the
 * forward and backward of each unit on the CPU backend.
 *
 * Units are what the FSDP engine gathers and shards: unit 0 holds the
 * embeddings, units 1..n_layer one transformer block each, the last unit
 * the final norm and the output head.  A unit's tensors live back to back
 * in one flat fp32 buffer, in the order of the tensor table, so a unit can
 * be gathered or reduced with a single collective.  With tied embeddings
 * the head has no weight of its own and reads the embedding unit's wte.
 *
 * Tensor names and shapes are Hugging Face transformers' (GPT2LMHeadModel,
 * whose Conv1D weights are stored [in, out], and LlamaForCausalLM, whose
 * Linear weights are stored [out, in]) so that import and export map one to
 * one. */
#ifndef ST_MODEL_H
#define ST_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum st_unit_kind { ST_UNIT_EMBED, ST_UNIT_BLOCK, ST_UNIT_HEAD };
enum st_init_kind { ST_INIT_NORMAL, ST_INIT_NORMAL_RESID, ST_INIT_ZERO, ST_INIT_ONE };

typedef struct {
    char name[80];
    int ndim;
    int64_t shape[2];
    int64_t numel;
    int unit;
    int64_t offset;          /* element offset inside the unit's flat buffer */
    int decay;               /* weight decay applies (matrices only) */
    int init;                /* enum st_init_kind */
} st_tensor;

typedef struct {
    int kind;                /* enum st_unit_kind */
    int layer;               /* block index, -1 otherwise */
    int first_tensor, n_tensors;
    int64_t numel;           /* unpadded element count */
} st_unit;

typedef struct {
    int arch;                /* enum st_arch */
    int64_t L, C, H, KV, hd, F, V, T;
    int tied;
    float eps;
    double init_std;
    int n_units;
    st_unit *units;
    int n_tensors;
    st_tensor *tensors;
    int64_t n_params;        /* distinct parameters (tied weights once) */
    float *rope_cos, *rope_sin; /* [T, hd/2], llama only */
} st_model;

/* Build the layout from a validated config.  Returns 0, or ST_EXIT_USAGE
 * with a message for shapes the kernels cannot run. */
int st_model_init(st_model *m, const st_model_config *cfg);
void st_model_free(st_model *m);
const st_tensor *st_model_find(const st_model *m, const char *name);
int st_model_head_unit(const st_model *m);

/* Initial values of elements [lo, hi) of unit u's flat buffer into out.
 * Each element's value depends only on (seed, tensor name, index), so any
 * rank can initialise any slice on its own. */
void st_model_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                         float *out, uint64_t seed);

/* Training FLOPs per token: 6 x (matrix-multiply parameters, the output
 * head counted once even when tied) + 12 x n_layer x d_model x seq_len for
 * attention scores and values (forward + backward, causal mask ignored, as
 * PaLM's MFU convention). */
double st_model_flops_per_token(const st_model *m);

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

void st_block_forward(const st_model *m, const float *p, int64_t B,
                      const float *in, float *out, st_block_acts *a);
/* g += parameter gradients; din overwritten. */
void st_block_backward(const st_model *m, const float *p, float *g, int64_t B,
                       const float *in, const st_block_acts *a,
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

#endif
