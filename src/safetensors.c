/* safetensors reader and writer (see safetensors.h).  Layout: an 8-byte
 * little-endian header length n, n bytes of JSON mapping each tensor name
 * to {dtype, shape, data_offsets [begin, end)} relative to the data that
 * follows, plus an optional "__metadata__" object.  The header is parsed
 * with jansson. */
#include "safetensors.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Refuse absurd headers before allocating for them. */
#define MAX_HEADER_BYTES (100u * 1024u * 1024u)

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

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu,
             man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int dtype_size(const char *d)
{
    if (!strcmp(d, "F32"))
        return 4;
    if (!strcmp(d, "F16") || !strcmp(d, "BF16"))
        return 2;
    return 0;
}

static void convert(float *dst, const unsigned char *src, const char *dtype, int64_t n)
{
    if (!strcmp(dtype, "F32")) {
        memcpy(dst, src, (size_t)n * 4);
        return;
    }
    int bf16 = !strcmp(dtype, "BF16");
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
        if (bf16) {
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, sizeof bits);
        } else {
            dst[i] = half_to_float(h);
        }
    }
}

/* Check one header entry against the model's tensor t and copy it. */
static int load_tensor(const char *path, const char *name, json_t *info,
                       const st_tensor *t, const unsigned char *data,
                       uint64_t data_bytes, float *dst)
{
    const char *dtype = NULL;
    json_t *shape = NULL, *offs = NULL;
    if (!json_is_object(info) ||
        json_unpack(info, "{s:s,s:o,s:o}", "dtype", &dtype, "shape", &shape,
                    "data_offsets", &offs) != 0 ||
        !json_is_array(shape) || !json_is_array(offs) || json_array_size(offs) != 2) {
        st_error(path, "tensor '%s': header entry needs dtype, shape and data_offsets", name);
        return ST_EXIT_USAGE;
    }
    int es = dtype_size(dtype);
    if (!es) {
        st_error(path, "tensor '%s': dtype %s not supported; hint: use F32, F16 or BF16",
                 name, dtype);
        return ST_EXIT_USAGE;
    }
    size_t nd = json_array_size(shape);
    int shape_ok = (int)nd == t->ndim;
    for (size_t i = 0; shape_ok && i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        shape_ok = json_is_integer(d) && json_integer_value(d) == t->shape[i];
    }
    if (!shape_ok) {
        char *s = json_dumps(shape, JSON_COMPACT);
        if (t->ndim == 2)
            st_error(path, "tensor '%s' has shape %s, the model needs [%lld,%lld]; "
                     "hint: check [model] keys against the file's config",
                     name, s ? s : "?", (long long)t->shape[0], (long long)t->shape[1]);
        else
            st_error(path, "tensor '%s' has shape %s, the model needs [%lld]; "
                     "hint: check [model] keys against the file's config",
                     name, s ? s : "?", (long long)t->shape[0]);
        free(s);
        return ST_EXIT_USAGE;
    }
    json_t *jb = json_array_get(offs, 0), *je = json_array_get(offs, 1);
    if (!json_is_integer(jb) || !json_is_integer(je) || json_integer_value(jb) < 0 ||
        json_integer_value(je) < json_integer_value(jb)) {
        st_error(path, "tensor '%s': bad data_offsets", name);
        return ST_EXIT_USAGE;
    }
    uint64_t b = (uint64_t)json_integer_value(jb), e = (uint64_t)json_integer_value(je);
    if (e > data_bytes || e - b != (uint64_t)t->numel * (uint64_t)es) {
        st_error(path, "tensor '%s': data_offsets [%llu, %llu) do not fit %lld %s "
                 "elements inside %llu data bytes; hint: the file is truncated or corrupt",
                 name, (unsigned long long)b, (unsigned long long)e, (long long)t->numel,
                 dtype, (unsigned long long)data_bytes);
        return ST_EXIT_USAGE;
    }
    convert(dst, data + b, dtype, t->numel);
    return 0;
}

int st_safetensors_load_model(const char *path, const st_model *m,
                              float *const *unit_params)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st_error(path, "cannot open weights: %s; hint: model.init is 'random' or a "
                 ".safetensors file", strerror(errno));
        return ST_EXIT_USAGE;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 8) {
        close(fd);
        st_error(path, "not a safetensors file (too short or not a regular file)");
        return ST_EXIT_USAGE;
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        st_error(path, "cannot map: %s", strerror(errno));
        return ST_EXIT_FAILURE;
    }
    int rc = ST_EXIT_USAGE;
    json_t *hdr = NULL;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)map[i] << (8 * i);
    if (hlen > MAX_HEADER_BYTES || hlen > size - 8) {
        st_error(path, "header length %llu exceeds the file (%llu bytes); hint: the "
                 "file is truncated or not safetensors",
                 (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    json_error_t jerr;
    hdr = json_loadb((const char *)map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!hdr || !json_is_object(hdr)) {
        st_error(path, "bad header JSON: %s", hdr ? "not an object" : jerr.text);
        goto out;
    }
    const unsigned char *data = map + 8 + hlen;
    uint64_t data_bytes = size - 8 - hlen;
    const char *name;
    json_t *info;
    json_object_foreach(hdr, name, info) {
        if (!strcmp(name, "__metadata__"))
            continue;
        const st_tensor *t = st_model_find(m, name);
        if (!t) {
            st_error(path, "tensor '%s' is not part of this model; hint: check "
                     "model.arch, n_layer and tie_embeddings", name);
            goto out;
        }
        if (load_tensor(path, name, info, t, data, data_bytes,
                        unit_params[t->unit] + t->offset))
            goto out;
    }
    for (int i = 0; i < m->n_tensors; i++)
        if (!json_object_get(hdr, m->tensors[i].name)) {
            st_error(path, "tensor '%s' is missing", m->tensors[i].name);
            goto out;
        }
    rc = 0;
out:
    json_decref(hdr);
    munmap(map, size);
    return rc;
}
