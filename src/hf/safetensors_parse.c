/* safetensors header validation (see safetensors_parse.h).  Kept free of
 * file I/O, logging and the rest of shardtrain so the fuzz target can be
 * built from this file alone (plus jansson).  Every number from the file is
 * range-checked before it is used in arithmetic, and all arithmetic on them
 * is overflow-checked, so no input can make the caller read outside the
 * data section. */
#include "hf/safetensors_parse.h"
#include "base/log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int size;
} dtypes[ST_STP_NDTYPES] = {
    [ST_STP_BOOL] = {"BOOL", 1},       [ST_STP_U8] = {"U8", 1},
    [ST_STP_I8] = {"I8", 1},           [ST_STP_F8_E5M2] = {"F8_E5M2", 1},
    [ST_STP_F8_E4M3] = {"F8_E4M3", 1}, [ST_STP_I16] = {"I16", 2},
    [ST_STP_U16] = {"U16", 2},         [ST_STP_F16] = {"F16", 2},
    [ST_STP_BF16] = {"BF16", 2},       [ST_STP_I32] = {"I32", 4},
    [ST_STP_U32] = {"U32", 4},         [ST_STP_F32] = {"F32", 4},
    [ST_STP_F64] = {"F64", 8},         [ST_STP_I64] = {"I64", 8},
    [ST_STP_U64] = {"U64", 8},
};

const char *st_stp_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < ST_STP_NDTYPES ? dtypes[dtype].name : "?";
}

int st_stp_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < ST_STP_NDTYPES ? dtypes[dtype].size : 0;
}

static __attribute__((format(printf, 3, 4))) int fail(char *err, size_t errn,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (errn > 0)
        vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return -1;
}

int st_stp_header_length(const unsigned char prefix[8], uint64_t file_size,
                         uint64_t *header_len, char *err, size_t errn)
{
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)prefix[i] << (8 * i);
    *header_len = 0;
    if (file_size < 8)
        return fail(err, errn, "not a safetensors file: %llu bytes, shorter than the "
                    "8-byte header length; hint: the file is truncated",
                    (unsigned long long)file_size);
    /* Compare against what is left after the prefix: n + 8 could wrap. */
    if (n > file_size - 8)
        return fail(err, errn, "header length %llu exceeds the file (%llu bytes); hint: "
                    "the file is truncated or not safetensors",
                    (unsigned long long)n, (unsigned long long)file_size);
    if (n > ST_STP_MAX_HEADER)
        return fail(err, errn, "header length %llu is over the %u-byte limit; hint: "
                    "the file is corrupt or not safetensors",
                    (unsigned long long)n, ST_STP_MAX_HEADER);
    if (n < 2)
        return fail(err, errn, "header length %llu is too short for a JSON object; "
                    "hint: the file is corrupt or not safetensors", (unsigned long long)n);
    *header_len = n;
    return 0;
}

static int parse_dtype(const char *s)
{
    for (int d = 0; d < ST_STP_NDTYPES; d++)
        if (strcmp(s, dtypes[d].name) == 0)
            return d;
    return -1;
}

/* One tensor entry: dtype, shape and offsets, each checked in isolation. */
static int parse_entry(const char *name, json_t *info, uint64_t data_bytes,
                       st_stp_tensor *t, char *err, size_t errn)
{
    char pn[128];
    st_printable(name, pn, sizeof pn);
    if (!json_is_object(info))
        return fail(err, errn, "tensor '%s': header entry is not an object; hint: each "
                    "tensor maps to {\"dtype\", \"shape\", \"data_offsets\"}", pn);
    json_t *jd = json_object_get(info, "dtype"), *js = json_object_get(info, "shape"),
           *jo = json_object_get(info, "data_offsets");
    const char *missing = !jd ? "dtype" : !js ? "shape" : !jo ? "data_offsets" : NULL;
    if (missing)
        return fail(err, errn, "tensor '%s': header entry has no \"%s\"; hint: each "
                    "tensor needs dtype, shape and data_offsets", pn, missing);
    if (!json_is_string(jd))
        return fail(err, errn, "tensor '%s': dtype is not a string; hint: the header is corrupt", pn);
    char pd[64];
    t->dtype = parse_dtype(json_string_value(jd));
    if (t->dtype < 0)
        return fail(err, errn, "tensor '%s': unknown dtype '%s'; hint: safetensors "
                    "dtypes are F32, F16, BF16, F64, I64, ...", pn,
                    st_printable(json_string_value(jd), pd, sizeof pd));
    if (!json_is_array(js))
        return fail(err, errn, "tensor '%s': shape is not an array; hint: the header is corrupt", pn);
    size_t nd = json_array_size(js);
    if (nd > ST_STP_MAX_DIMS)
        return fail(err, errn, "tensor '%s': shape has %zu dimensions, at most %d are "
                    "accepted; hint: the header is corrupt", pn, nd, ST_STP_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d))
            return fail(err, errn, "tensor '%s': shape entry %zu is not an integer; hint: "
                        "dimensions are non-negative integers", pn, i);
        json_int_t v = json_integer_value(d);
        if (v < 0)
            return fail(err, errn, "tensor '%s': shape entry %zu is negative (%lld); hint: the header is "
                        "corrupt", pn,
                        i, (long long)v);
        t->shape[i] = (int64_t)v;
        if (__builtin_mul_overflow(numel, (uint64_t)v, &numel))
            return fail(err, errn, "tensor '%s': shape's element count overflows 64 bits; "
                        "hint: the header is corrupt", pn);
    }
    t->numel = numel;
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)dtypes[t->dtype].size, &bytes))
        return fail(err, errn, "tensor '%s': shape's byte size overflows 64 bits; hint: "
                    "the header is corrupt", pn);
    if (!json_is_array(jo) || json_array_size(jo) != 2 ||
        !json_is_integer(json_array_get(jo, 0)) || !json_is_integer(json_array_get(jo, 1)))
        return fail(err, errn, "tensor '%s': data_offsets is not [begin, end] with two "
                    "integers; hint: the header is corrupt", pn);
    json_int_t b = json_integer_value(json_array_get(jo, 0)),
               e = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || e < 0)
        return fail(err, errn, "tensor '%s': data_offsets [%lld, %lld] are negative; hint: the header "
                    "is corrupt", pn,
                    (long long)b, (long long)e);
    if (e < b)
        return fail(err, errn, "tensor '%s': data_offsets [%lld, %lld] are reversed; hint: the header "
                    "is corrupt", pn,
                    (long long)b, (long long)e);
    if ((uint64_t)e > data_bytes)
        return fail(err, errn, "tensor '%s': data_offsets [%lld, %lld] run past the %llu "
                    "bytes of data; hint: the file is truncated or corrupt", pn,
                    (long long)b, (long long)e, (unsigned long long)data_bytes);
    if ((uint64_t)(e - b) != bytes)
        return fail(err, errn, "tensor '%s': data_offsets [%lld, %lld] hold %llu bytes, "
                    "but shape x %s size is %llu; hint: the header is corrupt", pn,
                    (long long)b, (long long)e, (unsigned long long)(e - b),
                    dtypes[t->dtype].name, (unsigned long long)bytes);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const st_stp_tensor *x = *(const st_stp_tensor *const *)a,
                        *y = *(const st_stp_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Two tensors sharing bytes would alias silently; refuse it. */
static int check_overlaps(st_stp_file *f, char *err, size_t errn)
{
    if (f->n < 2)
        return 0;
    st_stp_tensor **s = malloc(sizeof *s * (size_t)f->n);
    if (!s)
        return fail(err, errn, "out of memory checking the header");
    for (int i = 0; i < f->n; i++)
        s[i] = &f->t[i];
    qsort(s, (size_t)f->n, sizeof *s, by_begin);
    int rc = 0;
    const st_stp_tensor *prev = NULL;
    for (int i = 0; i < f->n && !rc; i++) {
        if (s[i]->begin == s[i]->end)
            continue;       /* empty tensors occupy no bytes */
        if (prev && s[i]->begin < prev->end) {
            char a[128], b[128];
            rc = fail(err, errn, "tensors '%s' and '%s' overlap in the data (bytes "
                      "[%llu, %llu) and [%llu, %llu)); hint: the header is corrupt",
                      st_printable(prev->name, a, sizeof a), st_printable(s[i]->name, b, sizeof b),
                      (unsigned long long)prev->begin, (unsigned long long)prev->end,
                      (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
        }
        prev = s[i];
    }
    free(s);
    return rc;
}

static int check_metadata(json_t *meta, char *err, size_t errn)
{
    if (!json_is_object(meta))
        return fail(err, errn, "\"__metadata__\" is not an object; hint: it maps strings "
                    "to strings");
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        char pk[128];
        if (!json_is_string(v))
            return fail(err, errn, "\"__metadata__\" entry '%s' is not a string; hint: it maps strings to "
                        "strings",
                        st_printable(k, pk, sizeof pk));
    }
    return 0;
}

int st_stp_parse_header(const char *json, uint64_t header_len, uint64_t data_bytes,
                        st_stp_file *out, char *err, size_t errn)
{
    memset(out, 0, sizeof *out);
    if (header_len > ST_STP_MAX_HEADER)
        return fail(err, errn, "header length %llu is over the %u-byte limit",
                    (unsigned long long)header_len, ST_STP_MAX_HEADER);
    json_error_t je;
    /* Duplicate names are rejected by the JSON reader itself. */
    json_t *root = json_loadb(json, (size_t)header_len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        /* jansson quotes the offending text, which may hold any byte. */
        char why[160];
        return fail(err, errn, "header is not valid JSON (byte %d: %s); hint: the file is "
                    "corrupt or not safetensors", je.position,
                    st_printable(je.text, why, sizeof why));
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(err, errn, "header JSON is not an object; hint: the file is corrupt "
                    "or not safetensors");
    }
    size_t cap = json_object_size(root);
    out->t = calloc(cap ? cap : 1, sizeof *out->t);
    if (!out->t) {
        json_decref(root);
        return fail(err, errn, "out of memory reading the header");
    }
    out->header_len = header_len;
    out->data_start = 8 + header_len;
    out->data_bytes = data_bytes;
    int rc = 0;
    const char *name;
    json_t *info;
    json_object_foreach(root, name, info) {
        if (strcmp(name, "__metadata__") == 0) {
            rc = check_metadata(info, err, errn);
        } else {
            st_stp_tensor *t = &out->t[out->n];
            rc = parse_entry(name, info, data_bytes, t, err, errn);
            if (!rc && !(t->name = strdup(name)))
                rc = fail(err, errn, "out of memory reading the header");
            if (!rc)
                out->n++;
        }
        if (rc)
            break;
    }
    json_decref(root);
    rc = rc ? rc : check_overlaps(out, err, errn);
    if (rc)
        st_stp_free(out);
    return rc;
}

int st_stp_parse_image(const unsigned char *buf, size_t len, st_stp_file *out,
                       char *err, size_t errn)
{
    memset(out, 0, sizeof *out);
    unsigned char prefix[8] = {0};
    if (len > 0)
        memcpy(prefix, buf, len < 8 ? len : 8);
    uint64_t n;
    if (st_stp_header_length(prefix, len, &n, err, errn))
        return -1;
    return st_stp_parse_header((const char *)buf + 8, n, len - 8 - n, out, err, errn);
}

void st_stp_free(st_stp_file *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    memset(f, 0, sizeof *f);
}

const st_stp_tensor *st_stp_find(const st_stp_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}
