/* The work of `shardtrain export` (the command is cli/cmd_export.c): a
 * sharded checkpoint to a Hugging Face model directory (model.safetensors
 * with Hugging Face tensor names, and a config.json that transformers'
 * GPT2LMHeadModel or LlamaForCausalLM accepts).  The shards are read
 * through the same ranged, verified reader as resume, whole unit by whole
 * unit, so export works for a checkpoint of any world size and strategy.
 * Every file is written into a stage inside OUT_DIR (base/stage_dir.h) and
 * moved into OUT_DIR only when all are written, so that an export that
 * fails part-way leaves OUT_DIR as it was, never new weights beside an old
 * config.json. */
#include "ckpt/checkpoint.h"
#include "base/log.h"
#include "model/model.h"
#include "base/files.h"
#include "base/stage_dir.h"
#include "hf/hf_export.h"
#include "hf/hf_import.h"
#include "hf/lora_files.h"
#include "hf/safetensors_write.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

/* The final weights of a run (DIR/final, or a directory holding
 * model.safetensors beside the config.json training writes there), for a
 * run that kept no step checkpoint: copied as they are.  Returns 0 and sets
 * out (n bytes) when path is such a directory; -1 when it is not. */
static int final_weights_dir(const char *path, char *out, size_t n)
{
    struct stat st;
    char f[8400];
    const char *cand[2] = {"%s/final", "%s"};
    for (int i = 0; i < 2; i++) {
        snprintf(out, n, cand[i], path);
        snprintf(f, sizeof f, "%s/model.safetensors", out);
        if (stat(f, &st) == 0 && S_ISREG(st.st_mode))
            return 0;
    }
    return -1;
}

static int export_final(const char *final, const char *into, const char *tokenizer)
{
    char src[8400], dst[8400];
    snprintf(src, sizeof src, "%s/config.json", final);
    struct stat st;
    if (stat(src, &st) != 0) {
        st_error(final, "final weights without config.json (written by a shardtrain before "
                 "export could read them); hint: export a step checkpoint, or train again");
        return ST_EXIT_USAGE;
    }
    int rc = 0;
    /* The first two are required; the others are there when training had
     * them (data.tokenizer). */
    const char *files[] = {"model.safetensors", "config.json", "generation_config.json",
                           "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 5 && !rc; i++) {
        snprintf(src, sizeof src, "%s/%s", final, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", into, files[i]);
        if (i < 2 || stat(src, &st) == 0)
            rc = st_hf_copy_file(src, dst);
    }
    if (rc || !tokenizer)
        return rc;
    /* The vocabulary and length the tokenizer is checked against. */
    json_error_t err;
    snprintf(src, sizeof src, "%s/config.json", into);
    json_t *cfg = json_load_file(src, 0, &err);
    json_int_t V = json_integer_value(json_object_get(cfg, "vocab_size"));
    json_t *t = json_object_get(cfg, "n_positions");
    json_int_t T = json_integer_value(t ? t : json_object_get(cfg, "max_position_embeddings"));
    json_decref(cfg);
    if (V <= 0 || T <= 0) {
        st_error(src, "no vocab_size or sequence length in config.json; hint: it is not "
                 "shardtrain's; export a step checkpoint");
        return ST_EXIT_USAGE;
    }
    return st_hf_add_tokenizer(into, V, T, tokenizer);
}

/* A LoRA run's final directory holds the merged model, and its adapters
 * in final/adapter: --adapter copies those. */
static int export_final_adapter(const char *final, const char *into)
{
    char src[8400], dst[8400];
    int rc = 0;
    const char *files[] = {"adapter_model.safetensors", "adapter_config.json"};
    for (int i = 0; i < 2 && !rc; i++) {
        snprintf(src, sizeof src, "%s/adapter/%s", final, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", into, files[i]);
        struct stat st;
        if (stat(src, &st) != 0) {
            st_error(final, "no LoRA adapters in these final weights (no adapter/%s); hint: "
                     "--adapter exports a run with lora.rank > 0", files[i]);
            return ST_EXIT_USAGE;
        }
        rc = st_hf_copy_file(src, dst);
    }
    return rc;
}

static int out_of_memory(const char *dir)
{
    st_error(dir, "out of memory exporting");
    return ST_EXIT_FAILURE;
}

/* What the writer streams: unit u read from the checkpoint's shards (a
 * full checkpoint), or (LoRA) unit u's base weights with its adapters,
 * read beforehand, merged in; one unit-sized buffer, so export holds one
 * unit of the model at a time, never all of it. */
typedef struct {
    st_ckpt *c;
    const st_model *m;
    float *buf;
    float **adapters;     /* LoRA: each unit's trained adapters; NULL: full */
    st_lora_base *base;   /* LoRA: the base model, opened once */
    int rc;
} export_source;

static const float *export_unit(int u, void *ctx)
{
    export_source *x = ctx;
    char err[1024];
    if (x->adapters)
        x->rc = st_lora_merged_unit(x->base, u, x->adapters[u], x->buf);
    else if ((x->rc = st_ckpt_read_range(x->c, u, 0, 0, x->m->units[u].numel, x->buf, err,
                                           sizeof err))) {
        st_error(NULL, "%s", err);
    }
    return x->rc ? NULL : x->buf;
}

/* The seed of a random LoRA base (the run's train.seed); an error when the
 * saved config has none. */
static int random_base_seed(const st_ckpt *c, const char *base, uint64_t *seed)
{
    json_t *js = json_object_get(
        json_object_get(json_object_get((json_t *)c->root, "config"), "train"), "seed");
    if (strcmp(base, "random") == 0 && !json_is_integer(js)) {
        st_error(c->manifest_path, "no train.seed in the saved config to remake the random "
                 "base weights; hint: give the base model with --base");
        return ST_EXIT_USAGE;
    }
    *seed = (uint64_t)json_integer_value(js);
    return 0;
}

int st_ckpt_export_hf(const char *ckpt, const char *out_dir, const char *tokenizer,
                      int adapter, const char *base, char *dir, size_t n, int64_t *step)
{
    char err[1024], path[8400];
    st_stage stage;
    int rc = st_ckpt_resolve(ckpt, dir, n, err, sizeof err);
    if (rc && final_weights_dir(ckpt, dir, n) == 0) {
        *step = -1;
        if ((rc = st_stage_check_whole(dir)) || (rc = st_stage_begin(&stage, out_dir)))
            return rc;
        return st_stage_finish(&stage, adapter ? export_final_adapter(dir, stage.dir)
                                         : export_final(dir, stage.dir, tokenizer));
    }
    st_ckpt c;
    memset(&c, 0, sizeof c);
    rc = rc ? rc : st_ckpt_open(&c, dir, NULL, err, sizeof err);
    if (rc) {
        st_error(NULL, "%s", err);
        st_ckpt_close(&c);
        return rc;
    }
    /* The saved shape builds the model whose tensor table names the
     * tensors; its table must then match the manifest's entry by entry. */
    st_model m = {0};
    st_model_config mc = c.model;
    st_lora_config lc = c.lora;
    if ((rc = st_model_init(&m, &mc)) || (rc = st_model_add_lora(&m, &lc))) {
        st_ckpt_close(&c);
        return rc;
    }
    char lora_base[4096];
    snprintf(lora_base, sizeof lora_base, "%s", base ? base : c.lora_base);
    st_ckpt_close(&c);
    if (adapter && !m.lora.rank) {
        st_error(dir, "not a LoRA checkpoint (it trained the full model); hint: export it "
                 "without --adapter");
        st_model_free(&m);
        return ST_EXIT_USAGE;
    }
    rc = st_ckpt_open(&c, dir, &m, err, sizeof err);
    if (rc)
        st_error(NULL, "%s", err);
    /* A tokenizer that does not fit is refused before the weights are
     * streamed, not after. */
    if (!rc && tokenizer && !adapter)
        rc = st_hf_check_tokenizer(tokenizer, m.V);
    export_source x = {.c = &c, .m = &m};
    /* A LoRA checkpoint's shards hold the adapters alone: small, read
     * whole first. */
    if (!rc && m.lora.rank && !(x.adapters = calloc((size_t)m.n_units, sizeof(float *))))
        rc = out_of_memory(dir);
    for (int u = 0; x.adapters && u < m.n_units && !rc; u++) {
        const int64_t tn = st_model_train_numel(&m, u);
        if (!(x.adapters[u] = malloc(sizeof(float) * (size_t)(tn ? tn : 1))))
            rc = out_of_memory(dir);
        else if ((rc = st_ckpt_read_range(&c, u, 0, 0, tn, x.adapters[u], err, sizeof err)))
            st_error(NULL, "%s", err);
    }
    /* The stage (and OUT_DIR) is made once everything read is known good:
     * a bad base or checkpoint leaves no directory behind. */
    int staged = 0;
    if (!rc && adapter) {
        staged = !(rc = st_stage_begin(&stage, out_dir));
        rc = rc ? rc : st_lora_write_adapter(stage.dir, &m, x.adapters, lora_base);
    } else if (!rc) {
        if (!(x.buf = malloc(sizeof(float) * (size_t)st_model_largest_unit(&m))))
            rc = out_of_memory(dir);
        uint64_t seed = 0;
        if (!rc && m.lora.rank)
            rc = random_base_seed(&c, lora_base, &seed);
        if (!rc && m.lora.rank)
            rc = st_lora_base_open(lora_base, &m, &c.model, seed, &x.base);
        staged = !rc && !(rc = st_stage_begin(&stage, out_dir));
        snprintf(path, sizeof path, "%s/model.safetensors", stage.dir);
        rc = rc ? rc : st_safetensors_stream_model(path, &m, export_unit, &x);
        if (!rc)
            rc = st_hf_write_model_files(stage.dir, &m, &c.model, tokenizer);
    }
    rc = x.rc ? x.rc : rc;   /* the source's status says why the write stopped */
    if (staged)
        rc = st_stage_finish(&stage, rc);
    if (!rc)
        *step = c.step;
    for (int u = 0; x.adapters && u < m.n_units; u++)
        free(x.adapters[u]);
    free(x.adapters);
    free(x.buf);
    st_lora_base_close(x.base);
    st_ckpt_close(&c);
    st_model_free(&m);
    return rc;
}
