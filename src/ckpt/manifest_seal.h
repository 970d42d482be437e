/* The checkpoint manifest's own checksum.  Every shard byte is covered by
 * the block checksums the manifest lists, but the manifest itself (the
 * step, the optimizer's step count, the layout, those checksums) was
 * trusted as written: one flipped digit resumed a different run.  So the
 * manifest's last member is "manifest_xxh64": the XXH64 of the file's
 * exact bytes with that member's 16 hex digits written as zeros.  Working
 * on bytes, not on re-serialised JSON, keeps the check independent of how
 * a JSON library formats numbers. */
#ifndef ST_MANIFEST_SEAL_H
#define ST_MANIFEST_SEAL_H

#include <stddef.h>

#define ST_MANIFEST_SEAL_KEY "manifest_xxh64"
/* The value a manifest is serialised with before st_manifest_seal. */
#define ST_MANIFEST_SEAL_ZERO "0000000000000000"

/* Fill in the seal of text (NUL-terminated JSON holding the member
 * "manifest_xxh64": "0000000000000000" once).  Returns 0, or -1 when the
 * member is not there exactly once. */
int st_manifest_seal(char *text);

/* Check the seal of a manifest's bytes.  Returns 0 when it holds; else -1
 * with why (missing, malformed or mismatched) in why[n]. */
int st_manifest_verify(const char *bytes, size_t len, char *why, size_t n);

#endif
