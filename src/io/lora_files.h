/* LoRA adapters as files (lora_files.c): merged into the base weights, or
 * written as the adapter directory Hugging Face's PEFT loads
 * (adapter_model.safetensors and adapter_config.json).  Used by training's
 * final weights and by `shardtrain export`. */
#ifndef ST_LORA_FILES_H
#define ST_LORA_FILES_H

#include "model/model.h"

/* base (unit u's base weights, its numel floats, host fp32) += scale * B A
 * of every adapter in lora (unit u's adapter buffer), in each weight's
 * storage layout: what PEFT's merge_and_unload computes.  The embedding
 * and head units have no adapters. */
void st_lora_merge_unit(const st_model *m, int u, float *base, const float *lora);

/* The base weights of unit u that its adapters merge into, in fp32 on the
 * host (dst: the unit's numel floats): init's Hugging Face files, or for
 * init "random" the initialisation seed makes.  Training kept the base in
 * the compute dtype; merging into these instead keeps a bf16 run's merged
 * weights what peft's merge of its adapter gives.  One unit at a time, as
 * the final weights and export stream them.  Returns an exit status, the
 * error printed. */
int st_lora_load_base_unit(const char *init, const st_model *m, const st_model_config *mc,
                           uint64_t seed, int u, float *dst);

/* DIR/adapter_model.safetensors and DIR/adapter_config.json (DIR is
 * created).  base_name goes to base_model_name_or_path.  Returns an exit
 * status, the error printed. */
int st_lora_write_adapter(const char *dir, const st_model *m, float *const *lora,
                          const char *base_name);

#endif
