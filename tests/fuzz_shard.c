/* libFuzzer target for the token shard reader (src/data/dataset.c with
 * base/files.c, base/rng.c and base/log.c; nothing stubbed).  An input is a
 * whole shard file: the 256-int32 header and the tokens.  st_dataset_open
 * must accept it or refuse it with one error line and ST_EXIT_USAGE; an
 * accepted set must give training and evaluation windows of in-range
 * tokens (read through the mapping, so AddressSanitizer sees an overrun
 * past the file's end as a SIGSEGV/SIGBUS on the mapping's last page). */
#include "data/data.h"
#include "base/log.h"
#include "fuzz_common.h"

#define SEQ_LEN 8
#define VOCAB 300

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[300];
    if (!path[0])
        snprintf(path, sizeof path, "%s/fuzz_train_000000.bin", fuzz_dir());
    fuzz_write(path, data, size);
    st_dataset ds;
    memset(&ds, 0, sizeof ds);
    fuzz_capture();
    int rc = st_dataset_open(&ds, path, SEQ_LEN, VOCAB, "fuzz.ini", 1);
    fuzz_released(rc);
    fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "result is 0 or ST_EXIT_USAGE");
    if (rc == 0) {
        fuzz_accepted();
        fuzz_require(ds.n_tokens >= SEQ_LEN + 1, "at least seq_len + 1 tokens");
        int32_t w[SEQ_LEN + 1];
        for (int64_t k = 0; k < 4; k++) {
            st_dataset_train_window(&ds, 1234, k, k, w);
            for (int i = 0; i <= SEQ_LEN; i++)
                fuzz_require(w[i] >= 0 && w[i] < VOCAB, "training token in range");
            st_dataset_eval_window(&ds, k, w);
            for (int i = 0; i <= SEQ_LEN; i++)
                fuzz_require(w[i] >= 0 && w[i] < VOCAB, "evaluation token in range");
        }
        st_dataset_close(&ds);
    }
    return 0;
}
