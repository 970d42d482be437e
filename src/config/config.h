/* The resolved run configuration.  Values come, in increasing priority,
 * from the schema's defaults, the model preset, the config.json of a
 * Hugging Face directory named by model.init, the INI file and `-s
 * section.key=value` overrides.  The schema table in schema.c is the single
 * source of truth for the keys; this struct is its typed mirror.  Its
 * loading is config_load.c's (then resolve.c's), its checks limits.c's and
 * where each value came from origin.c's. */
#ifndef ST_CONFIG_H
#define ST_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum st_arch { ST_ARCH_GPT2, ST_ARCH_LLAMA };
enum st_rope_scaling { ST_ROPE_NONE, ST_ROPE_LLAMA3 };
enum st_device { ST_DEVICE_AUTO, ST_DEVICE_CPU, ST_DEVICE_CUDA };
enum st_precision { ST_PREC_FP32, ST_PREC_BF16 };
enum st_act_ckpt { ST_ACKPT_NONE, ST_ACKPT_FULL };
enum st_schedule { ST_SCHED_COSINE, ST_SCHED_LINEAR, ST_SCHED_CONSTANT, ST_SCHED_WSD };
enum st_strategy { ST_STRAT_FULL_SHARD, ST_STRAT_HYBRID_SHARD,
                   ST_STRAT_SHARD_GRAD_OP, ST_STRAT_NO_SHARD };
enum st_backend { ST_BACKEND_AUTO, ST_BACKEND_MPI, ST_BACKEND_NCCL };

/* Model shape and initialisation: everything the model layer needs. */
typedef struct {
    int arch;                /* enum st_arch */
    char *preset;            /* "" when none */
    int64_t n_layer, n_head, n_kv_head, d_model, d_ff, vocab_size, seq_len;
    int64_t vocab_padding;   /* stored vocabulary rows: a multiple of this */
    double rope_theta, norm_eps;
    int rope_scaling;        /* enum st_rope_scaling */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_seq_len;
    int tie_embeddings;      /* 0 or 1 */
    char *init;              /* "random" or a path to weights */
    double init_std;
} st_model_config;

typedef struct {
    char *train, *val;       /* file globs; val may be "" */
    char *tokenizer;         /* tokenizer.json or its directory; "" for byte level */
} st_data_config;

typedef struct {
    int64_t micro_batch, global_batch, steps, seed;
    double grad_clip;        /* 0 disables clipping */
    int64_t eval_every, eval_batches;
    int device;              /* enum st_device */
    int precision;           /* enum st_precision */
    int activation_checkpointing; /* enum st_act_ckpt */
    int64_t nonfinite_limit; /* consecutive skipped non-finite steps before save-and-stop */
} st_train_config;

typedef struct {
    double lr, min_lr;
    int64_t warmup_steps;
    int schedule;            /* enum st_schedule */
    double decay_frac;       /* wsd: fraction of steps spent decaying */
    double beta1, beta2, eps, weight_decay;
} st_optim_config;

typedef struct {
    int strategy;            /* enum st_strategy */
    int64_t shard_size;      /* 0 = ranks of one node */
    int backend;             /* enum st_backend */
    int64_t prefetch;
    int reduce_dtype;        /* enum st_precision */
    int no_sync;             /* accumulate full gradients, communicate on the last micro-step */
    double timeout_s;
} st_parallel_config;

typedef struct {
    char *dir;
    int64_t every, keep;
    char *resume;            /* "auto", "never" or a path */
    int requeue;             /* scontrol requeue after a preemption checkpoint */
} st_checkpoint_config;

typedef struct {
    char *dir;
    int64_t every;
    double peak_tflops;      /* 0 = unknown: MFU is not reported */
    int tensorboard;         /* write TensorBoard event files beside metrics.jsonl */
    int plot;                /* write LOG_DIR/plot.svg at the end of training */
} st_log_config;

/* The layers LoRA can target, per arch, in a block's order: bit i of
 * st_lora_config.target_mask is st_lora_target_name(arch, i) (schema.c). */
#define ST_LORA_MAX_TARGETS 7
int st_lora_n_targets(int arch);
const char *st_lora_target_name(int arch, int i);

/* LoRA adapters (lora.rank > 0): the base weights freeze, and only a
 * low-rank update of the targeted matrices trains.  targets is the text as
 * given; target_mask its bits in st_lora_targets' order for the arch, set
 * by validation. */
typedef struct {
    int64_t rank;            /* 0: no LoRA, full fine-tuning */
    double alpha;            /* scale of the update is alpha / rank */
    double dropout;          /* of the adapters' input, in [0, 1) */
    char *targets;
    unsigned target_mask;
} st_lora_config;

typedef struct {
    st_model_config model;
    st_data_config data;
    st_train_config train;
    st_optim_config optim;
    st_parallel_config parallel;
    st_checkpoint_config checkpoint;
    st_log_config log;
    st_lora_config lora;
    char *path;              /* the INI file read, for messages */
    char *hf_config;         /* model.init's config.json when it gave keys, else NULL */
    struct st_config_origin *origin; /* where each key's value came from (schema.c) */
} st_config;

/* A `-s section.key=value` override from the command line. */
typedef struct {
    const char *text;        /* "section.key=value" as given */
    int argno;               /* its position on the command line, for messages */
} st_override;

/* Read, expand ${VAR}, apply overrides, resolve the preset and validate
 * (config_load.c).
 * On any error prints exactly one `shardtrain: error: FILE:LINE: ...; hint`
 * line and returns ST_EXIT_USAGE; 0 on success.  cfg is zeroed first and
 * must be released with st_config_free whatever the result. */
int st_config_load(st_config *cfg, const char *path,
                   const st_override *overrides, int n_overrides);
/* Defaults and preset resolution only, no file: for tests and tools. */
int st_config_defaults(st_config *cfg);
void st_config_free(st_config *cfg);


/* The name of an enum key's value (or a bool's "true"/"false"), from the
 * schema (schema.c); "?" for a value or key it does not have. */
const char *st_enum_name(const char *section, const char *key, int value);

#ifdef __cplusplus
}
#endif

#endif
