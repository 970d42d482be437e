/* LoRA adapters as files (lora_files.c): merged into the base weights, or
 * written as the adapter directory Hugging Face's PEFT loads
 * (adapter_model.safetensors and adapter_config.json).  Used by training's
 * final weights and by `shardtrain export`. */
#ifndef ST_LORA_FILES_H
#define ST_LORA_FILES_H

#include "model/model.h"

/* The base weights the adapters merge into: init's Hugging Face files
 * (headers read and checked once, by st_lora_base_open), or for init
 * "random" what the initialisation seed makes.  Training kept the base in
 * the compute dtype; merging into the fp32 base instead keeps a bf16 run's
 * merged weights what peft's merge of its adapter gives. */
typedef struct st_lora_base st_lora_base;

/* Returns an exit status, the error printed; *b is NULL then.  m and mc
 * must outlive *b. */
int st_lora_base_open(const char *init, const st_model *m, const st_model_config *mc,
                      uint64_t seed, st_lora_base **b);
/* NULL is allowed. */
void st_lora_base_close(st_lora_base *b);

/* Unit u's merged weights into dst (its numel floats, host fp32): the base
 * plus scale * B A of every adapter in lora (unit u's adapter buffer), in
 * each weight's storage layout: what PEFT's merge_and_unload computes.
 * One unit at a time, as the final weights and export stream them.
 * Returns an exit status, the error printed. */
int st_lora_merged_unit(st_lora_base *b, int u, const float *lora, float *dst);

/* DIR/adapter_model.safetensors and DIR/adapter_config.json (DIR is
 * created).  base_name goes to base_model_name_or_path.  Returns an exit
 * status, the error printed. */
int st_lora_write_adapter(const char *dir, const st_model *m, float *const *lora,
                          const char *base_name);

#endif
