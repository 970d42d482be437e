/* safetensors writer (see safetensors.h).  Layout: an 8-byte
 * little-endian header length n, n bytes of JSON mapping each tensor name
 * to {dtype, shape, data_offsets [begin, end)} relative to the data that
 * follows, plus an optional "__metadata__" object.  Reading is in
 * safetensors_parse.c (the header) and hf_import.c (the tensors). */
#include "io/safetensors_write.h"
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


int st_safetensors_save_model(const char *path, const st_model *m,
                              float *const *unit_params)
{
    json_t *hdr = json_object();
    uint64_t off = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        json_t *shape = t->ndim == 2 ? json_pack("[I,I]", (json_int_t)t->shape[0],
                                                 (json_int_t)t->shape[1])
                                     : json_pack("[I]", (json_int_t)t->shape[0]);
        uint64_t bytes = (uint64_t)t->numel * 4u;
        json_object_set_new(hdr, t->name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", shape,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes)));
        off += bytes;
    }
    json_object_set_new(hdr, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(hdr);
    if (!text)
        st_die(ST_EXIT_FAILURE, "out of memory writing %s", path);
    /* Pad the header with spaces so tensor data starts 8-byte aligned. */
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;

    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        free(text);
        st_error(path, "path too long");
        return ST_EXIT_FAILURE;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(text);
        st_error(tmp, "cannot create: %s; hint: check checkpoint.dir", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    uint64_t hlen = padded;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hlen >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(text, 1, n, f) == n;
    for (size_t i = n; ok && i < padded; i++)
        ok = fputc(' ', f) != EOF;
    free(text);
    /* Tensors in table order, which is how the offsets were assigned. */
    for (int i = 0; ok && i < m->n_tensors; i++) {
        const st_tensor *t = &m->tensors[i];
        const float *src = unit_params[t->unit] + t->offset;
        ok = fwrite(src, sizeof(float), (size_t)t->numel, f) == (size_t)t->numel;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        st_error(path, "cannot write: %s", strerror(errno));
        unlink(tmp);
        return ST_EXIT_FAILURE;
    }
    return 0;
}
