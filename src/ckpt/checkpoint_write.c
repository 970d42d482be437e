/* Writing checkpoints (see checkpoint.h); train/boundary.c decides when.
 * The write is ordered so that a crash at any moment leaves
 * the previous checkpoint loadable: every file goes into a temporary
 * directory and is fsynced; after a collective (every shard is on disk)
 * rank 0 writes the manifest, renames the directory into place, and only
 * then replaces `latest` by renaming a fresh file over it.  A reader
 * therefore never sees a step directory without all of its files, and
 * `latest` never names a directory that is not complete.  Only names the
 * writer itself makes are moved aside or pruned: a FIFO, socket or device
 * at one of them is someone else's and is refused, never touched. */
#include "ckpt/checkpoint.h"
#include "hf/hf_export.h"
#include "ckpt/manifest_seal.h"
#include "base/alloc.h"
#include "base/log.h"
#include "base/files.h"
#include "base/stage_dir.h"
#include "base/test_faults.h"
#include "config/schema.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- filesystem helpers ----------------------------------------------- */

void st_ckpt_step_dir(const char *dir, int64_t step, char *buf, size_t n)
{
    snprintf(buf, n, "%s/step_%08lld", dir, (long long)step);
}

/* ---- one shard file ---------------------------------------------------- */

/* Streams bytes to a file while hashing the whole file and each block. */
typedef struct {
    int fd;
    XXH64_state_t *all, *blk;
    int64_t in_block, n_blocks;
    uint64_t *blocks;
} hashed_writer;

static int hw_write(hashed_writer *w, const void *data, size_t n)
{
    if (st_write_all(w->fd, data, n))
        return -1;
    XXH64_update(w->all, data, n);
    const char *p = data;
    while (n > 0) {
        size_t take = (size_t)(ST_CKPT_BLOCK - w->in_block);
        if (take > n)
            take = n;
        XXH64_update(w->blk, p, take);
        w->in_block += (int64_t)take;
        p += take;
        n -= take;
        if (w->in_block == ST_CKPT_BLOCK) {
            w->blocks[w->n_blocks++] = XXH64_digest(w->blk);
            XXH64_reset(w->blk, 0);
            w->in_block = 0;
        }
    }
    return 0;
}

static int64_t file_bytes_of(const st_fsdp *f)
{
    int64_t b = 0;
    for (int u = 0; u < f->n_units; u++)
        b += 3 * f->units[u].shard * (int64_t)sizeof(float);
    return b;
}

/* Write this rank's shard; hashes[0] = whole file, hashes[1..] = blocks.
 * The arrays are backend memory: they cross to the host through a bounded
 * staging buffer, and the writer streams, so the bytes and hashes do not
 * depend on the piece size. */
static int write_shard(const st_fsdp *f, const char *path, int64_t step, uint64_t *hashes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        st_error(path, "cannot create checkpoint file: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    hashed_writer w = {fd, XXH64_createState(), XXH64_createState(), 0, 0, hashes + 1};
    XXH64_reset(w.all, 0);
    XXH64_reset(w.blk, 0);
    /* Bounded I/O space, uncounted like the reader's block buffer. */
    float *stage = malloc(sizeof(float) * (size_t)ST_FSDP_STAGE);
    int bad = !stage;
    /* Testing aid: the last shard's file fills the disk part-way. */
    const int disk_fills = f->shard_rank == f->S - 1 && st_fault_checkpoint_full(step, "shard");
    static const st_fsdp_array arr[3] = {ST_FSDP_PARAMS, ST_FSDP_ADAM_M, ST_FSDP_ADAM_V};
    for (int u = 0; u < f->n_units && !bad; u++) {
        const st_fsdp_unit *x = &f->units[u];
        for (int k = 0; k < 3 && !bad; k++) {
            for (int64_t a = 0; a < x->shard && !bad; a += ST_FSDP_STAGE) {
                int64_t n = x->shard - a < ST_FSDP_STAGE ? x->shard - a : ST_FSDP_STAGE;
                st_fsdp_shard_to_host(f, u, arr[k], a, n, stage);
                bad = hw_write(&w, stage, sizeof(float) * (size_t)n);
            }
            /* Testing aid: die between the writes of a checkpoint. */
            if (u == 0 && k == 0 && st_fault_crash_in_checkpoint(step))
                _exit(ST_EXIT_FAILURE);
            if (u == 0 && k == 0)
                st_fault_at("ckpt_shard", st_log_rank());
            if (u == 0 && k == 0 && disk_fills && !bad) {
                errno = ENOSPC;
                bad = 1;
            }
        }
    }
    free(stage);
    if (!bad && w.in_block > 0)
        w.blocks[w.n_blocks++] = XXH64_digest(w.blk);
    hashes[0] = XXH64_digest(w.all);
    XXH64_freeState(w.all);
    XXH64_freeState(w.blk);
    if (bad || fsync(fd) != 0) {
        st_error(path, "cannot write checkpoint file: %s", strerror(errno));
        close(fd);
        return ST_EXIT_FAILURE;
    }
    if (close(fd) != 0) {
        st_error(path, "cannot write checkpoint file: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    return 0;
}

/* ---- the manifest ------------------------------------------------------ */

static json_t *hex64(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return json_string(buf);
}

/* Every schema key with its resolved value, by section. */
static json_t *config_json(const st_config *cfg)
{
    json_t *o = json_object();
    for (int i = 0; i < st_schema_n; i++) {
        const st_key *k = &st_schema[i];
        const char *p = (const char *)cfg + k->offset;
        json_t *sec = json_object_get(o, k->section);
        if (!sec) {
            sec = json_object();
            json_object_set_new(o, k->section, sec);
        }
        json_t *v = NULL;
        switch (k->type) {
        case ST_T_INT: v = json_integer(*(const int64_t *)p); break;
        case ST_T_FLOAT: v = json_real(*(const double *)p); break;
        case ST_T_BOOL: v = json_boolean(*(const int *)p); break;
        case ST_T_STRING: v = json_string(*(char *const *)p ? *(char *const *)p : ""); break;
        case ST_T_ENUM: v = json_string(k->values[*(const int *)p]); break;
        }
        json_object_set_new(sec, k->key, v);
    }
    return o;
}

static json_t *model_json(const st_model_config *mc)
{
    json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b, s:f}",
                          "arch", mc->arch == ST_ARCH_GPT2 ? "gpt2" : "llama",
                          "n_layer", (json_int_t)mc->n_layer, "n_head", (json_int_t)mc->n_head,
                          "n_kv_head", (json_int_t)mc->n_kv_head,
                          "d_model", (json_int_t)mc->d_model, "d_ff", (json_int_t)mc->d_ff,
                          "vocab_size", (json_int_t)mc->vocab_size,
                          "seq_len", (json_int_t)mc->seq_len, "rope_theta", mc->rope_theta,
                          "norm_eps", mc->norm_eps, "tie_embeddings", mc->tie_embeddings,
                          "init_std", mc->init_std);
    /* Only when scaled, so unscaled manifests read as before. */
    json_t *rs = st_hf_rope_scaling_json(mc);
    if (j && rs)
        json_object_set(j, "rope_scaling", rs);
    json_decref(rs);
    return j;
}

static json_t *manifest_json(const st_fsdp *f, const st_config *cfg, const st_runtime *rt,
                             int64_t step, const uint64_t *all_hashes, int64_t n_blocks,
                             int stride)
{
    const st_model *m = f->model;
    json_t *units = json_array(), *tensors = json_array(), *files = json_array();
    int64_t off = 0;
    for (int u = 0; u < f->n_units; u++) {
        const st_fsdp_unit *x = &f->units[u];
        json_array_append_new(units, json_pack("{s:I, s:I, s:I, s:I}", "numel",
                                               (json_int_t)x->numel, "padded",
                                               (json_int_t)x->padded, "shard",
                                               (json_int_t)x->shard, "byte_offset",
                                               (json_int_t)off));
        off += 3 * x->shard * (int64_t)sizeof(float);
    }
    for (int i = 0; i < st_model_n_train_tensors(m); i++) {
        const st_tensor *t = st_model_train_tensor(m, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_array_append_new(tensors, json_pack("{s:s, s:o, s:i, s:I}", "name", t->name,
                                                 "shape", shape, "unit", t->unit, "offset",
                                                 (json_int_t)t->offset));
    }
    /* Shard i was written by world rank i (replicate index 0). */
    for (int i = 0; i < f->S; i++) {
        const uint64_t *h = all_hashes + (size_t)i * (size_t)stride;
        char name[64];
        snprintf(name, sizeof name, "shard_%05d-of-%05d.bin", i, f->S);
        json_t *blocks = json_array();
        for (int64_t b = 0; b < n_blocks; b++)
            json_array_append_new(blocks, hex64(h[1 + b]));
        json_array_append_new(files, json_pack("{s:s, s:I, s:o, s:o}", "name", name, "bytes",
                                               (json_int_t)off, "xxh64", hex64(h[0]),
                                               "block_xxh64", blocks));
    }
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("shardtrain-checkpoint"));
    json_object_set_new(root, "format_version", json_integer(ST_CKPT_FORMAT));
    json_object_set_new(root, "step", json_integer(step));
    json_object_set_new(root, "optimizer_steps", json_integer(f->opt_steps));
    json_object_set_new(root, "world_size", json_integer(rt->world));
    json_object_set_new(root, "shard_size", json_integer(f->S));
    json_object_set_new(root, "replicate_size", json_integer(f->R));
    json_object_set_new(root, "strategy", json_string(st_enum_name(
                                              "parallel", "strategy", cfg->parallel.strategy)));
    json_object_set_new(root, "dtype", json_string("F32"));
    json_object_set_new(root, "byte_order", json_string("little"));
    json_object_set_new(root, "file_layout",
                        json_string("for each unit: params, adam_m, adam_v, each `shard` "
                                    "elements of the unit's flat padded buffer starting at "
                                    "shard index x shard"));
    json_object_set_new(root, "checksum", json_string("xxh64"));
    json_object_set_new(root, "block_bytes", json_integer(ST_CKPT_BLOCK));
    json_object_set_new(root, "model", model_json(&cfg->model));
    json_object_set_new(root, "units", units);
    json_object_set_new(root, "tensors", tensors);
    if (m->lora.rank) {
        json_t *targets = json_array();
        for (int i = 0; i < st_lora_n_targets(m->arch); i++)
            if (m->lora.targets >> i & 1)
                json_array_append_new(targets, json_string(st_lora_target_name(m->arch, i)));
        json_object_set_new(root, "lora",
                            json_pack("{s:i, s:f, s:f, s:o, s:s}", "rank", m->lora.rank,
                                      "alpha", m->lora.alpha, "dropout", m->lora.dropout,
                                      "targets", targets, "base", cfg->model.init));
    }
    json_object_set_new(root, "data",
                        json_pack("{s:I, s:I, s:s}", "next_step", (json_int_t)step, "seed",
                                  (json_int_t)cfg->train.seed, "windows",
                                  "sample j of step k is a pure function of (seed, k, j)"));
    json_object_set_new(root, "rng",
                        json_pack("{s:I, s:s}", "seed", (json_int_t)cfg->train.seed,
                                  "generator",
                                  "counter-based: every draw is a function of (seed, stream, "
                                  "index), so the seed is the whole state"));
    json_object_set_new(root, "files", files);
    json_object_set_new(root, "config", config_json(cfg));
    /* Last, and zero until st_manifest_seal fills it in. */
    json_object_set_new(root, ST_MANIFEST_SEAL_KEY, json_string(ST_MANIFEST_SEAL_ZERO));
    return root;
}

/* ---- publishing: rename, latest, pruning ------------------------------- */

static int step_of_name(const char *name, long long *step)
{
    int n = 0;
    if (sscanf(name, "step_%8lld%n", step, &n) != 1 || n != 13 || name[n])
        return 0;
    return 1;
}

/* The names a save writes under: step_N, and its .tmp-step_N and
 * .old-step_N on the way there. */
static int save_name(const char *name)
{
    long long s;
    if (!strncmp(name, ".tmp-", 5) || !strncmp(name, ".old-", 5))
        name += 5;
    return step_of_name(name, &s);
}

/* A FIFO, socket or device (st_is_special): a save makes only directories
 * and files, so such an entry was put there by someone else.  Moved aside
 * it would be pruned (deleted), and opened it would block. */
static int refuse_special(const char *path)
{
    st_error(path, "is a special file, not a directory, at a name checkpoints are saved "
             "under; hint: move it away, or set checkpoint.dir to another directory");
    return ST_EXIT_USAGE;
}

/* The save of `step` refuses a special file at any of its names, before
 * it writes anything: the earlier checkpoints and `latest` stay as they
 * are. */
static int refuse_special_at_save(const char *dir, int64_t step)
{
    static const char *const prefix[] = {"", ".tmp-", ".old-"};
    char path[8400];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%sstep_%08lld", dir, prefix[i], (long long)step);
        if (st_is_special(path))
            return refuse_special(path);
    }
    return 0;
}

int st_ckpt_refuse_special(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;   /* not made yet: nothing in it */
    char path[8400];
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (save_name(e->d_name) && st_is_special(path))
            rc = refuse_special(path);
    }
    closedir(d);
    return rc;
}

static int cmp_desc(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Keep the newest `keep` step directories; drop leftovers of crashed
 * writes.  Failures are warnings: the new checkpoint is already safe.  A
 * special file at one of these names is not a checkpoint: it is neither
 * counted nor removed. */
static void prune(const char *dir, int64_t keep, int64_t current)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    long long *steps = NULL;
    size_t n = 0, cap = 0;
    char path[8192];
    struct dirent *e;
    while ((e = readdir(d))) {
        long long s;
        const int step = step_of_name(e->d_name, &s);
        const int leftover = !strncmp(e->d_name, ".tmp-step_", 10) ||
                             !strncmp(e->d_name, ".old-step_", 10);
        if (!step && !leftover)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (st_is_special(path))
            continue;
        if (step) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                steps = realloc(steps, cap * sizeof *steps);
            }
            steps[n++] = s;
        } else if (st_rm_rf(path)) {
            st_warn("%s: cannot remove: %s", path, strerror(errno));
        }
    }
    closedir(d);
    qsort(steps, n, sizeof *steps, cmp_desc);
    for (size_t i = (size_t)keep; i < n; i++) {
        if (steps[i] == current)
            continue;
        st_ckpt_step_dir(dir, steps[i], path, sizeof path);
        if (st_rm_rf(path))
            st_warn("%s: cannot remove old checkpoint: %s", path, strerror(errno));
    }
    free(steps);
}

/* Rank 0, after every shard is on disk. */
static int publish(const st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t step,
                   const char *tmp, const uint64_t *all, int64_t n_blocks, int stride)
{
    const char *dir = cfg->checkpoint.dir;
    char path[8400], final[8400], old[8400], latest[8400];
    json_t *root = manifest_json(f, cfg, rt, step, all, n_blocks, stride);
    snprintf(path, sizeof path, "%s/%s", tmp, ST_CKPT_MANIFEST);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_ENSURE_ASCII);
    json_decref(root);
    /* The seal covers the file's exact bytes, final newline included. */
    const size_t len = text ? strlen(text) : 0;
    char *body = text ? realloc(text, len + 2) : NULL;
    if (body) {
        memcpy(body + len, "\n", 2);
        text = body;
        if (st_manifest_seal(text) != 0)
            st_bug("the manifest has no single %s member to seal", ST_MANIFEST_SEAL_KEY);
    }
    int bad = fd < 0 || !body || st_write_all(fd, text, len + 1) || fsync(fd) != 0;
    free(text);
    if (fd >= 0 && close(fd) != 0)
        bad = 1;
    if (bad || st_fsync_dir(tmp) != 0) {
        st_error(path, "cannot write checkpoint manifest: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    st_ckpt_step_dir(dir, step, final, sizeof final);
    snprintf(old, sizeof old, "%s/.old-step_%08lld", dir, (long long)step);
    /* Checked at the start of the save too; one put there since is not
     * moved aside either. */
    int rc = refuse_special_at_save(dir, step);
    if (rc)
        return rc;
    /* A directory of the same step (a run repeated over an old one) is
     * moved aside first: rename() will not replace a non-empty directory. */
    struct stat sb;
    const int replacing = stat(final, &sb) == 0;
    if (replacing && (st_rm_rf(old), rename(final, old) != 0)) {
        st_error(final, "cannot replace existing checkpoint: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    /* Testing aid: a full disk refuses the directory entry. */
    const int disk_full = st_fault_checkpoint_full(step, "rename");
    if (disk_full || rename(tmp, final) != 0) {
        const int err = disk_full ? ENOSPC : errno;
        /* Put the old directory back: left as .old-step_N, the next
         * prune would delete a checkpoint nothing replaced. */
        if (replacing && rename(old, final) != 0)
            st_warn("%s: cannot move back to %s: %s", old, final, strerror(errno));
        st_error(final, "cannot rename checkpoint into place: %s", strerror(err));
        return ST_EXIT_FAILURE;
    }
    if (st_fsync_dir(dir) != 0) {
        st_error(dir, "cannot sync checkpoint directory: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    snprintf(path, sizeof path, "%s/.latest.tmp", dir);
    char line[64];
    snprintf(line, sizeof line, "step_%08lld\n", (long long)step);
    snprintf(latest, sizeof latest, "%s/%s", dir, ST_CKPT_LATEST);
    const int refused = st_refuse_special(latest);
    if (refused)
        return refused;
    if (st_file_write_atomic(latest, path, 0666, st_file_write_string, line)) {
        st_error(latest, "cannot update the latest pointer: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    prune(dir, cfg->checkpoint.keep, step);
    return 0;
}

int st_ckpt_save(st_fsdp *f, const st_config *cfg, const st_runtime *rt, int64_t step)
{
    const char *dir = cfg->checkpoint.dir;
    char tmp[8192], path[8300];
    st_fault_at("ckpt_begin", rt->rank);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step_%08lld", dir, (long long)step);
    int rc = 0;
    if (rt->rank == 0) {
        rc = st_mkdir_p(dir);
        rc = rc ? rc : refuse_special_at_save(dir, step);
        if (!rc && (st_rm_rf(tmp) != 0 || mkdir(tmp, 0777) != 0)) {
            st_error(tmp, "cannot create checkpoint directory: %s", strerror(errno));
            rc = ST_EXIT_FAILURE;
        }
    }
    if ((rc = st_runtime_agree(rc)))
        return rc;
    const int64_t bytes = file_bytes_of(f);
    const int64_t n_blocks = (bytes + ST_CKPT_BLOCK - 1) / ST_CKPT_BLOCK;
    const int stride = (int)(n_blocks + 1);
    uint64_t *mine = st_alloc(sizeof(uint64_t) * (size_t)stride, ST_MEM_OTHER);
    memset(mine, 0, sizeof(uint64_t) * (size_t)stride);
    const int writer = !f->groups || f->groups->layout.replicate_rank == 0;
    if (writer) {
        snprintf(path, sizeof path, "%s/shard_%05d-of-%05d.bin", tmp, f->shard_rank, f->S);
        rc = write_shard(f, path, step, mine);
    } else if (st_fault_crash_in_checkpoint(step)) {
        _exit(ST_EXIT_FAILURE);
    }
    uint64_t *all = rt->rank == 0 ? st_alloc(sizeof(uint64_t) * (size_t)stride *
                                                 (size_t)rt->world, ST_MEM_OTHER)
                                  : NULL;
    st_fault_at("ckpt_gather", rt->rank);
    int grc = st_runtime_gather_u64((const unsigned long long *)mine,
                                    (unsigned long long *)all, stride);
    rc = st_runtime_agree(rc ? rc : grc);
    st_fault_at("ckpt_publish", rt->rank);
    if (!rc && rt->rank == 0)
        rc = publish(f, cfg, rt, step, tmp, all, n_blocks, stride);
    st_free(mine);
    st_free(all);
    /* Nobody goes on (or exits) before `latest` names the new checkpoint. */
    rc = st_runtime_agree(rc);
    if (!rc)
        st_info("shardtrain: checkpoint %s/step_%08lld written", dir, (long long)step);
    /* A failed write leaves no partial files behind (on a full disk they
     * hold the space the user needs back); every writer is past the
     * agreement, so none is still writing into it.  The previous
     * checkpoint and `latest` are untouched. */
    else if (rt->rank == 0 && st_rm_rf(tmp) != 0)
        st_warn("%s: cannot remove: %s", tmp, strerror(errno));
    return rc;
}
