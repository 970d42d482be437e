/* The schema table and the model presets: the single source of truth for
 * every configuration key.  config_load.c parses and validates against
 * it, the CLI lists it, and st_schema_print_man() turns it into the key
 * reference of shardtrain.ini(5) at build time, so the documentation
 * cannot drift from what the parser accepts. */
#include "config/schema.h"

#include "config/config.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const arch_v[] = {"gpt2", "llama", NULL};
static const char *const rope_scaling_v[] = {"none", "llama3", NULL};
static const char *const device_v[] = {"auto", "cpu", "cuda", NULL};
static const char *const prec_v[] = {"fp32", "bf16", NULL};
static const char *const ackpt_v[] = {"none", "full", NULL};
static const char *const sched_v[] = {"cosine", "linear", "constant", "wsd", NULL};
static const char *const strat_v[] = {"full_shard", "hybrid_shard",
                                      "shard_grad_op", "no_shard", NULL};
static const char *const backend_v[] = {"auto", "mpi", "nccl", NULL};

#define OFF(f) offsetof(st_config, f)
#define ROW(sec, key, type, def, defdoc, min, max, fl, vals, doc, field) \
    {sec, key, type, def, defdoc, min, max, fl, vals, doc, OFF(field)}
/* Shorthands; the bounds read like the documentation: INT_IN(1, 64) is
 * "[1, 64]". */
/* Every integer key is bounded on both sides (issue 17: no value may
 * overflow a size computed from it); config/limits.c then bounds the
 * products of several keys. */
#define INT_IN(s, k, def, lo, hi, doc, f) \
    ROW(s, k, ST_T_INT, def, NULL, lo, hi, ST_R_MIN | ST_R_MAX, NULL, doc, f)
#define INT_DER_IN(s, k, dd, lo, hi, doc, f) \
    ROW(s, k, ST_T_INT, NULL, dd, lo, hi, ST_R_MIN | ST_R_MAX, NULL, doc, f)
/* 2^k bounds, spelt out so that the manual prints them as integers. */
#define P10 1024.0
#define P20 1048576.0
#define P24 16777216.0
#define P53 9007199254740992.0
#define G9 1e9
#define FLT(s, k, def, lo, hi, fl, doc, f) ROW(s, k, ST_T_FLOAT, def, NULL, lo, hi, fl, NULL, doc, f)
#define STR(s, k, def, doc, f) ROW(s, k, ST_T_STRING, def, NULL, 0, 0, 0, NULL, doc, f)
#define ENUM(s, k, def, v, doc, f) ROW(s, k, ST_T_ENUM, def, NULL, 0, 0, 0, v, doc, f)
#define GT0 (ST_R_MIN | ST_R_MIN_OPEN)
#define GE0 ST_R_MIN
#define UNIT_OPEN (ST_R_MIN | ST_R_MAX | ST_R_MAX_OPEN)   /* [0, 1) */

const st_key st_schema[] = {
    ENUM("model", "arch", "gpt2", arch_v,
         "Architecture: GPT-2 (learned positions, LayerNorm, GELU) or Llama (RoPE, RMSNorm, SwiGLU, GQA).",
         model.arch),
    STR("model", "preset", "",
        "Named model shape that sets the model keys below; keys given explicitly still win.",
        model.preset),
    INT_IN("model", "n_layer", "2", 1, P10, "Number of transformer blocks.", model.n_layer),
    INT_IN("model", "n_head", "4", 1, P10, "Number of attention (query) heads; must divide d_model.",
           model.n_head),
    INT_DER_IN("model", "n_kv_head", "n_head", 1, P10,
            "Number of key/value heads; must divide n_head and equal it for gpt2.",
            model.n_kv_head),
    INT_IN("model", "d_model", "64", 1, P20, "Width of the residual stream.", model.d_model),
    INT_DER_IN("model", "d_ff", "4*d_model for gpt2; for llama the smallest multiple of 16 >= 8*d_model/3", 1, (4 * P20),
            "Hidden width of the feed-forward block.", model.d_ff),
    INT_IN("model", "vocab_size", "256", 1, P24, "Number of token ids.", model.vocab_size),
    INT_IN("model", "vocab_padding", "128", 1, 4096.0,
           "The token embedding and output weight are stored with their rows padded to a multiple of this (zero rows no token uses), so that the GPU's logit products have a vocabulary dimension of whole tiles and every leading dimension is a multiple of 8; 1 stores exactly vocab_size rows. Storage only: losses, checkpoints' tensors, export and sample see vocab_size, and a checkpoint resumes under any padding.",
           model.vocab_padding),
    INT_IN("model", "seq_len", "64", 1, P20, "Context length in tokens.", model.seq_len),
    FLT("model", "rope_theta", "10000", 0, 0, GT0, "RoPE base frequency (llama).", model.rope_theta),
    ENUM("model", "rope_scaling", "none", rope_scaling_v,
         "RoPE frequency scaling (llama): none, or llama3 as Llama 3.1 and 3.2 use it (the four keys below; transformers' rope_type llama3).",
         model.rope_scaling),
    FLT("model", "rope_factor", "8", 0, 0, GT0,
        "llama3 scaling: the factor low frequencies are divided by.", model.rope_factor),
    FLT("model", "rope_low_freq_factor", "1", 0, 0, GT0,
        "llama3 scaling: wavelengths above rope_original_seq_len / this are scaled fully.",
        model.rope_low_freq_factor),
    FLT("model", "rope_high_freq_factor", "4", 0, 0, GT0,
        "llama3 scaling: wavelengths below rope_original_seq_len / this are kept; between the two bounds the frequency is interpolated. Must exceed rope_low_freq_factor.",
        model.rope_high_freq_factor),
    INT_IN("model", "rope_original_seq_len", "8192", 1, P24,
           "llama3 scaling: the context length the model was pretrained with (original_max_position_embeddings).",
           model.rope_original_seq_len),
    FLT("model", "norm_eps", "1e-5", 0, 0, GT0, "Epsilon of LayerNorm / RMSNorm.", model.norm_eps),
    ROW("model", "tie_embeddings", ST_T_BOOL, NULL, "true for gpt2, false for llama", 0, 0, 0, NULL,
        "Share the token embedding with the output projection.", model.tie_embeddings),
    STR("model", "init", "random",
        "random for a fresh initialisation, else the Hugging Face safetensors weights to start from: a .safetensors file, or a directory with model.safetensors or shards and model.safetensors.index.json, and optionally config.json, whose shape fills the [model] keys not given and must agree with those given (F32, F16 or BF16; see STARTING WEIGHTS).",
        model.init),
    FLT("model", "init_std", "0.02", 0, 0, GT0, "Standard deviation of the random initialisation.",
        model.init_std),

    STR("data", "train", "", "Glob of the training token files (llm.c's: uint16 tokens, "
        "header version 1, or uint32, version 7; shardtrain(1), prepare); required to train.",
        data.train),
    STR("data", "val", "", "Glob of the validation token files, same format; empty for none.",
        data.val),
    STR("data", "tokenizer", "",
        "The Hugging Face tokenizer.json the shards were made with (prepare --tokenizer), or a directory holding one; empty for byte-level data. Training checks that model.vocab_size covers it and writes it beside the final weights, where sample and export find it.",
        data.tokenizer),

    INT_IN("train", "micro_batch", "1", 1, (64 * P10), "Sequences per rank per forward/backward pass.",
           train.micro_batch),
    INT_DER_IN("train", "global_batch", "micro_batch", 1, P24,
            "Sequences per optimizer step over all ranks; a multiple of micro_batch.",
            train.global_batch),
    INT_IN("train", "steps", "100", 1, G9, "Number of optimizer steps.", train.steps),
    INT_IN("train", "seed", "1337", 0, P53, "Seed of initialisation and data order.", train.seed),
    FLT("train", "grad_clip", "1.0", 0, 0, GE0, "Global gradient-norm clip; 0 disables clipping.",
        train.grad_clip),
    INT_IN("train", "eval_every", "0", 0, G9, "Evaluate every this many steps; 0 never.",
           train.eval_every),
    INT_IN("train", "eval_batches", "4", 1, P20, "Batches per evaluation.", train.eval_batches),
    ENUM("train", "device", "auto", device_v, "Where to compute; auto picks CUDA when available.",
         train.device),
    ENUM("train", "precision", "fp32", prec_v, "Compute precision; master weights stay fp32.",
         train.precision),
    ENUM("train", "activation_checkpointing", "none", ackpt_v,
         "Recompute block activations in the backward pass to save memory.",
         train.activation_checkpointing),
    INT_IN("train", "nonfinite_limit", "5", 1, P20,
           "Consecutive steps with a non-finite loss or gradient norm that are skipped (with a warning; all ranks agree, the update and AdamW's step count are left alone, the learning-rate schedule moves on) before the run saves a checkpoint and stops with exit status 5.",
           train.nonfinite_limit),

    FLT("optim", "lr", "3e-4", 0, 0, GT0, "Peak learning rate.", optim.lr),
    FLT("optim", "min_lr", "0", 0, 0, GE0, "Final learning rate of the decay; at most lr.",
        optim.min_lr),
    INT_IN("optim", "warmup_steps", "0", 0, G9, "Steps of linear warm-up from 0 to lr.",
           optim.warmup_steps),
    ENUM("optim", "schedule", "cosine", sched_v,
         "Learning-rate decay after warm-up; wsd is warmup-stable-decay.", optim.schedule),
    FLT("optim", "decay_frac", "0.2", 0, 1, ST_R_MIN | ST_R_MIN_OPEN | ST_R_MAX,
        "wsd: fraction of the steps spent decaying.", optim.decay_frac),
    FLT("optim", "beta1", "0.9", 0, 1, UNIT_OPEN, "AdamW first-moment decay.", optim.beta1),
    FLT("optim", "beta2", "0.95", 0, 1, UNIT_OPEN, "AdamW second-moment decay.", optim.beta2),
    FLT("optim", "eps", "1e-8", 0, 0, GT0, "AdamW denominator epsilon.", optim.eps),
    FLT("optim", "weight_decay", "0.1", 0, 0, GE0, "Decoupled weight decay of matrices.",
        optim.weight_decay),

    ENUM("parallel", "strategy", "full_shard", strat_v,
         "full_shard (ZeRO-3), shard_grad_op (ZeRO-2), hybrid_shard (shard in a group, replicate across), no_shard (DDP).", parallel.strategy),
    INT_IN("parallel", "shard_size", "0", 0, P20, "Ranks per shard group for hybrid_shard; 0 the ranks of one node.",
           parallel.shard_size),
    ENUM("parallel", "backend", "auto", backend_v, "Collectives: mpi (host buffers), nccl (GPU buffers), auto (nccl with GPUs, else mpi).",
         parallel.backend),
    INT_IN("parallel", "prefetch", "1", 0, 64, "All-gathers in flight ahead of the unit computing; 0 gathers each unit when needed.",
           parallel.prefetch),
    ENUM("parallel", "reduce_dtype", "fp32", prec_v, "Precision gradients are reduced in (bf16 rounds every partial sum).",
         parallel.reduce_dtype),
    ROW("parallel", "no_sync", ST_T_BOOL, "false", NULL, 0, 0, 0, NULL,
        "Accumulate full gradients, communicate on the last micro-step only.", parallel.no_sync),
    FLT("parallel", "timeout_s", "600", 0, 0, GT0, "Seconds a rank waits for a collective (mpi backend and start-up) before it gives up: each surviving rank then prints one line naming the collective, the step and the ranks that did not arrive, and the job stops with exit status 4. Must exceed the longest time one rank works alone between collectives.",
        parallel.timeout_s),

    STR("checkpoint", "dir", "checkpoints", "Directory of checkpoints; final weights go to DIR/final/model.safetensors.", checkpoint.dir),
    INT_IN("checkpoint", "every", "0", 0, G9, "Write a sharded checkpoint every this many steps and after the last step; 0 writes none (a preemption signal still does).",
           checkpoint.every),
    INT_IN("checkpoint", "keep", "3", 1, P20, "Number of most recent step checkpoints kept; older ones are removed after each save.",
           checkpoint.keep),
    STR("checkpoint", "resume", "auto",
        "auto resumes from dir's latest checkpoint (falling back to older good ones, fresh when there is none), never starts fresh, else a step directory to resume from, at any world size and strategy.",
        checkpoint.resume),
    ROW("checkpoint", "requeue", ST_T_BOOL, "false", NULL, 0, 0, 0, NULL,
        "After a signal-triggered checkpoint under Slurm, rank 0 runs scontrol requeue $SLURM_JOB_ID before exiting.",
        checkpoint.requeue),

    STR("log", "dir", "logs", "Directory of the metrics log.", log.dir),
    INT_IN("log", "every", "10", 1, G9, "Print and log metrics every this many steps (and the first and last); only these steps, evaluations and checkpoints wait for the device, and a step's time is the mean since the last of them.", log.every),
    FLT("log", "peak_tflops", "0", 0, 0, GE0,
        "Peak TFLOP/s of one device for MFU; 0 unknown, MFU not reported.", log.peak_tflops),
    ROW("log", "tensorboard", ST_T_BOOL, "true", NULL, 0, 0, 0, NULL,
        "Write TensorBoard event files (dir/events.out.tfevents.*) beside metrics.jsonl: the metrics as scalars and the resolved configuration as text; a resumed run continues the same curves.",
        log.tensorboard),
    ROW("log", "plot", ST_T_BOOL, "true", NULL, 0, 0, 0, NULL,
        "At the end of training (completed, stopped or preempted), rank 0 writes dir/plot.svg: loss, validation loss, tokens/s, MFU and learning rate against steps, as shardtrain plot does.",
        log.plot),

    INT_IN("lora", "rank", "0", 0, 4096,
           "Rank of the LoRA adapters; 0 trains every weight (full fine-tuning). Above 0 the base weights freeze (kept in the compute dtype, sharded and gathered as before, with no gradient and no optimizer state) and only the adapters' A [rank, in] and B [out, rank] matrices of the targeted layers train (see LORA).",
           lora.rank),
    ROW("lora", "alpha", ST_T_FLOAT, NULL, "rank", 0, 0, GT0, NULL,
        "The adapters' update is scaled by alpha / rank, as PEFT's lora_alpha.", lora.alpha),
    FLT("lora", "dropout", "0", 0, 1, UNIT_OPEN,
        "Dropout of the adapters' input during training (PEFT's lora_dropout); the mask depends only on train.seed, the step and the sample, never on the world size.",
        lora.dropout),
    STR("lora", "targets", "all",
        "Comma-separated layers that get adapters, each named once, or all alone. gpt2: c_attn, attn.c_proj, c_fc, mlp.c_proj (c_proj names both projections); llama: q, k, v, o, gate, up, down (or q_proj ... down_proj).",
        lora.targets),
};
const int st_schema_n = (int)(sizeof st_schema / sizeof st_schema[0]);

const char *const st_sections[] = {"model", "data", "train", "optim", "parallel",
                                   "checkpoint", "log", "lora", NULL};

/* Shapes of the published models, so that a config can say "gpt2-124m"
 * instead of copying eight numbers (and getting one wrong). */
const st_preset st_presets[] = {
    /* name         arch           L   H   KV{gpt2,llama} C     F{gpt2,llama}  V       T   theta  eps  tie */
    {"tiny",       -1,             2,  4,  {0, 2},        64,   {256, 176},    256,    64,   0,   0,    -1},
    {"gpt2-124m",  ST_ARCH_GPT2,  12, 12,  {0, 0},       768,   {3072, 3072},  50257, 1024, 0,   0,     1},
    {"gpt2-350m",  ST_ARCH_GPT2,  24, 16,  {0, 0},      1024,   {4096, 4096},  50257, 1024, 0,   0,     1},
    {"gpt2-774m",  ST_ARCH_GPT2,  36, 20,  {0, 0},      1280,   {5120, 5120},  50257, 1024, 0,   0,     1},
    {"gpt2-1558m", ST_ARCH_GPT2,  48, 25,  {0, 0},      1600,   {6400, 6400},  50257, 1024, 0,   0,     1},
    {"llama-1b",   ST_ARCH_LLAMA, 16, 32,  {8, 8},      2048,   {8192, 8192},  128256, 2048, 500000, 1e-5, 1},
    {"llama-8b",   ST_ARCH_LLAMA, 32, 32,  {8, 8},      4096,   {14336, 14336}, 128256, 8192, 500000, 1e-5, 0},
};
const int st_presets_n = (int)(sizeof st_presets / sizeof st_presets[0]);

/* lora.targets' words (resolve.c parses them): canonical names first
 * (what adapter_config.json's target_modules lists), in a block's order;
 * the short llama names and gpt2's c_proj are accepted as aliases. */
static const char *const lora_gpt2[] = {"c_attn", "attn.c_proj", "c_fc", "mlp.c_proj", NULL};
static const char *const lora_llama[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                         "gate_proj", "up_proj", "down_proj", NULL};

int st_lora_n_targets(int arch) { return arch == ST_ARCH_GPT2 ? 4 : 7; }

const char *st_lora_target_name(int arch, int i)
{
    return (arch == ST_ARCH_GPT2 ? lora_gpt2 : lora_llama)[i];
}

const st_preset *st_preset_find(const char *name)
{
    for (int i = 0; i < st_presets_n; i++)
        if (strcmp(st_presets[i].name, name) == 0)
            return &st_presets[i];
    return NULL;
}

int st_schema_index(const char *section, const char *key)
{
    for (int i = 0; i < st_schema_n; i++)
        if (strcmp(st_schema[i].section, section) == 0 && strcmp(st_schema[i].key, key) == 0)
            return i;
    return -1;
}

const char *st_schema_values_text(const st_key *k, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    if (k->type == ST_T_BOOL) {
        snprintf(buf, n, "true|false|yes|no|on|off|1|0");
        return buf;
    }
    if (strcmp(k->section, "model") == 0 && strcmp(k->key, "preset") == 0) {
        for (int i = 0; i < st_presets_n && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "|" : "", st_presets[i].name);
        return buf;
    }
    for (int i = 0; k->values && k->values[i] && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "|" : "", k->values[i]);
    return buf;
}

int st_schema_in_range(const st_key *k, double v)
{
    unsigned f = k->flags;
    if ((f & ST_R_MIN) && (f & ST_R_MIN_OPEN ? !(v > k->min) : !(v >= k->min)))
        return 0;
    if ((f & ST_R_MAX) && (f & ST_R_MAX_OPEN ? !(v < k->max) : !(v <= k->max)))
        return 0;
    return 1;
}

/* Integer keys compare as integers: converting the value to double rounds
 * above 2^53, so 2^53 + 1 would pass a bound of 2^53.  A bound is turned
 * into the int64 it allows instead (ceil for a minimum, floor for a
 * maximum, one more or less when open); bounds past int64's range leave
 * that side open or closed as a whole. */
static bool int_below(int64_t v, double min, bool open)
{
    double b = open ? floor(min) + 1.0 : ceil(min);   /* smallest allowed */
    if (b <= -0x1p63)
        return false;
    if (b >= 0x1p63)
        return true;
    return v < (int64_t)b;
}

static bool int_above(int64_t v, double max, bool open)
{
    double b = open ? ceil(max) - 1.0 : floor(max);   /* largest allowed */
    if (b >= 0x1p63)
        return false;
    if (b < -0x1p63)
        return true;
    return v > (int64_t)b;
}

int st_schema_int_in_range(const st_key *k, int64_t v)
{
    unsigned f = k->flags;
    if ((f & ST_R_MIN) && int_below(v, k->min, f & ST_R_MIN_OPEN))
        return 0;
    if ((f & ST_R_MAX) && int_above(v, k->max, f & ST_R_MAX_OPEN))
        return 0;
    return 1;
}

const char *st_schema_range_text(const st_key *k, char *buf, size_t n)
{
    unsigned f = k->flags;
    buf[0] = '\0';
    /* Integers in full: 16777216, not 1.67772e+07. */
    const char *num = k->type == ST_T_INT ? "%.0f" : "%g";
    char lo[40], hi[40];
    snprintf(lo, sizeof lo, num, k->min);
    snprintf(hi, sizeof hi, num, k->max);
    if ((f & ST_R_MIN) && (f & ST_R_MAX))
        snprintf(buf, n, "%s%s, %s%s", f & ST_R_MIN_OPEN ? "(" : "[", lo, hi,
                 f & ST_R_MAX_OPEN ? ")" : "]");
    else if (f & ST_R_MIN)
        snprintf(buf, n, "%s %s", f & ST_R_MIN_OPEN ? ">" : ">=", lo);
    else if (f & ST_R_MAX)
        snprintf(buf, n, "%s %s", f & ST_R_MAX_OPEN ? "<" : "<=", hi);
    return buf;
}

int st_levenshtein(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 1000;            /* nothing that long is worth suggesting */
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *type_name(st_type t)
{
    switch (t) {
    case ST_T_INT: return "integer";
    case ST_T_FLOAT: return "float";
    case ST_T_BOOL: return "boolean";
    case ST_T_STRING: return "string";
    case ST_T_ENUM: return "enum";
    }
    return "?";
}

/* Append s to buf with roff's backslash escaped. */
static void roff_cat(char *buf, size_t n, const char *s)
{
    size_t len = strlen(buf);
    for (; *s && len + 3 < n; s++) {
        if (*s == '\\') {
            buf[len++] = '\\';
            buf[len++] = 'e';
        } else {
            buf[len++] = *s;
        }
    }
    buf[len] = '\0';
}

/* Write roff text filled to short input lines (mandoc's lint wants them
 * under 80 bytes), never starting a line with a control character. */
static void roff_fill(FILE *out, const char *text)
{
    const char *p = text;
    while (*p) {
        const char *end = p + strlen(p);
        if (end - p > 72) {
            const char *brk = p + 72;
            while (brk > p && *brk != ' ')
                brk--;
            if (brk == p)
                brk = strchr(p + 72, ' ');
            if (brk)
                end = brk;
        }
        if (*p == '.' || *p == '\'')
            fputs("\\&", out);
        fprintf(out, "%.*s\n", (int)(end - p), p);
        p = *end ? end + 1 : end;
    }
}

void st_schema_print_man(FILE *out)
{
    char buf[256], line[1024];
    for (int s = 0; st_sections[s]; s++) {
        fprintf(out, ".SS [%s]\n", st_sections[s]);
        for (int i = 0; i < st_schema_n; i++) {
            const st_key *k = &st_schema[i];
            if (strcmp(k->section, st_sections[s]) != 0)
                continue;
            fprintf(out, ".TP\n.B %s\n", k->key);
            snprintf(line, sizeof line, "= \\fI%s\\fP, default ", type_name(k->type));
            if (k->def && *k->def) {
                strcat(line, "\\fB");
                roff_cat(line, sizeof line, k->def);
                strcat(line, "\\fP");
            } else {
                roff_cat(line, sizeof line, k->def ? "empty" : k->defdoc);
            }
            if (k->type == ST_T_ENUM || k->type == ST_T_BOOL ||
                (strcmp(k->section, "model") == 0 && strcmp(k->key, "preset") == 0)) {
                roff_cat(line, sizeof line, ", one of ");
                roff_cat(line, sizeof line, st_schema_values_text(k, buf, sizeof buf));
            } else if (*st_schema_range_text(k, buf, sizeof buf)) {
                roff_cat(line, sizeof line, ", range ");
                roff_cat(line, sizeof line, buf);
            }
            roff_fill(out, line);
            fputs(".br\n", out);
            line[0] = '\0';
            roff_cat(line, sizeof line, k->doc);
            roff_fill(out, line);
        }
    }
}

void st_schema_print_keys(FILE *out)
{
    for (int i = 0; i < st_schema_n; i++)
        fprintf(out, "%s.%s\n", st_schema[i].section, st_schema[i].key);
}

const char *st_enum_name(const char *section, const char *key, int value)
{
    int idx = st_schema_index(section, key);
    if (idx < 0)
        return "?";
    const st_key *k = &st_schema[idx];
    if (k->type == ST_T_BOOL)
        return value ? "true" : "false";
    if (k->type != ST_T_ENUM || value < 0)
        return "?";
    for (int i = 0; k->values[i]; i++)
        if (i == value)
            return k->values[i];
    return "?";
}
