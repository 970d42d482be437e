/* model.init from Hugging Face safetensors (see hf_import.h): find the files
 * (single file, model.safetensors, or shards through the index JSON),
 * validate every header with the pure parser, map the files' tensor names
 * onto the model's tensor table, then pread each rank's own byte ranges.
 *
 * What is accepted, beyond the model's own names and shapes:
 *   - gpt2 names with or without the "transformer." prefix (GPT2LMHeadModel
 *     saves it, GPT2Model and the hub's gpt2 files do not); the Conv1D
 *     weights (c_attn, c_proj, c_fc) in Conv1D's own [in, out] layout, which
 *     is the model's layout, so they are read as they are;
 *   - the buffers transformers saved with some checkpoints, ignored:
 *     gpt2's h.N.attn.bias and h.N.attn.masked_bias (the causal mask) and
 *     llama's model.layers.N.self_attn.rotary_emb.inv_freq;
 *   - no lm_head.weight when the model ties embeddings (the tied head is
 *     the embedding).
 * Anything else is an error: an unknown or duplicated tensor, a missing one,
 * a wrong shape (with a hint when it is the transpose, i.e. a Linear-layout
 * export), a dtype other than F32, F16 or BF16, lm_head.weight in a tied
 * model. */
#include "hf/hf_import.h"
#include "base/files.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/stage_dir.h"
#include "base/test_faults.h"
#include "hf/safetensors_parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* safetensors is little-endian and F32 data is pread straight into the
 * parameters. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "hf_import.c reads little-endian tensor data in place"
#endif

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define CONFIG_NAME "config.json"
/* Index files list tensor names only; anything this large is not one. */
#define MAX_INDEX_BYTES (64u * 1024u * 1024u)

typedef struct {
    char *path;
    int fd;
    st_stp_file hdr;
} src_file;

typedef struct {
    char *index_path;        /* NULL unless sharded */
    json_t *weight_map;      /* the index's, NULL unless sharded */
    int n_files;
    src_file *files;
} source;

/* Prints the error and returns the status for it; reading names the file
 * being read, or is NULL. */
static int out_of_memory(const char *reading)
{
    if (reading)
        st_error(NULL, "out of memory reading %s", reading);
    else
        st_error(NULL, "out of memory");
    return ST_EXIT_FAILURE;
}

/* dir/name in new memory; NULL when out of memory. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* pread all n bytes; -1 with errno set on failure (0 for end of file). */
static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Open one safetensors file and validate its header.  `named_by` is the
 * index that listed it (for the message when it cannot be opened). */
static int open_file(src_file *f, const char *path, const char *named_by, st_hf_io *io)
{
    char err[512];
    f->path = strdup(path);
    /* A FIFO named as weights must not hang the open: it is refused as not
     * a regular file just below. */
    struct stat sb;
    f->fd = st_open_regular_stat(path, &sb);
    if (!f->path)
        return out_of_memory(NULL);
    if (f->fd == ST_OPEN_FAILED) {
        if (named_by)
            st_error(named_by, "shard '%s' cannot be opened: %s; hint: the index names "
                     "a file that is not in its directory", path, strerror(errno));
        else
            st_error(path, "cannot open weights: %s; hint: model.init is 'random', a "
                     ".safetensors file or a Hugging Face model directory", strerror(errno));
        return ST_EXIT_USAGE;
    }
    if (f->fd == ST_OPEN_NOT_REGULAR) {
        f->fd = -1;
        st_error(path, "not a regular file; hint: model.init is a .safetensors file or a "
                 "directory holding one");
        return ST_EXIT_USAGE;
    }
    io->files++;
    unsigned char prefix[8] = {0};
    uint64_t size = (uint64_t)sb.st_size, hlen;
    if (size >= 8 && pread_full(f->fd, prefix, 8, 0) != 0) {
        st_error(path, "cannot read: %s", errno ? strerror(errno) : "file shrank");
        return ST_EXIT_FAILURE;
    }
    if (st_stp_header_length(prefix, size, &hlen, err, sizeof err)) {
        st_error(path, "%s", err);
        return ST_EXIT_USAGE;
    }
    char *json = malloc((size_t)hlen);
    if (!json)
        return out_of_memory(path);
    if (pread_full(f->fd, json, (size_t)hlen, 8) != 0) {
        st_error(path, "cannot read the header: %s", errno ? strerror(errno) : "file shrank");
        free(json);
        return ST_EXIT_FAILURE;
    }
    io->header_read += 8 + hlen;
    int rc = st_stp_parse_header(json, hlen, size - 8 - hlen, &f->hdr, err, sizeof err);
    free(json);
    if (rc) {
        st_error(path, "%s", err);
        return ST_EXIT_USAGE;
    }
    return 0;
}

static int add_file(source *s, const char *path, const char *named_by, st_hf_io *io)
{
    src_file *nf = realloc(s->files, sizeof *nf * (size_t)(s->n_files + 1));
    if (!nf)
        return out_of_memory(NULL);
    s->files = nf;
    src_file *f = &s->files[s->n_files++];
    memset(f, 0, sizeof *f);
    f->fd = -1;
    return open_file(f, path, named_by, io);
}

/* A shard name from an index must stay inside the index's directory. */
static int plain_file_name(const char *s)
{
    return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

static int open_index(source *s, const char *dir, st_hf_io *io)
{
    const char *ip = s->index_path;
    FILE *fp = st_fopen_regular(ip);
    if (!fp) {
        st_error(ip, "cannot open: %s", errno == EINVAL ? "not a regular file" : strerror(errno));
        return ST_EXIT_USAGE;
    }
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || (uint64_t)sb.st_size > MAX_INDEX_BYTES) {
        fclose(fp);
        st_error(ip, "larger than %u bytes; hint: not a safetensors index", MAX_INDEX_BYTES);
        return ST_EXIT_USAGE;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        fclose(fp);
        return out_of_memory(NULL);
    }
    size_t n = fread(buf, 1, (size_t)sb.st_size, fp);
    fclose(fp);
    io->header_read += n;
    json_error_t je;
    json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root) {
        char why[160];
        st_error(ip, "not valid JSON (line %d: %s); hint: the index maps \"weight_map\" "
                 "tensor names to shard files", je.line,
                 st_printable(je.text, why, sizeof why));
        return ST_EXIT_USAGE;
    }
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm) || json_object_size(wm) == 0) {
        json_decref(root);
        st_error(ip, "has no \"weight_map\" object naming the shards; hint: not a "
                 "safetensors index");
        return ST_EXIT_USAGE;
    }
    s->weight_map = json_incref(wm);
    json_decref(root);
    /* Open each distinct shard once, in the order the index first names it. */
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v) {
        char pn[128], pv[128];
        if (!json_is_string(v) || !plain_file_name(json_string_value(v))) {
            st_error(ip, "tensor '%s' maps to %s; hint: shards are file names in the "
                     "index's directory", st_printable(name, pn, sizeof pn),
                     json_is_string(v) ? st_printable(json_string_value(v), pv, sizeof pv)
                                       : "a value that is not a string");
            return ST_EXIT_USAGE;
        }
        const char *shard = json_string_value(v);
        int seen = 0;
        for (int i = 0; i < s->n_files && !seen; i++)
            seen = strcmp(strrchr(s->files[i].path, '/') + 1, shard) == 0;
        if (seen)
            continue;
        char *p = join(dir, shard);
        int rc = p ? add_file(s, p, ip, io) : out_of_memory(NULL);
        free(p);
        if (rc)
            return rc;
    }
    return 0;
}

/* Where model.init points: a file, or a directory in the HF layout. */
/* The directory of model.init (itself, or the one holding the file) must
 * not be one that a killed export left half written: it would load as new
 * weights beside an old config.json, or the reverse. */
static int whole_source(const char *init, int is_dir)
{
    const char *slash = strrchr(init, '/');
    if (is_dir || !slash)
        return st_stage_check_whole(is_dir ? init : ".");
    char parent[4096];
    snprintf(parent, sizeof parent, "%.*s", slash == init ? 1 : (int)(slash - init), init);
    return st_stage_check_whole(parent);
}

static int open_source(source *s, const char *init, const st_model_config *mc, st_hf_io *io)
{
    struct stat sb;
    if (stat(init, &sb) != 0) {
        st_error(init, "cannot open weights: %s; hint: model.init is 'random', a "
                 ".safetensors file or a Hugging Face model directory", strerror(errno));
        return ST_EXIT_USAGE;
    }
    int rc = whole_source(init, S_ISDIR(sb.st_mode));
    if (rc)
        return rc;
    if (!S_ISDIR(sb.st_mode))
        return add_file(s, init, NULL, io);
    char *cfg = join(init, CONFIG_NAME), *single = join(init, SINGLE_NAME);
    s->index_path = join(init, INDEX_NAME);
    if (!cfg || !single || !s->index_path) {
        free(cfg);
        free(single);
        return out_of_memory(NULL);     /* close_source frees index_path */
    }
    int has_index = is_regular(s->index_path), has_single = is_regular(single);
    /* The config's shape is checked first: a mismatch there names the field,
     * which says more than the tensor shapes that would follow from it. */
    if (is_regular(cfg))
        rc = st_hf_check_config(cfg, mc);
    if (!rc && has_index && has_single) {
        st_error(init, "holds both %s and %s; hint: keep the one that is current",
                 SINGLE_NAME, INDEX_NAME);
        rc = ST_EXIT_USAGE;
    } else if (!rc && !has_index && !has_single) {
        st_error(init, "directory has neither %s nor %s; hint: model.init is a .safetensors "
                 "file or a Hugging Face model directory", SINGLE_NAME, INDEX_NAME);
        rc = ST_EXIT_USAGE;
    } else if (!rc && has_index) {
        rc = open_index(s, init, io);
    } else if (!rc) {
        free(s->index_path);
        s->index_path = NULL;
        rc = add_file(s, single, NULL, io);
    }
    free(cfg);
    free(single);
    return rc;
}

static void close_source(source *s)
{
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].fd >= 0)
            close(s->files[i].fd);
        free(s->files[i].path);
        st_stp_free(&s->files[i].hdr);
    }
    free(s->files);
    free(s->index_path);
    json_decref(s->weight_map);
    memset(s, 0, sizeof *s);
}

/* The model's name for a file's tensor name (into buf). */
static const char *canonical(const st_model *m, const char *name, char *buf, size_t n)
{
    if (m->arch == ST_ARCH_GPT2 && strncmp(name, "transformer.", 12) != 0 &&
        strcmp(name, "lm_head.weight") != 0) {
        snprintf(buf, n, "transformer.%s", name);
        return buf;
    }
    return name;
}

/* "PREFIX<digits>.SUFFIX" exactly. */
static int layer_name(const char *s, const char *prefix, const char *suffix)
{
    size_t lp = strlen(prefix);
    if (strncmp(s, prefix, lp) != 0)
        return 0;
    s += lp;
    if (*s < '0' || *s > '9')
        return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '.' && strcmp(s + 1, suffix) == 0;
}

/* Buffers some checkpoints carry that are not parameters. */
static int ignorable(const st_model *m, const char *canon)
{
    if (m->arch == ST_ARCH_GPT2)
        return layer_name(canon, "transformer.h.", "attn.bias") ||
               layer_name(canon, "transformer.h.", "attn.masked_bias");
    return layer_name(canon, "model.layers.", "self_attn.rotary_emb.inv_freq");
}

typedef struct {
    int file;                /* -1: not found yet */
    const st_stp_tensor *t;
} mapping;

static int is_float_dtype(int d)
{
    return d == ST_STP_F32 || d == ST_STP_F16 || d == ST_STP_BF16;
}

static int check_tensor(const st_model *m, const st_tensor *t, const src_file *f,
                        const st_stp_tensor *s)
{
    char pn[128];
    st_printable(s->name, pn, sizeof pn);
    if (!is_float_dtype(s->dtype)) {
        st_error(f->path, "tensor '%s' has dtype %s; hint: model weights must be F32, F16 "
                 "or BF16", pn, st_stp_dtype_name(s->dtype));
        return ST_EXIT_USAGE;
    }
    int same = s->ndim == t->ndim;
    for (int i = 0; same && i < t->ndim; i++)
        same = s->shape[i] == t->shape[i];
    if (same)
        return 0;
    char got[160] = "[", want[64];
    for (int i = 0; i < s->ndim; i++) {
        size_t l = strlen(got);
        snprintf(got + l, sizeof got - l, "%s%lld", i ? "," : "", (long long)s->shape[i]);
    }
    strncat(got, "]", sizeof got - strlen(got) - 1);
    if (t->ndim == 2)
        snprintf(want, sizeof want, "[%lld,%lld]", (long long)t->shape[0],
                 (long long)t->shape[1]);
    else
        snprintf(want, sizeof want, "[%lld]", (long long)t->shape[0]);
    int transposed = t->ndim == 2 && s->ndim == 2 && s->shape[0] == t->shape[1] &&
                     s->shape[1] == t->shape[0];
    if (transposed && m->arch == ST_ARCH_GPT2)
        st_error(f->path, "tensor '%s' has shape %s, the model needs %s; hint: it is "
                 "stored transposed, as a Linear [out, in]; GPT-2 weights are read in "
                 "Conv1D's [in, out] layout, as transformers saves them", pn, got, want);
    else
        st_error(f->path, "tensor '%s' has shape %s, the model needs %s; hint: check the "
                 "[model] keys against the weights' config.json", pn, got, want);
    return ST_EXIT_USAGE;
}

/* The shard the index assigns a tensor (by its name in the file). */
static const char *index_shard(const source *s, const char *name)
{
    json_t *v = json_object_get(s->weight_map, name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int build_mapping(const source *s, const st_model *m, mapping *map)
{
    for (int i = 0; i < m->n_tensors; i++)
        map[i] = (mapping){-1, NULL};
    char buf[512], pn[128];
    for (int fi = 0; fi < s->n_files; fi++) {
        const src_file *f = &s->files[fi];
        const char *base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
        for (int k = 0; k < f->hdr.n; k++) {
            const st_stp_tensor *st = &f->hdr.t[k];
            st_printable(st->name, pn, sizeof pn);
            if (s->weight_map) {
                const char *want = index_shard(s, st->name);
                if (!want || strcmp(want, base) != 0) {
                    st_error(f->path, "tensor '%s' is not listed for this shard in %s; "
                             "hint: the index and the shards disagree", pn, INDEX_NAME);
                    return ST_EXIT_USAGE;
                }
            }
            const char *canon = canonical(m, st->name, buf, sizeof buf);
            if (ignorable(m, canon))
                continue;
            const st_tensor *t = st_model_find(m, canon);
            if (!t && m->tied && strcmp(canon, "lm_head.weight") == 0) {
                st_error(f->path, "tensor 'lm_head.weight' is present but "
                         "model.tie_embeddings is true; hint: set tie_embeddings = false "
                         "to start from an untied head");
                return ST_EXIT_USAGE;
            }
            if (!t) {
                st_error(f->path, "tensor '%s' is not part of this model; hint: check "
                         "model.arch, n_layer and tie_embeddings against the weights", pn);
                return ST_EXIT_USAGE;
            }
            mapping *mp = &map[t - m->tensors];
            if (mp->file >= 0) {
                char po[128];
                st_error(f->path, "tensor '%s' is given twice (also as '%s' in %s); hint: "
                         "keep one copy", pn, st_printable(mp->t->name, po, sizeof po),
                         s->files[mp->file].path);
                return ST_EXIT_USAGE;
            }
            int rc = check_tensor(m, t, f, st);
            if (rc)
                return rc;
            *mp = (mapping){fi, st};
        }
    }
    /* Every tensor the index names must be in the shard it names. */
    if (s->weight_map) {
        const char *name;
        json_t *v;
        json_object_foreach(s->weight_map, name, v) {
            int found = 0;
            for (int fi = 0; fi < s->n_files && !found; fi++)
                found = strcmp(strrchr(s->files[fi].path, '/') + 1, json_string_value(v)) == 0 &&
                        st_stp_find(&s->files[fi].hdr, name) != NULL;
            if (!found) {
                char pv[128];
                st_error(s->index_path, "names tensor '%s' in shard '%s', which does not "
                         "hold it; hint: the index and the shards disagree",
                         st_printable(name, pn, sizeof pn),
                         st_printable(json_string_value(v), pv, sizeof pv));
                return ST_EXIT_USAGE;
            }
        }
    }
    const char *where = s->index_path ? s->index_path : s->files[0].path;
    for (int i = 0; i < m->n_tensors; i++) {
        if (map[i].file >= 0)
            continue;
        if (strcmp(m->tensors[i].name, "lm_head.weight") == 0)
            st_error(where, "tensor 'lm_head.weight' is missing; hint: the weights tie the "
                     "head to the embedding: set model.tie_embeddings = true");
        else
            st_error(where, "tensor '%s' is missing; hint: check model.arch and n_layer "
                     "against the weights", m->tensors[i].name);
        return ST_EXIT_USAGE;
    }
    return 0;
}

/* IEEE half to float; subnormals scale exactly by 2^-24. */
float st_hf_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    float f;
    if (e == 0) {
        f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    uint32_t bits = sign | (e == 31 ? 0x7f800000u | (man << 13)
                                    : ((e - 15 + 127) << 23) | (man << 13));
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Elements [e0, e0 + n) of a file tensor into dst, converted to fp32. */
static int read_elements(const src_file *f, const st_stp_tensor *s, uint64_t e0, uint64_t n,
                         float *dst, st_hf_io *io)
{
    const int es = st_stp_dtype_size(s->dtype);
    uint64_t off = f->hdr.data_start + s->begin + e0 * (uint64_t)es;
    if (s->dtype == ST_STP_F32) {
        /* Little-endian host: the bytes are the floats. */
        if (pread_full(f->fd, dst, (size_t)n * 4, off) != 0)
            goto io_error;
        io->data_read += n * 4;
        return 0;
    }
    enum { CHUNK = 1 << 20 };
    uint16_t *stage = malloc(sizeof(uint16_t) * (size_t)(n < CHUNK ? n : CHUNK));
    if (!stage)
        return out_of_memory(f->path);
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done < CHUNK ? n - done : CHUNK;
        if (pread_full(f->fd, stage, (size_t)k * 2, off + done * 2) != 0) {
            free(stage);
            goto io_error;
        }
        if (s->dtype == ST_STP_BF16)
            st_unpack_bf16(dst + done, stage, (int64_t)k);
        else
            for (uint64_t i = 0; i < k; i++)
                dst[done + i] = st_hf_half_to_float(stage[i]);
        io->data_read += k * 2;
        done += k;
    }
    free(stage);
    return 0;
io_error:
    char pn[128];
    st_error(f->path, "cannot read tensor '%s': %s", st_printable(s->name, pn, sizeof pn),
             errno ? strerror(errno) : "the file shrank while reading");
    return ST_EXIT_FAILURE;
}

static int read_slices(const source *s, const st_model *m, const mapping *map,
                       const int64_t *lo, const int64_t *len, float *const *dst, st_hf_io *io)
{
    for (int u = 0; u < m->n_units; u++) {
        const st_unit *un = &m->units[u];
        int64_t hi = lo[u] + len[u];
        for (int i = un->first_tensor; i < un->first_tensor + un->n_tensors; i++) {
            const st_tensor *t = &m->tensors[i];
            int64_t a = t->offset > lo[u] ? t->offset : lo[u];
            int64_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
            if (a >= b)
                continue;
            int rc = read_elements(&s->files[map[i].file], map[i].t,
                                   (uint64_t)(a - t->offset), (uint64_t)(b - a),
                                   dst[u] + (a - lo[u]), io);
            if (rc)
                return rc;
        }
        for (int64_t e = lo[u] > un->numel ? lo[u] : un->numel; e < hi; e++)
            dst[u][e - lo[u]] = 0.0f;
    }
    return 0;
}

struct st_hf_weights {
    const st_model *m;
    source s;
    mapping *map;            /* each model tensor's file and header entry */
    st_hf_io io;
    int failed;
};

int st_hf_open(const char *init, const st_model *m, const st_model_config *mc,
               st_hf_weights **out)
{
    *out = NULL;
    st_hf_weights *w = calloc(1, sizeof *w);
    mapping *map = w ? malloc(sizeof *map * (size_t)m->n_tensors) : NULL;
    if (!map) {
        free(w);
        return out_of_memory(NULL);
    }
    w->m = m;
    w->map = map;
    int rc = open_source(&w->s, init, mc, &w->io);
    rc = rc ? rc : build_mapping(&w->s, m, map);
    if (rc) {
        w->failed = 1;
        st_hf_close(w, NULL);
        return rc;
    }
    for (int i = 0; i < m->n_tensors; i++)
        w->io.data_total += map[i].t->end - map[i].t->begin;
    *out = w;
    return 0;
}

int st_hf_read(st_hf_weights *w, const int64_t *lo, const int64_t *len, float *const *dst)
{
    int rc = read_slices(&w->s, w->m, w->map, lo, len, dst, &w->io);
    if (rc)
        w->failed = 1;
    return rc;
}

void st_hf_close(st_hf_weights *w, st_hf_io *io)
{
    if (!w)
        return;
    /* One line for everything read through the handle: the headers once,
     * however many reads followed. */
    if (!w->failed && st_fault_debug_io())
        fprintf(stderr, "shardtrain: debug: rank %d read %llu of %llu tensor data bytes "
                "and %llu header bytes from %d files\n", st_log_rank(),
                (unsigned long long)w->io.data_read, (unsigned long long)w->io.data_total,
                (unsigned long long)w->io.header_read, w->io.files);
    if (io)
        *io = w->io;
    free(w->map);
    close_source(&w->s);
    free(w);
}

int st_hf_load_slices(const char *init, const st_model *m, const st_model_config *mc,
                      const int64_t *lo, const int64_t *len, float *const *dst,
                      st_hf_io *io)
{
    if (io)
        memset(io, 0, sizeof *io);
    st_hf_weights *w;
    int rc = st_hf_open(init, m, mc, &w);
    rc = rc ? rc : st_hf_read(w, lo, len, dst);
    st_hf_close(w, io);
    return rc;
}
