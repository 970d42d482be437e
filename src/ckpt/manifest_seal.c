/* The manifest's own checksum (see manifest_seal.h). */
#include "ckpt/manifest_seal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The member as the manifest writer serialises it (JSON_INDENT(1)).  Inside
 * a JSON string a quote is always escaped, so this byte sequence cannot
 * occur within a string value. */
static const char member[] = "\"" ST_MANIFEST_SEAL_KEY "\": \"";

/* The offset of the 16 hex digits of the one seal member, or -1 when there
 * is none or more than one. */
static long seal_digits(const char *bytes, size_t len)
{
    const size_t m = sizeof member - 1;
    long at = -1;
    for (size_t i = 0; i + m + 17 <= len; i++) {
        if (bytes[i] != '"' || memcmp(bytes + i, member, m) != 0)
            continue;
        if (at >= 0)
            return -1;
        at = (long)(i + m);
    }
    if (at >= 0 && bytes[at + 16] != '"')
        return -1;
    return at;
}

int st_manifest_seal(char *text)
{
    const size_t len = strlen(text);
    long at = seal_digits(text, len);
    if (at < 0 || memcmp(text + at, ST_MANIFEST_SEAL_ZERO, 16) != 0)
        return -1;
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, (uint64_t)XXH64(text, len, 0));
    memcpy(text + at, hex, 16);
    return 0;
}

int st_manifest_verify(const char *bytes, size_t len, char *why, size_t n)
{
    long at = seal_digits(bytes, len);
    if (at < 0) {
        snprintf(why, n, "field %s is missing or repeated", ST_MANIFEST_SEAL_KEY);
        return -1;
    }
    char hex[17];
    memcpy(hex, bytes + at, 16);
    hex[16] = '\0';
    char *end;
    uint64_t want = strtoull(hex, &end, 16);
    if (*end || strspn(hex, "0123456789abcdef") != 16) {
        snprintf(why, n, "field %s is not 16 lowercase hex digits", ST_MANIFEST_SEAL_KEY);
        return -1;
    }
    char *copy = malloc(len);
    if (!copy) {
        snprintf(why, n, "out of memory checking %s", ST_MANIFEST_SEAL_KEY);
        return -1;
    }
    memcpy(copy, bytes, len);
    memcpy(copy + at, ST_MANIFEST_SEAL_ZERO, 16);
    uint64_t got = XXH64(copy, len, 0);
    free(copy);
    if (got != want) {
        snprintf(why, n, "the manifest does not match its %s (%016" PRIx64 " in the file, "
                 "%016" PRIx64 " computed): it was edited or damaged after it was written",
                 ST_MANIFEST_SEAL_KEY, want, got);
        return -1;
    }
    return 0;
}
