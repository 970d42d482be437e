/* The files of a Hugging Face model directory beside its weights
 * (hf_export_files.c): config.json for transformers' GPT2LMHeadModel or
 * LlamaForCausalLM, generation_config.json, and, given the model's
 * tokenizer, tokenizer.json and tokenizer_config.json, so that
 * from_pretrained, GenerationConfig and AutoTokenizer all load the
 * directory.  Written by `shardtrain export` and, without a tokenizer,
 * by training next to its final weights, which makes DIR/final a model
 * directory of its own. */
#ifndef ST_HF_EXPORT_H
#define ST_HF_EXPORT_H

#include "config/config.h"
#include "model/model.h"

#include <jansson.h>

/* tokenizer: a tokenizer.json or a directory holding one, or NULL.  The
 * tokenizer is loaded first (a kind shardtrain cannot read is refused, exit
 * 2) and must fit the model's vocabulary.  Returns an exit status, the
 * error printed. */
int st_hf_write_model_files(const char *dir, const st_model *m, const st_model_config *mc,
                            const char *tokenizer);

/* The tokenizer files (tokenizer.json, tokenizer_config.json) added to a
 * model directory that has its config.json, whose bos/eos ids, and
 * generation_config.json's, are then set from the tokenizer.  vocab_size,
 * max_len: the model's vocabulary (the tokenizer may not exceed it) and
 * sequence length. */
int st_hf_add_tokenizer(const char *dir, int64_t vocab_size, int64_t max_len,
                        const char *tokenizer);

/* Whether the tokenizer at `tokenizer` loads and fits a vocabulary of
 * vocab_size ids, as st_hf_add_tokenizer will check: 0, or an exit status
 * with the error printed.  Lets a caller refuse it before a long write. */
int st_hf_check_tokenizer(const char *tokenizer, int64_t vocab_size);

/* transformers' rope_scaling object for Llama 3.1's scaling (rope_type
 * llama3), or NULL when the model has none: config.json and the
 * checkpoint manifest both hold it in this form. */
json_t *st_hf_rope_scaling_json(const st_model_config *mc);

/* DIR/name holds j as indented JSON, written atomically; j is not
 * released.  Returns an exit status, the error printed. */
int st_hf_write_json(const char *dir, const char *name, json_t *j);

/* Copy src to dst, atomically.  Returns an exit status, the error printed. */
int st_hf_copy_file(const char *src, const char *dst);

#endif
