/* The safetensors header parser: a pure function from bytes to a validated
 * tensor table, with no file I/O and no printing, so that the same code runs
 * inside the loader and under libFuzzer (tests/fuzz_safetensors.c).
 *
 * A safetensors file is an 8-byte little-endian length n, n bytes of JSON
 * mapping each tensor name to {dtype, shape, data_offsets [begin, end)}
 * (offsets relative to the data that follows the header), plus an optional
 * "__metadata__" object of strings.  Everything in it is treated as
 * hostile: on success every tensor's byte range lies inside the data
 * section, matches shape x dtype size exactly and overlaps no other tensor,
 * so a caller can pread it without further checks. */
#ifndef ST_SAFETENSORS_PARSE_H
#define ST_SAFETENSORS_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* Headers larger than this are refused before anything is allocated. */
#define ST_STP_MAX_HEADER (100u * 1024u * 1024u)
#define ST_STP_MAX_DIMS 8

enum st_stp_dtype {
    ST_STP_BOOL, ST_STP_U8, ST_STP_I8, ST_STP_F8_E5M2, ST_STP_F8_E4M3,
    ST_STP_I16, ST_STP_U16, ST_STP_F16, ST_STP_BF16,
    ST_STP_I32, ST_STP_U32, ST_STP_F32,
    ST_STP_F64, ST_STP_I64, ST_STP_U64,
    ST_STP_NDTYPES
};

typedef struct {
    char *name;
    int dtype;                      /* enum st_stp_dtype */
    int ndim;
    int64_t shape[ST_STP_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;            /* byte range inside the data section */
} st_stp_tensor;

typedef struct {
    uint64_t header_len;            /* JSON bytes */
    uint64_t data_start;            /* file offset of the data section: 8 + header_len */
    uint64_t data_bytes;            /* size of the data section */
    int n;
    st_stp_tensor *t;               /* in header order */
} st_stp_file;

/* Error messages are written to err (always NUL-terminated), in the form
 * "what is wrong; hint: ..." without the file name, which the caller adds. */

/* Validate the 8-byte length prefix against the file size. */
int st_stp_header_length(const unsigned char prefix[8], uint64_t file_size,
                         uint64_t *header_len, char *err, size_t errn);
/* Parse and validate header_len bytes of JSON for a file whose data section
 * holds data_bytes bytes.  Returns 0 and fills *out (release with
 * st_stp_free), or -1 with err set and *out empty. */
int st_stp_parse_header(const char *json, uint64_t header_len, uint64_t data_bytes,
                        st_stp_file *out, char *err, size_t errn);
/* Both steps over a whole file image in memory (the fuzzer's entry point). */
int st_stp_parse_image(const unsigned char *buf, size_t len, st_stp_file *out,
                       char *err, size_t errn);
void st_stp_free(st_stp_file *f);

const st_stp_tensor *st_stp_find(const st_stp_file *f, const char *name);
const char *st_stp_dtype_name(int dtype);
int st_stp_dtype_size(int dtype);

#endif
