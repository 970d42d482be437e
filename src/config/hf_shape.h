/* The model shape a Hugging Face directory's config.json gives
 * (hf_shape.c), for model.init pointing at a released model: its values
 * stand in for every [model] key the file and command line leave out, as a
 * preset's do, and `shardtrain check` says they came from config.json.
 * Explicit keys still win; hf/hf_config.c then compares the file with the
 * resolved keys, so a key that contradicts the weights stops the run
 * naming the config.json field. */
#ifndef ST_HF_SHAPE_H
#define ST_HF_SHAPE_H

#include <stdint.h>

/* A field the file lacks (or gives with the wrong JSON type, which the
 * later check reports) is left at -1. */
typedef struct {
    int arch;                /* enum st_arch, -1 for another model_type */
    int64_t n_layer, n_head, n_kv_head, d_model, d_ff, vocab_size, seq_len;
    double rope_theta, norm_eps;
    int tie_embeddings;
    int rope_llama3;          /* rope_scaling of rope_type llama3: the four below */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_seq_len;
} st_hf_shape;

/* init: model.init.  Returns 1 and fills *s and *path (malloc'd: the
 * config.json read) when init is a directory holding a readable
 * config.json that is a JSON object; 0 when it is not such a directory
 * (a .safetensors file, "random", no config.json), which leaves the
 * shape to the [model] keys; -1 when out of memory. */
int st_hf_shape_read(const char *init, st_hf_shape *s, char **path);

#endif
