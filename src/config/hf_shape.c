/* Reading a model shape from a Hugging Face config.json (hf_shape.h).
 * The field names are transformers' for GPT2LMHeadModel and
 * LlamaForCausalLM.  Llama's max_position_embeddings is not a training
 * length (Llama 3's is 131,072) and RoPE needs no table of that size, so it
 * does not set seq_len; GPT-2's n_positions does, since the position table
 * is read whole.  Malformed values are skipped here and reported by the
 * config.json check at load (hf/hf_config.c), which names the field. */
#include "config/hf_shape.h"
#include "config/config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int64_t int_field(json_t *root, const char *k)
{
    json_t *v = json_object_get(root, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v)
                                                           : -1;
}

static double real_field(json_t *root, const char *k)
{
    json_t *v = json_object_get(root, k);
    return json_is_number(v) && json_number_value(v) > 0 ? json_number_value(v) : -1.0;
}

static int bool_field(json_t *root, const char *k)
{
    json_t *v = json_object_get(root, k);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

int st_hf_shape_read(const char *init, st_hf_shape *s, char **path)
{
    struct stat st;
    *path = NULL;
    if (!init || stat(init, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    size_t n = strlen(init) + sizeof "/config.json";
    char *p = malloc(n);
    if (!p)
        return -1;
    snprintf(p, n, "%s/config.json", init);
    json_t *root = json_load_file(p, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        free(p);
        return 0; /* absent or unreadable: the load reports a broken one */
    }
    const char *type = json_string_value(json_object_get(root, "model_type"));
    const int gpt2 = type && strcmp(type, "gpt2") == 0;
    *s = (st_hf_shape){.arch = gpt2 ? ST_ARCH_GPT2
                               : type && strcmp(type, "llama") == 0 ? ST_ARCH_LLAMA : -1};
    s->n_layer = int_field(root, gpt2 ? "n_layer" : "num_hidden_layers");
    s->n_head = int_field(root, gpt2 ? "n_head" : "num_attention_heads");
    s->n_kv_head = gpt2 ? -1 : int_field(root, "num_key_value_heads");
    s->d_model = int_field(root, gpt2 ? "n_embd" : "hidden_size");
    s->d_ff = int_field(root, gpt2 ? "n_inner" : "intermediate_size");
    s->vocab_size = int_field(root, "vocab_size");
    s->seq_len = gpt2 ? int_field(root, "n_positions") : -1;
    s->norm_eps = real_field(root, gpt2 ? "layer_norm_epsilon" : "rms_norm_eps");
    s->rope_theta = gpt2 ? -1.0 : real_field(root, "rope_theta");
    /* transformers' defaults when absent: GPT2Config ties, LlamaConfig
     * does not. */
    s->tie_embeddings = bool_field(root, "tie_word_embeddings");
    if (s->tie_embeddings < 0 && s->arch >= 0)
        s->tie_embeddings = gpt2;
    /* Llama 3.1's rope_scaling; another kind is refused by the check. */
    json_t *rs = json_object_get(root, "rope_scaling");
    json_t *rt = json_object_get(rs, "rope_type");
    const char *rtype = json_string_value(rt ? rt : json_object_get(rs, "type"));
    if (!gpt2 && rtype && strcmp(rtype, "llama3") == 0) {
        s->rope_llama3 = 1;
        s->rope_factor = real_field(rs, "factor");
        s->rope_low_freq_factor = real_field(rs, "low_freq_factor");
        s->rope_high_freq_factor = real_field(rs, "high_freq_factor");
        s->rope_original_seq_len = int_field(rs, "original_max_position_embeddings");
    }
    json_decref(root);
    *path = p;
    return 1;
}
