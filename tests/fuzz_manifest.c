/* libFuzzer target for the checkpoint manifest reader (st_ckpt_open in
 * src/ckpt/checkpoint_read.c, with ckpt/manifest_seal.c, config/schema.c,
 * base/alloc.c and base/log.c).  The resume path, which calls into the
 * runtime and the FSDP engine (MPI), is ckpt/checkpoint_resume.c, so the
 * target links neither.
 *
 * Each input is a manifest.json, written into a step directory.  Manifests
 * are sealed (ckpt/manifest_seal.h): an input holding a "manifest_xxh64"
 * member with a 16-character string value is resealed first, so the fuzzer
 * gets past the seal to the field checks instead of stopping at a checksum
 * mismatch.  Promises checked: the result is 0 or ST_EXIT_USAGE with one
 * line in err; an accepted manifest's ranges are read (from zero-filled
 * shard files when small) without a crash, and st_ckpt_close frees all. */
#include "ckpt/checkpoint.h"
#include "ckpt/manifest_seal.h"
#include "base/log.h"
#include "fuzz_common.h"

#include <fcntl.h>
#include <sys/stat.h>

/* Zero the seal's 16 characters and fill it in again; inputs without a
 * well-formed member are left as they are. */
static void reseal(char *text)
{
    char *k = strstr(text, "\"" ST_MANIFEST_SEAL_KEY "\"");
    if (!k)
        return;
    char *q = strchr(k + strlen(ST_MANIFEST_SEAL_KEY) + 2, '"');
    if (!q || strlen(q) < 18 || q[17] != '"')
        return;
    char saved[16];
    memcpy(saved, q + 1, 16);
    memcpy(q + 1, ST_MANIFEST_SEAL_ZERO, 16);
    if (st_manifest_seal(text) != 0)
        memcpy(q + 1, saved, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[300], path[340];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/step_00000001", fuzz_dir());
        fuzz_require(mkdir(dir, 0700) == 0, "mkdir the step directory");
        snprintf(path, sizeof path, "%s/manifest.json", dir);
    }
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    if (strlen(text) == size)
        reseal(text);
    fuzz_write(path, text, size);
    free(text);

    st_ckpt c;
    char err[1024];
    fuzz_capture();
    int rc = st_ckpt_open(&c, dir, NULL, err, sizeof err);
    fuzz_released(0);
    fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "result is 0 or ST_EXIT_USAGE");
    if (rc != 0) {
        if (getenv("FUZZ_VERBOSE"))   /* to see where an input stops */
            fprintf(stderr, "refused: %.*s\n", (int)sizeof err, err);
        fuzz_require(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0',
                     "a refusal says why");
        fuzz_require(strchr(err, '\n') == NULL, "the reason is one line");
    } else {
        fuzz_accepted();
        int made = 0;
        if (c.file_bytes >= 0 && c.file_bytes <= 65536) {
            for (int i = 0; i < c.n_files; i++) {
                int fd = open(c.file_path[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (fd >= 0 && ftruncate(fd, c.file_bytes) == 0)
                    made++;
                if (fd >= 0)
                    close(fd);
            }
        }
        float out[64];
        for (int u = 0; u < c.n_units && u < 4; u++) {
            int64_t hi = c.numel[u] < 64 ? c.numel[u] : 64;
            for (int which = 0; which < 3; which++) {
                fuzz_capture();
                rc = st_ckpt_read_range(&c, u, which, 0, hi, out, err, sizeof err);
                fuzz_released(0);
                fuzz_require(rc == 0 || rc == ST_EXIT_USAGE || rc == ST_EXIT_FAILURE,
                             "read_range result is an exit status");
            }
        }
        for (int i = 0; i < c.n_files && made; i++)
            unlink(c.file_path[i]);
    }
    st_ckpt_close(&c);
    return 0;
}
