/* libFuzzer target for the safetensors header parser (src/safetensors_parse.c),
 * built with clang -fsanitize=fuzzer,address,undefined from that file alone
 * and run by tests/fuzz.sh.  Each input is a whole file image.  Besides the
 * sanitizers' own checks, every accepted header must satisfy the guarantees
 * the loader relies on (ranges inside the data, sizes exact, no overlap); a
 * violation aborts, which libFuzzer reports as a crash.
 *
 * FUZZ_SELF_TEST=1 makes every accepted input abort, so the test can show
 * that a crash really fails it. */
#include "hf/safetensors_parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void require(int cond, const char *what, const char *name)
{
    if (!cond) {
        fprintf(stderr, "fuzz_safetensors: invariant broken: %s (tensor %s)\n", what,
                name ? name : "-");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int self_test = -1;
    if (self_test < 0)
        self_test = getenv("FUZZ_SELF_TEST") != NULL;
    st_stp_file f;
    char err[512];
    memset(err, 'x', sizeof err);
    int rc = st_stp_parse_image(data, size, &f, err, sizeof err);
    if (rc != 0) {
        require(rc == -1, "error return is -1", NULL);
        require(memchr(err, '\0', sizeof err) != NULL, "error message terminated", NULL);
        require(strchr(err, '\n') == NULL, "error message is one line", NULL);
        require(f.n == 0 && f.t == NULL, "failed parse leaves nothing", NULL);
        return 0;
    }
    require(!self_test, "self-test: an accepted input aborts on purpose", NULL);
    require(f.data_start == 8 + f.header_len, "data_start", NULL);
    require(f.data_start + f.data_bytes == size, "data section ends at the file end", NULL);
    for (int i = 0; i < f.n; i++) {
        const st_stp_tensor *t = &f.t[i];
        require(t->dtype >= 0 && t->dtype < ST_STP_NDTYPES, "dtype in range", t->name);
        require(t->ndim >= 0 && t->ndim <= ST_STP_MAX_DIMS, "ndim in range", t->name);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            require(t->shape[d] >= 0, "dimension non-negative", t->name);
            numel *= (uint64_t)t->shape[d];
        }
        require(numel == t->numel, "numel is the shape's product", t->name);
        require(t->begin <= t->end && t->end <= f.data_bytes, "range inside the data", t->name);
        require(t->end - t->begin == numel * (uint64_t)st_stp_dtype_size(t->dtype),
                "range is shape x dtype size", t->name);
        require(st_stp_find(&f, t->name) == t, "names are unique", t->name);
        for (int j = 0; j < i; j++) {
            const st_stp_tensor *u = &f.t[j];
            if (t->begin < t->end && u->begin < u->end)
                require(t->end <= u->begin || u->end <= t->begin, "no overlap", t->name);
        }
        /* Touch the bytes, as the loader would, so ASan sees any overrun. */
        volatile uint8_t sink = 0;
        for (uint64_t b = t->begin; b < t->end; b++)
            sink ^= data[f.data_start + b];
        (void)sink;
    }
    st_stp_free(&f);
    return 0;
}
