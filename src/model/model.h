/* The model: parameter layout (named tensors grouped into units),
 * initialisation and FLOP count.  The math of each unit lives with the
 * backends (kernels/cpu_model.h, cuda/model_cuda.h).
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

#include "base/rng.h"
#include "config/config.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* LoRA: the unit's adapter part, a second flat buffer (block units
     * only; 0 elsewhere and without LoRA). */
    int first_lora, n_lora;
    int64_t lora_numel;
} st_unit;

/* LoRA adapters (st_model_add_lora).  Each targeted matrix W of every
 * block gets A [rank, in] and B [out, rank]; the layer computes
 * y = x W' + scale * (dropout(x) A^T) B^T, with scale = alpha / rank, as
 * PEFT's LoRA layers do.  The base weights are then frozen and only the
 * adapters train, so the model has two parts: the base (units' flat
 * buffers, tensors) and the adapters (each block's adapter buffer,
 * lora_tensors, named as PEFT names them without its base_model.model.
 * prefix).  What trains (st_model_train_*) is the adapters when rank > 0,
 * else the base. */
typedef struct {
    int rank;                /* 0: no adapters */
    double alpha;
    float scale;             /* alpha / rank */
    double dropout;
    unsigned targets;        /* bit i: st_lora_target_name(arch, i) */
    /* Per target, the same in every block: the base weight's index in
     * the block's tensors, its in and out features, and the offsets of A
     * and B in the block's adapter buffer (-1: not targeted). */
    int base[ST_LORA_MAX_TARGETS];
    int64_t in[ST_LORA_MAX_TARGETS], out[ST_LORA_MAX_TARGETS];
    int64_t a_off[ST_LORA_MAX_TARGETS], b_off[ST_LORA_MAX_TARGETS];
} st_model_lora;

typedef struct {
    int arch;                /* enum st_arch */
    int64_t L, C, H, KV, hd, F, V, T;
    /* Stored vocabulary rows: V rounded up to model.vocab_padding.  The
     * token embedding and the untied output weight are each their unit's
     * last tensor, and the (Vp - V) x C zero rows after them are the
     * unit's vocabulary tail (st_model_vocab_tail): storage the engine
     * shards and gathers like its other padding, which no tensor, loss,
     * checkpoint tensor or export sees. */
    int64_t Vp;
    int tied;
    float eps;
    double init_std;
    int n_units;
    st_unit *units;
    int n_tensors;
    st_tensor *tensors;
    int64_t n_params;        /* distinct parameters (tied weights once) */
    float *rope_cos, *rope_sin; /* [T, hd/2], llama only */
    st_model_lora lora;
    int n_lora_tensors;
    st_tensor *lora_tensors;
} st_model;

/* Build the layout from a validated config.  Returns 0, or ST_EXIT_USAGE
 * with a message for shapes the kernels cannot run. */
int st_model_init(st_model *m, const st_model_config *cfg);
void st_model_free(st_model *m);
const st_tensor *st_model_find(const st_model *m, const char *name);
/* The head is the last unit.  Inline so that the CUDA units
 * (cuda/model_cuda.cu) need nothing back from libshardtrain.a. */
static inline int st_model_head_unit(const st_model *m) { return m->n_units - 1; }

/* Add the adapters lc describes (nothing when lc->rank is 0; the config
 * layer has validated the targets).  Returns 0. */
int st_model_add_lora(st_model *m, const st_lora_config *lc);

/* LoRA dropout's decision for element col (of width `width`) of row n
 * (sequence first_seq + n / T, position n % T) of target `target`'s input
 * in block `layer` at optimizer step `step`: kept when a uniform draw from
 * (seed, where, element) is at least `dropout`.  kernels/lora_args.h's st_lora_keep
 * wraps it; inline and host/device (base/rng.h) so that the CUDA kernels
 * (cuda/model_common.cu) compute the same mask from the same text. */
static inline ST_RNG_HD int st_lora_keep_at(uint64_t seed, int64_t layer, int target,
                                            uint64_t step, int64_t first_seq, int64_t T,
                                            int64_t n, int64_t col, int64_t width,
                                            double dropout)
{
    const uint64_t where = ((uint64_t)layer << 8 | (uint64_t)target) << 40 ^ step;
    const uint64_t elem = ((uint64_t)(first_seq + n / T) * (uint64_t)T + (uint64_t)(n % T)) *
                              (uint64_t)width + (uint64_t)col;
    return st_uniform3_inline(seed ^ ((uint64_t)ST_RNG_DROPOUT << 56), where, elem) >= dropout;
}

/* What trains: the adapters with LoRA, else the base weights.  The engine
 * keeps gradients and optimizer state, and checkpoints keep their state,
 * for these tensors and unit parts only. */
static inline int st_model_n_train_tensors(const st_model *m)
{
    return m->lora.rank ? m->n_lora_tensors : m->n_tensors;
}
static inline const st_tensor *st_model_train_tensor(const st_model *m, int i)
{
    return m->lora.rank ? &m->lora_tensors[i] : &m->tensors[i];
}
static inline int64_t st_model_train_numel(const st_model *m, int u)
{
    return m->lora.rank ? m->units[u].lora_numel : m->units[u].numel;
}
/* The frozen part of unit u: its base weights with LoRA, else nothing. */
static inline int64_t st_model_frozen_numel(const st_model *m, int u)
{
    return m->lora.rank ? m->units[u].numel : 0;
}
/* Zero elements stored after unit u's tensors: the vocabulary padding
 * rows of its token embedding or output weight, else 0. */
static inline int64_t st_model_vocab_tail(const st_model *m, int u)
{
    const int ends_with_vocab = u == 0 || (u == st_model_head_unit(m) && !m->tied);
    return ends_with_vocab ? (m->Vp - m->V) * m->C : 0;
}
/* Stored sizes of unit u's trained and frozen parts when split over S
 * ranks: the elements, the vocabulary tail (in the part holding the base
 * weights), and zero padding to a multiple of S.  The engine allocates
 * from these and `shardtrain estimate` counts the same. */
static inline int64_t st_model_round_up(int64_t n, int64_t S) { return (n + S - 1) / S * S; }
static inline int64_t st_model_train_padded(const st_model *m, int u, int64_t S)
{
    const int64_t tail = m->lora.rank ? 0 : st_model_vocab_tail(m, u);
    return st_model_round_up(st_model_train_numel(m, u) + tail, S);
}
static inline int64_t st_model_frozen_padded(const st_model *m, int u, int64_t S)
{
    const int64_t tail = m->lora.rank ? st_model_vocab_tail(m, u) : 0;
    return st_model_round_up(st_model_frozen_numel(m, u) + tail, S);
}
/* The token embedding [V, C] (wte, embed_tokens): its element offset in
 * unit 0, where the tied head reads it too. */
static inline int64_t st_model_wte_offset(const st_model *m)
{
    return m->tensors[m->units[0].first_tensor + m->units[0].n_tensors - 1].offset;
}

/* Initial values of elements [lo, hi) of unit u's adapter buffer: A as
 * PEFT's kaiming_uniform_(a = sqrt(5)), uniform in +-1/sqrt(in); B zero, so
 * training starts from the base model. */
void st_model_lora_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                              float *out, uint64_t seed);
/* The largest unit's numel: the one buffer that holds any unit. */
int64_t st_model_largest_unit(const st_model *m);
/* The trained part's initial values: the adapters' with LoRA, else the
 * base weights' (st_model_init_range). */
void st_model_train_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                               float *out, uint64_t seed);

/* Initial values of elements [lo, hi) of unit u's flat buffer into out.
 * Each element's value depends only on (seed, tensor name, index), so any
 * rank can initialise any slice on its own. */
void st_model_init_range(const st_model *m, int u, int64_t lo, int64_t hi,
                         float *out, uint64_t seed);

/* RoPE's cos/sin tables [T, hd/2] for base theta, in double precision
 * rounded once to float (the CUDA kernels build the same tables). */
void st_rope_tables(float *cos_t, float *sin_t, int64_t T, int64_t hd, double theta);
/* The same for a model configuration: its rope_theta and, with
 * rope_scaling = llama3, Llama 3.1's frequency scaling (every model unit,
 * CPU or CUDA, reads these tables). */
void st_rope_tables_for(float *cos_t, float *sin_t, int64_t T, int64_t hd,
                        const st_model_config *cfg);

/* Training FLOPs per token: 6 x (matrix-multiply parameters, the output
 * head counted once even when tied) + 12 x n_layer x d_model x seq_len for
 * attention scores and values (forward + backward, causal mask ignored, as
 * PaLM's MFU convention).  With LoRA the frozen matrices count 4 (no
 * weight gradient) and the adapters 6. */
double st_model_flops_per_token(const st_model *m);

#ifdef __cplusplus
}
#endif

#endif
