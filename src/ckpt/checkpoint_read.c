/* Reading checkpoints (see checkpoint.h): manifest validation, ranged and
 * verified reads of the shard files, and resharding into any layout (the
 * resume policy built on them is checkpoint_resume.c).  A checkpoint is
 * untrusted input: every field of the manifest is checked before it is
 * used, every byte read from a shard file is covered by a block checksum,
 * and a problem is one message naming the file, never a silent load. */
#include "ckpt/checkpoint.h"
#include "ckpt/manifest_seal.h"
#include "config/model_shape.h"
#include "config/schema.h"
#include "base/alloc.h"
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static int fail(char *err, size_t n, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t n, const char *where, const char *fmt, ...)
{
    int k = snprintf(err, n, "%s: ", where);
    if (k < 0 || (size_t)k >= n)
        return ST_EXIT_USAGE;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, n - (size_t)k, fmt, ap);
    va_end(ap);
    return ST_EXIT_USAGE;
}

static int get_int(json_t *o, const char *key, int64_t lo, int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

static int get_real(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 0;
}

static int parse_hex64(json_t *v, uint64_t *out)
{
    const char *s = json_string_value(v);
    char *end;
    if (!s || strlen(s) != 16)
        return -1;
    errno = 0;
    *out = strtoull(s, &end, 16);
    return errno || *end ? -1 : 0;
}

/* Any integer: the model's sizes are read as they are, and their ranges
 * checked by check_model_fields, which names the field. */
#define ANY INT64_MIN

static int read_model(st_ckpt *c, json_t *mo)
{
    st_model_config *mc = &c->model;
    const char *arch = json_string_value(json_object_get(mo, "arch"));
    json_t *tie = json_object_get(mo, "tie_embeddings");
    if (!arch || (strcmp(arch, "gpt2") && strcmp(arch, "llama")) || !json_is_boolean(tie) ||
        get_int(mo, "n_layer", ANY, &mc->n_layer) || get_int(mo, "n_head", ANY, &mc->n_head) ||
        get_int(mo, "n_kv_head", ANY, &mc->n_kv_head) ||
        get_int(mo, "d_model", ANY, &mc->d_model) || get_int(mo, "d_ff", ANY, &mc->d_ff) ||
        get_int(mo, "vocab_size", ANY, &mc->vocab_size) ||
        get_int(mo, "seq_len", ANY, &mc->seq_len) || get_real(mo, "rope_theta", &mc->rope_theta) ||
        get_real(mo, "norm_eps", &mc->norm_eps) || get_real(mo, "init_std", &mc->init_std))
        return -1;
    mc->arch = strcmp(arch, "gpt2") ? ST_ARCH_LLAMA : ST_ARCH_GPT2;
    mc->tie_embeddings = json_is_true(tie);
    /* Absent (every checkpoint before it existed, and unscaled ones): none. */
    json_t *rs = json_object_get(mo, "rope_scaling");
    mc->rope_scaling = ST_ROPE_NONE;
    if (rs) {
        const char *type = json_string_value(json_object_get(rs, "rope_type"));
        if (!type || strcmp(type, "llama3") || get_real(rs, "factor", &mc->rope_factor) ||
            get_real(rs, "low_freq_factor", &mc->rope_low_freq_factor) ||
            get_real(rs, "high_freq_factor", &mc->rope_high_freq_factor) ||
            get_int(rs, "original_max_position_embeddings", ANY, &mc->rope_original_seq_len))
            return -1;
        mc->rope_scaling = ST_ROPE_LLAMA3;
    }
    mc->preset = (char *)"";
    mc->init = (char *)"random";
    return 0;
}

/* The manifest's "lora" object, absent without adapters.  The targets are
 * the names st_lora_target_name gives, in its order. */
static int read_lora(st_ckpt *c, json_t *lo)
{
    memset(&c->lora, 0, sizeof c->lora);
    c->lora.targets = (char *)"";
    if (!lo)
        return 0;
    json_t *targets = json_object_get(lo, "targets");
    const char *base = json_string_value(json_object_get(lo, "base"));
    if (get_int(lo, "rank", 1, &c->lora.rank) || c->lora.rank > 4096 ||
        get_real(lo, "alpha", &c->lora.alpha) || !(c->lora.alpha > 0) ||
        get_real(lo, "dropout", &c->lora.dropout) || !(c->lora.dropout >= 0) ||
        !(c->lora.dropout < 1) || !json_is_array(targets) || !base)
        return -1;
    snprintf(c->lora_base, sizeof c->lora_base, "%s", base);
    for (size_t j = 0; j < json_array_size(targets); j++) {
        const char *t = json_string_value(json_array_get(targets, j));
        int found = -1;
        for (int i = 0; t && i < st_lora_n_targets(c->model.arch); i++)
            if (!strcmp(t, st_lora_target_name(c->model.arch, i)))
                found = i;
        if (found < 0)
            return -1;
        c->lora.target_mask |= 1u << found;
    }
    return c->lora.target_mask ? 0 : -1;
}

/* The saved tensor table must be this model's, entry by entry. */
static int check_model(st_ckpt *c, json_t *root, const st_model *m, char *err, size_t n)
{
    const char *mp = c->manifest_path;
    const st_model_config *s = &c->model;
    const char *hint = "hint: resume with the model configuration the checkpoint was saved "
                       "with, or set checkpoint.resume = never";
    if ((s->arch == ST_ARCH_GPT2) != (m->arch == ST_ARCH_GPT2))
        return fail(err, n, mp, "checkpoint is for arch %s, this run is %s; %s",
                    s->arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
                    m->arch == ST_ARCH_GPT2 ? "gpt2" : "llama", hint);
    const struct { const char *k; int64_t a, b; } dims[] = {
        {"n_layer", s->n_layer, m->L}, {"d_model", s->d_model, m->C},
        {"n_head", s->n_head, m->H},   {"n_kv_head", s->n_kv_head, m->KV},
        {"d_ff", s->d_ff, m->F},       {"vocab_size", s->vocab_size, m->V},
        {"tie_embeddings", s->tie_embeddings, m->tied}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].a != dims[i].b)
            return fail(err, n, mp, "checkpoint is for a model with %s = %lld, this run "
                        "has %lld; %s", dims[i].k, (long long)dims[i].a,
                        (long long)dims[i].b, hint);
    if (c->lora.rank != m->lora.rank)
        return fail(err, n, mp, "checkpoint holds %s, this run %s (lora.rank %lld vs %d); %s",
                    c->lora.rank ? "LoRA adapters" : "a full model",
                    m->lora.rank ? "trains LoRA adapters" : "trains the full model",
                    (long long)c->lora.rank, m->lora.rank,
                    "hint: resume with the [lora] keys the checkpoint was saved with, or "
                    "set checkpoint.resume = never");
    const int nt = st_model_n_train_tensors(m);
    json_t *tensors = json_object_get(root, "tensors");
    if (!json_is_array(tensors) || (int)json_array_size(tensors) != nt)
        return fail(err, n, mp, "checkpoint has %d tensors, this model %d; %s",
                    json_is_array(tensors) ? (int)json_array_size(tensors) : -1, nt, hint);
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = st_model_train_tensor(m, i);
        json_t *e = json_array_get(tensors, (size_t)i), *shape = json_object_get(e, "shape");
        const char *name = json_string_value(json_object_get(e, "name"));
        int64_t unit, off;
        int same = name && !strcmp(name, t->name) && !get_int(e, "unit", 0, &unit) &&
                   unit == t->unit && !get_int(e, "offset", 0, &off) && off == t->offset &&
                   json_is_array(shape) && (int)json_array_size(shape) == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = json_integer_value(json_array_get(shape, (size_t)d)) == t->shape[d];
        if (!same)
            return fail(err, n, mp, "tensor %d is %s in the checkpoint but %s in this "
                        "model (or its shape or place differs); %s",
                        i, name ? name : "?", t->name, hint);
    }
    if (c->n_units != m->n_units)
        return fail(err, n, mp, "checkpoint has %d units, this model %d; %s", c->n_units,
                    m->n_units, hint);
    for (int u = 0; u < m->n_units; u++)
        if (c->numel[u] != st_model_train_numel(m, u))
            return fail(err, n, mp, "unit %d has %lld elements in the checkpoint, %lld in "
                        "this model; %s", u, (long long)c->numel[u],
                        (long long)st_model_train_numel(m, u), hint);
    return 0;
}

void st_ckpt_close(st_ckpt *c)
{
    if (c->fd)
        for (int i = 0; i < c->n_files; i++)
            if (c->fd[i] >= 0)
                close(c->fd[i]);
    if (c->file_path)
        for (int i = 0; i < c->n_files; i++)
            free(c->file_path[i]);
    free(c->fd);
    free(c->file_path);
    free(c->numel);
    free(c->shard);
    free(c->unit_off);
    free(c->block_hash);
    if (c->root)
        json_decref((json_t *)c->root);
    memset(c, 0, sizeof *c);
}

/* The manifest's units: sizes and byte offsets that add up, so the shard
 * file's size follows from them. */
static int read_units(st_ckpt *c, json_t *units, int64_t sh, const char *mp, const char *hint,
                      char *err, size_t n)
{
    c->n_units = (int)json_array_size(units);
    c->numel = calloc((size_t)c->n_units, sizeof(int64_t));
    c->shard = calloc((size_t)c->n_units, sizeof(int64_t));
    c->unit_off = calloc((size_t)c->n_units, sizeof(int64_t));
    int64_t off = 0;
    for (int u = 0; u < c->n_units; u++) {
        json_t *e = json_array_get(units, (size_t)u);
        int64_t bo_;
        /* 0: a unit of which nothing trains (LoRA's embedding and head). */
        if (get_int(e, "numel", 0, &c->numel[u]) || get_int(e, "shard", 0, &c->shard[u]) ||
            get_int(e, "byte_offset", 0, &bo_) || bo_ != off ||
            c->shard[u] * sh < c->numel[u] || c->shard[u] > ((int64_t)1 << 40))
            return fail(err, n, mp, "unit %d has an inconsistent size or offset; %s", u, hint);
        c->unit_off[u] = off;
        off += 3 * c->shard[u] * (int64_t)sizeof(float);
        if (off > ((int64_t)1 << 50))
            return fail(err, n, mp, "units add up to an impossible file size; %s", hint);
    }
    c->file_bytes = off;
    c->n_blocks = (off + c->block - 1) / c->block;
    return 0;
}

/* The manifest's file entries: fixed names, the size the units give and
 * one checksum per block. */
static int read_files(st_ckpt *c, json_t *files, const char *dir, const char *mp,
                      const char *hint, char *err, size_t n)
{
    const int64_t off = c->file_bytes;
    /* Sizes agree with the manifest's own arrays before anything is
     * allocated from them. */
    for (int i = 0; i < c->n_files; i++) {
        json_t *blocks = json_object_get(json_array_get(files, (size_t)i), "block_xxh64");
        if (!json_is_array(blocks) || (int64_t)json_array_size(blocks) != c->n_blocks)
            return fail(err, n, mp, "file entry %d is inconsistent with the layout; %s", i,
                        hint);
    }
    c->block_hash = calloc((size_t)(c->n_files * c->n_blocks), sizeof(uint64_t));
    c->fd = malloc(sizeof(int) * (size_t)c->n_files);
    c->file_path = calloc((size_t)c->n_files, sizeof(char *));
    for (int i = 0; i < c->n_files; i++)
        c->fd[i] = -1;
    for (int i = 0; i < c->n_files; i++) {
        json_t *e = json_array_get(files, (size_t)i), *blocks = json_object_get(e, "block_xxh64");
        const char *name = json_string_value(json_object_get(e, "name"));
        char want[64];
        snprintf(want, sizeof want, "shard_%05d-of-%05d.bin", i, c->n_files);
        int64_t bytes;
        /* Names are fixed, so a manifest cannot point outside its directory. */
        if (!name || strcmp(name, want) || get_int(e, "bytes", 0, &bytes) || bytes != off ||
            !json_is_array(blocks) || (int64_t)json_array_size(blocks) != c->n_blocks)
            return fail(err, n, mp, "file entry %d is inconsistent with the layout; %s", i,
                        hint);
        for (int64_t b = 0; b < c->n_blocks; b++)
            if (parse_hex64(json_array_get(blocks, (size_t)b),
                            &c->block_hash[(size_t)i * (size_t)c->n_blocks + (size_t)b]))
                return fail(err, n, mp, "file entry %d has a malformed checksum; %s", i, hint);
        size_t len = strlen(dir) + strlen(name) + 2;
        c->file_path[i] = malloc(len);
        snprintf(c->file_path[i], len, "%s/%s", dir, name);
    }
    return 0;
}

/* The manifest's bytes, from a regular file of bounded size: opened without
 * blocking, so that a FIFO in its place is an error, not a hang. */
static int read_manifest(const char *mp, char **out, size_t *len, char *err, size_t n)
{
    struct stat sb;
    int fd = st_open_regular_stat(mp, &sb);
    if (fd == ST_OPEN_FAILED)
        return fail(err, n, mp, "cannot open checkpoint manifest: %s; hint: give a "
                    "step directory (DIR/step_NNNNNNNN) or a checkpoint.dir with a "
                    "`latest` file", strerror(errno));
    if (fd < 0 || sb.st_size > ST_CKPT_MANIFEST_MAX) {
        if (fd >= 0)
            close(fd);
        return fail(err, n, mp, "not a regular file of at most %d MiB; hint: the "
                    "checkpoint is damaged; use an older one", ST_CKPT_MANIFEST_MAX >> 20);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)sb.st_size) {
        free(buf);
        return fail(err, n, mp, "cannot read checkpoint manifest%s", buf ? " (it changed "
                    "while being read)" : ": out of memory");
    }
    *out = buf;
    *len = got;
    return 0;
}

/* Fields that are not sizes but must still agree with each other and with
 * this reader: a mismatch names the field. */
static int check_fields(st_ckpt *c, json_t *root, int64_t sh, const char *mp, const char *hint,
                        char *err, size_t n)
{
    int64_t world = 0, rep = 0, next = -1;
    const char *dtype = json_string_value(json_object_get(root, "dtype"));
    const char *strategy = json_string_value(json_object_get(root, "strategy"));
    if (c->step < 1)
        return fail(err, n, mp, "field step is %lld, a checkpoint is written after at least "
                    "one step; %s", (long long)c->step, hint);
    if (c->opt_steps > c->step)
        return fail(err, n, mp, "field optimizer_steps (%lld) exceeds step (%lld); %s",
                    (long long)c->opt_steps, (long long)c->step, hint);
    if (!dtype || strcmp(dtype, "F32"))
        return fail(err, n, mp, "field dtype is not \"F32\", the only one written; %s", hint);
    if (get_int(root, "replicate_size", 1, &rep) || get_int(root, "world_size", 1, &world) ||
        world != sh * rep)
        return fail(err, n, mp, "field world_size is not shard_size x replicate_size; %s",
                    hint);
    int known = 0;
    const char *const *names = st_schema[st_schema_index("parallel", "strategy")].values;
    for (int i = 0; strategy && names[i]; i++)
        known |= !strcmp(strategy, names[i]);
    if (!known)
        return fail(err, n, mp, "field strategy is not a strategy shardtrain writes; %s", hint);
    /* A no_shard checkpoint has one shard; the others' shard group is the
     * world, except hybrid_shard's. */
    if ((!strcmp(strategy, "no_shard") && sh != 1) ||
        (strcmp(strategy, "no_shard") && strcmp(strategy, "hybrid_shard") && rep != 1))
        return fail(err, n, mp, "field strategy (%s) does not match shard_size %lld x "
                    "replicate_size %lld; %s", strategy, (long long)sh, (long long)rep, hint);
    if (get_int(json_object_get(root, "data"), "next_step", 0, &next) || next != c->step)
        return fail(err, n, mp, "field data.next_step is not step; %s", hint);
    return 0;
}

/* The manifest's model fields that have a [model] key in the schema: the
 * name in the manifest ("model", or its "rope_scaling" object when
 * `scaling`) and the key's. */
static const struct { const char *name, *key; int scaling; } model_fields[] = {
    {"n_layer", "n_layer", 0},     {"n_head", "n_head", 0},
    {"n_kv_head", "n_kv_head", 0}, {"d_model", "d_model", 0},
    {"d_ff", "d_ff", 0},           {"vocab_size", "vocab_size", 0},
    {"seq_len", "seq_len", 0},     {"rope_theta", "rope_theta", 0},
    {"norm_eps", "norm_eps", 0},   {"init_std", "init_std", 0},
    {"factor", "rope_factor", 1},  {"low_freq_factor", "rope_low_freq_factor", 1},
    {"high_freq_factor", "rope_high_freq_factor", 1},
    {"original_max_position_embeddings", "rope_original_seq_len", 1},
};

static const char *number_text(json_t *v, char *buf, size_t n)
{
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%g", json_real_value(v));
    else
        snprintf(buf, n, "%s", json_is_string(v) ? "a string" : "not a number");
    return buf;
}

/* The model a checkpoint describes is what export writes into config.json
 * and what a resume builds, so it is held to what a configuration could
 * say: each size in its schema range, the sizes consistent with each other
 * (the same checks as the configuration's, config/model_shape.h), and the
 * manifest's "model" agreeing with the configuration it embeds, whose
 * copy of the same values a sealed but edited manifest may not have
 * changed.  A problem names the field. */
static int check_model_fields(const st_ckpt *c, json_t *root, const char *mp,
                              const char *hint, char *err, size_t n)
{
    json_t *mo = json_object_get(root, "model"), *rs = json_object_get(mo, "rope_scaling");
    json_t *cm = json_object_get(json_object_get(root, "config"), "model");
    char a[48], b[48], range[64];
    for (size_t i = 0; i < sizeof model_fields / sizeof model_fields[0]; i++) {
        const char *name = model_fields[i].name, *key = model_fields[i].key;
        const char *in = model_fields[i].scaling ? "rope_scaling." : "";
        json_t *v = json_object_get(model_fields[i].scaling ? rs : mo, name);
        if (!v)
            continue;
        const st_key *k = &st_schema[st_schema_index("model", key)];
        if (!(json_is_integer(v) ? st_schema_int_in_range(k, (int64_t)json_integer_value(v))
                                 : st_schema_in_range(k, json_number_value(v))))
            return fail(err, n, mp, "field model.%s%s = %s is out of range; must be %s; %s",
                        in, name, number_text(v, a, sizeof a),
                        st_schema_range_text(k, range, sizeof range), hint);
        json_t *w = json_object_get(cm, key);
        if (w && !(json_is_number(w) && json_number_value(w) == json_number_value(v)))
            return fail(err, n, mp, "field model.%s%s = %s disagrees with config.model.%s = "
                        "%s; %s", in, name, number_text(v, a, sizeof a), key,
                        number_text(w, b, sizeof b), hint);
    }
    const char *arch = json_string_value(json_object_get(cm, "arch"));
    const char *scaling = json_string_value(json_object_get(cm, "rope_scaling"));
    json_t *tie = json_object_get(cm, "tie_embeddings");
    if (json_object_get(cm, "arch") &&
        (!arch || strcmp(arch, c->model.arch == ST_ARCH_GPT2 ? "gpt2" : "llama")))
        return fail(err, n, mp, "field model.arch disagrees with config.model.arch; %s", hint);
    if (tie && (!json_is_boolean(tie) || json_is_true(tie) != !!c->model.tie_embeddings))
        return fail(err, n, mp, "field model.tie_embeddings disagrees with "
                    "config.model.tie_embeddings; %s", hint);
    if (json_object_get(cm, "rope_scaling") &&
        (!scaling || strcmp(scaling, rs ? "llama3" : "none")))
        return fail(err, n, mp, "field model.rope_scaling disagrees with "
                    "config.model.rope_scaling; %s", hint);
    st_shape_problem p;
    if (st_model_shape_problem(&c->model, &p))
        return fail(err, n, mp, "field model.%s: %s; %s", p.key, p.what, hint);
    return 0;
}

int st_ckpt_open(st_ckpt *c, const char *dir, const st_model *m, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->manifest_path, sizeof c->manifest_path, "%s/%s", dir, ST_CKPT_MANIFEST);
    const char *mp = c->manifest_path;
    const char *hint = "hint: the checkpoint is damaged; use an older one, or set "
                       "checkpoint.resume = never";
    char *bytes = NULL;
    size_t len = 0;
    int rc = read_manifest(mp, &bytes, &len, err, n);
    if (rc)
        return rc;
    json_error_t je;
    json_t *root = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &je);
    char why[256];
    if (!root) {
        free(bytes);
        return fail(err, n, mp, "not a valid manifest (line %d: %s); %s", je.line,
                    st_printable(je.text, why, sizeof why),
                    hint);
    }
    c->root = root;
    rc = st_manifest_verify(bytes, len, why, sizeof why);
    free(bytes);
    if (rc)
        return fail(err, n, mp, "%s; %s", why, hint);
    const char *fmt = json_string_value(json_object_get(root, "format"));
    int64_t ver = 0, sh = 0;
    if (!fmt || strcmp(fmt, "shardtrain-checkpoint") || get_int(root, "format_version", 0, &ver))
        return fail(err, n, mp, "not a shardtrain checkpoint manifest; %s", hint);
    if (ver != ST_CKPT_FORMAT)
        return fail(err, n, mp, "checkpoint format version %lld, this shardtrain reads %d; "
                    "hint: use the shardtrain version that wrote it", (long long)ver,
                    ST_CKPT_FORMAT);
    json_t *units = json_object_get(root, "units"), *files = json_object_get(root, "files");
    const char *ck = json_string_value(json_object_get(root, "checksum"));
    const char *bo = json_string_value(json_object_get(root, "byte_order"));
    if (get_int(root, "step", 0, &c->step) || get_int(root, "optimizer_steps", 0, &c->opt_steps) ||
        get_int(root, "shard_size", 1, &sh) || get_int(root, "block_bytes", 4096, &c->block) ||
        c->block > ((int64_t)1 << 30) ||
        !json_is_array(units) || json_array_size(units) == 0 || !json_is_array(files) ||
        (int64_t)json_array_size(files) != sh || !ck || strcmp(ck, "xxh64") || !bo ||
        strcmp(bo, "little") || read_model(c, json_object_get(root, "model")) ||
        read_lora(c, json_object_get(root, "lora")))
        return fail(err, n, mp, "manifest lacks a field or has a bad value; %s", hint);
    c->n_files = (int)sh;
    rc = check_fields(c, root, sh, mp, hint, err, n);
    rc = rc ? rc : check_model_fields(c, root, mp, hint, err, n);
    rc = rc ? rc : read_units(c, units, sh, mp, hint, err, n);
    rc = rc ? rc : read_files(c, files, dir, mp, hint, err, n);
    if (rc)
        return rc;
    c->have_model = 1;
    return m ? check_model(c, root, m, err, n) : 0;
}

static int open_file(st_ckpt *c, int i, char *err, size_t n)
{
    if (c->fd[i] >= 0)
        return 0;
    const char *p = c->file_path[i];
    struct stat sb;
    int fd = st_open_regular_stat(p, &sb);
    if (fd == ST_OPEN_FAILED)
        return fail(err, n, p, "cannot open checkpoint file: %s; hint: the checkpoint is "
                    "incomplete; use an older one", strerror(errno));
    if (fd == ST_OPEN_NOT_REGULAR) {
        return fail(err, n, p, "checkpoint file is not a regular file; hint: use an older "
                    "checkpoint");
    }
    if (sb.st_size != c->file_bytes) {
        close(fd);
        return fail(err, n, p, "checkpoint file is %lld bytes, the manifest says %lld "
                    "(truncated or replaced); hint: use an older checkpoint",
                    (long long)sb.st_size, (long long)c->file_bytes);
    }
    c->fd[i] = fd;
    return 0;
}

/* Bytes [off, off+len) of file i, reading and verifying whole blocks. */
static int read_bytes(st_ckpt *c, int i, int64_t off, int64_t len, char *dst, char *err,
                      size_t n)
{
    int rc = open_file(c, i, err, n);
    if (rc)
        return rc;
    const int64_t B = c->block;
    const int64_t b0 = off / B, b1 = (off + len - 1) / B;
    char *buf = malloc((size_t)B);
    for (int64_t b = b0; b <= b1 && !rc; b++) {
        int64_t start = b * B, want = start + B > c->file_bytes ? c->file_bytes - start : B;
        int64_t got = 0;
        while (got < want) {
            ssize_t r = pread(c->fd[i], buf + got, (size_t)(want - got), start + got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = fail(err, n, c->file_path[i], "cannot read checkpoint file at byte "
                          "%lld: %s; hint: use an older checkpoint", (long long)(start + got),
                          r < 0 ? strerror(errno) : "unexpected end of file");
                break;
            }
            got += r;
        }
        if (rc)
            break;
        uint64_t h = XXH64(buf, (size_t)want, 0);
        if (h != c->block_hash[(size_t)i * (size_t)c->n_blocks + (size_t)b]) {
            rc = fail(err, n, c->file_path[i], "checksum mismatch in block %lld (bytes "
                      "%lld-%lld): the file is corrupt; hint: use an older checkpoint",
                      (long long)b, (long long)start, (long long)(start + want - 1));
            break;
        }
        int64_t a = off > start ? off : start;
        int64_t e = off + len < start + want ? off + len : start + want;
        memcpy(dst + (a - off), buf + (a - start), (size_t)(e - a));
    }
    free(buf);
    return rc;
}

int st_ckpt_read_range(st_ckpt *c, int u, int which, int64_t lo, int64_t hi, float *out,
                       char *err, size_t n)
{
    const int64_t s = c->shard[u], numel = c->numel[u];
    memset(out, 0, sizeof(float) * (size_t)(hi - lo));
    const int64_t end = hi < numel ? hi : numel;
    for (int64_t a = lo; a < end;) {
        int i = (int)(a / s);
        int64_t b = (int64_t)(i + 1) * s < end ? (int64_t)(i + 1) * s : end;
        int64_t off = c->unit_off[u] + (int64_t)which * s * 4 + (a - (int64_t)i * s) * 4;
        int rc = read_bytes(c, i, off, (b - a) * 4, (char *)(out + (a - lo)), err, n);
        if (rc)
            return rc;
        a = b;
    }
    return 0;
}

int st_ckpt_resolve(const char *path, char *out, size_t n, char *err, size_t errn)
{
    char p[8192];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fail(err, errn, path, "no such checkpoint: %s; hint: give a step directory "
                    "(DIR/step_NNNNNNNN) or a checkpoint.dir with a `latest` file",
                    strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return fail(err, errn, path, "not a checkpoint directory; hint: give a step "
                    "directory (DIR/step_NNNNNNNN) or a checkpoint.dir with a `latest` file");
    snprintf(p, sizeof p, "%s/%s", path, ST_CKPT_MANIFEST);
    if (stat(p, &sb) == 0) {
        snprintf(out, n, "%s", path);
        return 0;
    }
    snprintf(p, sizeof p, "%s/%s", path, ST_CKPT_LATEST);
    /* Without blocking: a FIFO named `latest` is an error, not a hang. */
    int fd = st_open_regular_stat(p, &sb);
    char line[64] = "";
    long long step;
    int nc = 0;
    if (fd == ST_OPEN_FAILED)
        return fail(err, errn, path, "holds neither %s nor %s: not a checkpoint; hint: give "
                    "a step directory (DIR/step_NNNNNNNN) or a checkpoint.dir with a "
                    "`latest` file", ST_CKPT_MANIFEST, ST_CKPT_LATEST);
    ssize_t got = fd >= 0 ? read(fd, line, sizeof line - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (got < 0)
        return fail(err, errn, p, "is not a readable regular file; hint: it should hold "
                    "one line such as step_00000100");
    line[got] = '\0';
    /* One line, the newline optional. */
    size_t end = strcspn(line, "\n");
    int ok = line[end] == '\0' || line[end + 1] == '\0';
    line[end] = '\0';
    if (!ok || sscanf(line, "step_%8lld%n", &step, &nc) != 1 || nc != 13 || line[nc])
        return fail(err, errn, p, "does not name a step directory; hint: it should hold "
                    "one line such as step_00000100");
    snprintf(out, n, "%s/%s", path, line);
    return 0;
}
