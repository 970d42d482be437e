/* safetensors writer (see safetensors_write.h).  Layout: an 8-byte
 * little-endian header length n, n bytes of JSON mapping each tensor name
 * to {dtype, shape, data_offsets [begin, end)} relative to the data that
 * follows, plus an optional "__metadata__" object.  Reading is in
 * safetensors_parse.c (the header) and hf_import.c (the tensors). */
#include "io/safetensors_write.h"
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
    float *const *unit_params;
} weights_file;

static int write_weights(int fd, void *ctx)
{
    const weights_file *w = ctx;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)w->padded_len >> (8 * i));
    static const char spaces[] = "       ";   /* padding is at most 7 */
    if (st_write_all(fd, le, 8) || st_write_all(fd, w->header, w->header_len) ||
        st_write_all(fd, spaces, w->padded_len - w->header_len))
        return -1;
    /* Tensors in table order, which is how the offsets were assigned. */
    for (int i = 0; i < w->n; i++) {
        const st_tensor *t = &w->ts[i];
        const float *src = w->unit_params[t->unit] + t->offset;
        if (st_write_all(fd, src, sizeof(float) * (size_t)t->numel))
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

int st_safetensors_save_model(const char *path, const st_model *m,
                              float *const *unit_params)
{
    return st_safetensors_save_tensors(path, m->tensors, m->n_tensors, "", unit_params);
}

int st_safetensors_save_tensors(const char *path, const st_tensor *ts, int nt,
                                const char *prefix, float *const *unit_bufs)
{
    char *text = header_json(ts, nt, prefix);
    if (!text) {
        st_error(NULL, "out of memory writing %s", path);
        return ST_EXIT_FAILURE;
    }
    /* Pad the header with spaces so tensor data starts 8-byte aligned. */
    size_t n = strlen(text);
    weights_file w = {text, n, (n + 7) / 8 * 8, ts, nt, unit_bufs};
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(text);
        st_error(path, "path too long");
        return ST_EXIT_FAILURE;
    }
    int step = st_file_write_atomic(path, tmp, 0666, write_weights, &w);
    free(text);
    if (step == ST_ATOMIC_CREATE)
        st_error(tmp, "cannot create: %s; hint: check checkpoint.dir", strerror(errno));
    else if (step == ST_ATOMIC_SYNC_DIR)
        st_error(path, "cannot sync its directory: %s", strerror(errno));
    else if (step)
        st_error(path, "cannot write: %s", strerror(errno));
    return step ? ST_EXIT_FAILURE : 0;
}
