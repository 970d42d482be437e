/* libFuzzer target for the configuration reader (src/config/config_load.c with
 * the schema, limits and origin files it needs, and base/log.c; nothing
 * stubbed).  An input is the INI file's bytes, optionally followed by a NUL
 * byte and `-s` overrides, one per line (at most 8), so the fuzzer reaches
 * both the file and the command-line path.  A few environment variables are
 * set so that ${VAR} and ${VAR:-default} expand to numbers, words and the
 * empty string.  Promises checked: the result is 0 or ST_EXIT_USAGE, a
 * rejected input prints exactly one error line, st_config_free releases
 * everything (LeakSanitizer). */
#include "config/config.h"
#include "base/log.h"
#include "fuzz_common.h"

#define MAX_OVERRIDES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[300];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/fuzz.ini", fuzz_dir());
        setenv("FUZZ_NUM", "4", 1);
        setenv("FUZZ_WORD", "gpt2", 1);
        setenv("FUZZ_EMPTY", "", 1);
        setenv("FUZZ_REAL", "3e-4", 1);
    }
    const uint8_t *nul = memchr(data, '\0', size);
    size_t ini_len = nul ? (size_t)(nul - data) : size;
    fuzz_write(path, data, ini_len);

    /* Overrides: the bytes after the NUL, split at newlines. */
    char *rest = NULL;
    st_override ov[MAX_OVERRIDES];
    int n_ov = 0;
    if (nul) {
        size_t n = size - ini_len - 1;
        rest = malloc(n + 1);
        memcpy(rest, nul + 1, n);
        rest[n] = '\0';
        for (char *p = rest; *p && n_ov < MAX_OVERRIDES;) {
            char *nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            ov[n_ov].text = p;
            ov[n_ov].argno = 3 + 2 * n_ov;
            n_ov++;
            if (!nl)
                break;
            p = nl + 1;
        }
    }

    st_config cfg;
    fuzz_capture();
    int rc = st_config_load(&cfg, path, ov, n_ov);
    fuzz_released(rc);
    fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "result is 0 or ST_EXIT_USAGE");
    if (rc == 0)
        fuzz_accepted();
    st_config_free(&cfg);
    free(rest);
    return 0;
}
