/* safetensors writer (see safetensors_write.h).  Layout: an 8-byte
 * little-endian header length n, n bytes of JSON mapping each tensor name
 * to {dtype, shape, data_offsets [begin, end)} relative to the data that
 * follows, plus an optional "__metadata__" object.  Reading is in
 * safetensors_parse.c (the header) and hf_import.c (the tensors). */
#include "hf/safetensors_write.h"
#include "base/files.h"
#include "base/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What st_file_write_atomic needs to write the file. */
typedef struct {
    const char *header;      /* the JSON */
    size_t header_len, padded_len;
    const st_tensor *ts;
    int n;
    float *const *unit_params;   /* every unit's buffer; NULL: ask source */
    st_unit_source source;
    void *source_ctx;
    int source_failed;           /* the source printed why */
} weights_file;

static int write_weights(int fd, void *ctx)
{
    weights_file *w = ctx;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)w->padded_len >> (8 * i));
    static const char spaces[] = "       ";   /* padding is at most 7 */
    if (st_write_all(fd, le, 8) || st_write_all(fd, w->header, w->header_len) ||
        st_write_all(fd, spaces, w->padded_len - w->header_len))
        return -1;
    /* Tensors in table order, which is how the offsets were assigned.  The
     * table is grouped by unit in increasing order (model.c's layouts), so
     * a source is asked for each unit once, when its first tensor comes. */
    const float *unit = NULL;
    int have = -1;
    for (int i = 0; i < w->n; i++) {
        const st_tensor *t = &w->ts[i];
        if (w->unit_params)
            unit = w->unit_params[t->unit];
        else if (t->unit != have) {
            if (t->unit < have)
                st_bug("tensor table not grouped by unit");
            while (have < t->unit)
                if (!(unit = w->source(++have, w->source_ctx))) {
                    w->source_failed = 1;
                    return -1;
                }
        }
        if (st_write_all(fd, unit + t->offset, sizeof(float) * (size_t)t->numel))
            return -1;
    }
    return 0;
}

/* The JSON header, keys sorted; NULL when out of memory. */
static char *header_json(const st_tensor *ts, int nt, const char *prefix)
{
    json_t *hdr = json_object();
    uint64_t off = 0;
    char name[200];
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = &ts[i];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        json_t *shape = t->ndim == 2 ? json_pack("[I,I]", (json_int_t)t->shape[0],
                                                 (json_int_t)t->shape[1])
                                     : json_pack("[I]", (json_int_t)t->shape[0]);
        uint64_t bytes = (uint64_t)t->numel * 4u;
        json_object_set_new(hdr, name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes)));
        off += bytes;
    }
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(hdr);
    return text;
}

/* Write the file; the tensors from w's unit_params or its source. */
static int save_file(const char *path, const char *prefix, weights_file *w)
{
    int refused = st_refuse_special(path);
    if (refused)
        return refused;
    char *text = header_json(w->ts, w->n, prefix);
    if (!text) {
        st_error(NULL, "out of memory writing %s", path);
        return ST_EXIT_FAILURE;
    }
    /* Pad the header with spaces so tensor data starts 8-byte aligned. */
    size_t n = strlen(text);
    w->header = text;
    w->header_len = n;
    w->padded_len = (n + 7) / 8 * 8;
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(text);
        st_error(path, "path too long");
        return ST_EXIT_FAILURE;
    }
    int step = st_file_write_atomic(path, tmp, 0666, write_weights, w);
    free(text);
    if (step == ST_ATOMIC_CREATE)
        st_error(tmp, "cannot create: %s; hint: check checkpoint.dir", strerror(errno));
    else if (step == ST_ATOMIC_SYNC_DIR)
        st_error(path, "cannot sync its directory: %s", strerror(errno));
    else if (step && !w->source_failed)
        st_error(path, "cannot write: %s", strerror(errno));
    return step ? ST_EXIT_FAILURE : 0;
}

int st_safetensors_save_tensors(const char *path, const st_tensor *ts, int nt,
                                const char *prefix, float *const *unit_bufs)
{
    weights_file w = {.ts = ts, .n = nt, .unit_params = unit_bufs};
    return save_file(path, prefix, &w);
}

int st_safetensors_save_model(const char *path, const st_model *m,
                              float *const *unit_params)
{
    return st_safetensors_save_tensors(path, m->tensors, m->n_tensors, "", unit_params);
}

int st_safetensors_stream_model(const char *path, const st_model *m, st_unit_source source,
                                void *ctx)
{
    weights_file w = {.ts = m->tensors, .n = m->n_tensors, .source = source,
                      .source_ctx = ctx};
    return save_file(path, "", &w);
}
