/* Writes a tiny model's weights, a batch, and shardtrain's CPU logits, loss
 * and gradients for tests/torch_ref.py to recompute independently in
 * PyTorch.  Usage: test_dump gpt2|llama OUT_DIR [tied 0|1 [llama3|masked|lora]]; llama3
 * turns on Llama 3.1's RoPE scaling with a pretraining length of 16, so
 * that at T = 12 and head size 8 every band of the formula is in use (one
 * frequency interpolated, three divided by the factor).  masked instead
 * marks some targets -1, as instruction data's prompt positions are (the
 * first five of each row and every fourth after), and normalises the loss
 * and gradient by the positions that count, which torch_ref.py checks
 * with cross_entropy's ignore_index.  lora adds LoRA adapters (rank 3,
 * alpha 5: scale 5/3, so a scale of 1 or alpha shows) on every target of
 * the arch, with random base weights (frozen) and random A and B (B
 * non-zero, so a wrong dA cannot hide); the dump then holds every base
 * tensor's values without gradient (the engine computes none) and every
 * adapter's values and gradient, PEFT's names without the
 * base_model.model. prefix, and config.json a "lora" object. */
#include "model_fixture.h"

#include <stdio.h>
#include <sys/stat.h>

static FILE *out;

static void record(const char *name, int dtype, int ndim, const int64_t *dims,
                   const void *data, size_t elem_count)
{
    uint32_t len = (uint32_t)strlen(name), dt = (uint32_t)dtype, nd = (uint32_t)ndim;
    fwrite(&len, 4, 1, out);
    fwrite(name, 1, len, out);
    fwrite(&dt, 4, 1, out);
    fwrite(&nd, 4, 1, out);
    fwrite(dims, 8, (size_t)ndim, out);
    fwrite(data, 4, elem_count, out);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5 || (strcmp(argv[1], "gpt2") && strcmp(argv[1], "llama")) ||
        (argc == 5 && strcmp(argv[4], "llama3") && strcmp(argv[4], "masked") &&
         strcmp(argv[4], "lora"))) {
        fprintf(stderr, "usage: test_dump gpt2|llama OUT_DIR [tied 0|1 [llama3|masked|lora]]\n");
        return 2;
    }
    int arch = strcmp(argv[1], "gpt2") == 0 ? ST_ARCH_GPT2 : ST_ARCH_LLAMA;
    int tied = argc >= 4 ? atoi(argv[3]) : arch == ST_ARCH_GPT2;
    const int64_t B = 2, T = 12;
    st_config cfg;
    fixture_config(&cfg, arch, tied, B, T);
    char extra[256] = ""; /* config.json's rope_scaling or lora object */
    const int masked = argc == 5 && !strcmp(argv[4], "masked");
    const int lora = argc == 5 && !strcmp(argv[4], "lora");
    if (lora) {
        cfg.lora.rank = 3;
        cfg.lora.alpha = 5.0;
        cfg.lora.dropout = 0.0;
        cfg.lora.target_mask = (1u << st_lora_n_targets(arch)) - 1;
        size_t n = (size_t)snprintf(extra, sizeof extra,
                                    ", \"lora\": {\"rank\": 3, \"alpha\": 5, \"targets\": [");
        for (int i = 0; i < st_lora_n_targets(arch); i++)
            n += (size_t)snprintf(extra + n, sizeof extra - n, "%s\"%s\"", i ? ", " : "",
                                  st_lora_target_name(arch, i));
        snprintf(extra + n, sizeof extra - n, "]}");
    } else if (argc == 5 && !masked) {
        cfg.model.rope_scaling = ST_ROPE_LLAMA3;
        cfg.model.rope_factor = 4.0;
        cfg.model.rope_low_freq_factor = 1.0;
        cfg.model.rope_high_freq_factor = 4.0;
        cfg.model.rope_original_seq_len = 16;
        snprintf(extra, sizeof extra,
                 ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 4.0, "
                 "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 16}");
    }
    st_model m;
    st_fsdp e;
    if (st_model_init(&m, &cfg.model) || st_model_add_lora(&m, &cfg.lora) ||
        st_engine_open(&e, &m, &cfg, NULL, st_kernels_cpu()))
        return 1;
    fixture_randomise(&e, 7);
    int32_t inputs[2 * 12], targets[2 * 12];
    fixture_tokens(inputs, targets, B * T, m.V, 11);
    int64_t counted = B * T;
    if (masked) {
        counted = 0;
        for (int64_t i = 0; i < B * T; i++) {
            if (i % T < 5 || i % 4 == 0)
                targets[i] = -1;
            else
                counted++;
        }
    }
    float *logits = malloc(sizeof(float) * (size_t)(B * T * m.V));
    double fwd = fx_forward(&e, inputs, targets, logits);
    st_fsdp_zero_grads(&e);
    double loss = fx_forward_backward(&e, inputs, targets, 1.0f / (float)counted);
    if (fwd != loss) {
        fprintf(stderr, "forward-only and training losses differ: %g vs %g\n", fwd, loss);
        return 1;
    }
    mkdir(argv[2], 0777);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", argv[2]);
    FILE *cj = fopen(path, "w");
    if (!cj)
        return 1;
    fprintf(cj,
            "{\"arch\": \"%s\", \"n_layer\": %lld, \"n_head\": %lld, \"n_kv_head\": %lld, "
            "\"d_model\": %lld, \"d_ff\": %lld, \"vocab_size\": %lld, \"seq_len\": %lld, "
            "\"rope_theta\": %.17g, \"norm_eps\": %.17g, \"tie_embeddings\": %s, "
            "\"batch\": %lld%s}\n",
            argv[1], (long long)m.L, (long long)m.H, (long long)m.KV, (long long)m.C,
            (long long)m.F, (long long)m.V, (long long)m.T, cfg.model.rope_theta,
            cfg.model.norm_eps, tied ? "true" : "false", (long long)B, extra);
    fclose(cj);
    snprintf(path, sizeof path, "%s/dump.bin", argv[2]);
    out = fopen(path, "wb");
    if (!out)
        return 1;
    fwrite("STDUMP1", 1, 8, out);
    char name[128];
    for (int i = 0; i < m.n_tensors && !lora; i++) {
        const st_tensor *t = &m.tensors[i];
        record(t->name, 0, t->ndim, t->shape, e.units[t->unit].params + t->offset, (size_t)t->numel);
        snprintf(name, sizeof name, "grad:%s", t->name);
        record(name, 0, t->ndim, t->shape, e.units[t->unit].grads + t->offset, (size_t)t->numel);
    }
    /* LoRA: the frozen base weights as the engine computes with them (no
     * gradient: it has none), then each adapter's values and gradient. */
    for (int u = 0; u < m.n_units && lora; u++) {
        float *base = malloc(sizeof(float) * (size_t)m.units[u].numel);
        if (!base || st_fsdp_gather_frozen(&e, u, base))
            return 1;
        for (int i = m.units[u].first_tensor; i < m.units[u].first_tensor + m.units[u].n_tensors;
             i++) {
            const st_tensor *t = &m.tensors[i];
            record(t->name, 0, t->ndim, t->shape, base + t->offset, (size_t)t->numel);
        }
        free(base);
    }
    for (int i = 0; i < m.n_lora_tensors && lora; i++) {
        const st_tensor *t = &m.lora_tensors[i];
        record(t->name, 0, t->ndim, t->shape, e.units[t->unit].params + t->offset, (size_t)t->numel);
        snprintf(name, sizeof name, "grad:%s", t->name);
        record(name, 0, t->ndim, t->shape, e.units[t->unit].grads + t->offset, (size_t)t->numel);
    }
    int64_t bt[2] = {B, T}, btv[3] = {B, T, m.V}, one[1] = {1};
    record("inputs", 1, 2, bt, inputs, (size_t)(B * T));
    record("targets", 1, 2, bt, targets, (size_t)(B * T));
    record("logits", 0, 3, btv, logits, (size_t)(B * T * m.V));
    float mean_loss = (float)(loss / (double)counted);
    record("loss", 0, 1, one, &mean_loss, 1);
    if (fclose(out) != 0)
        return 1;
    free(logits);
    st_fsdp_destroy(&e);
    st_model_free(&m);
    st_config_free(&cfg);
    return 0;
}
