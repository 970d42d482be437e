/* libFuzzer target for the Hugging Face tokenizer reader
 * (src/tok/tokenizer_*.c with base/log.c; nothing stubbed).  Each input is
 * a tokenizer.json.  Promises checked: loading gives 0 or ST_EXIT_USAGE,
 * a refused file prints exactly one error line; an accepted tokenizer
 * encodes a fixed text (several scripts, emoji, special-token text,
 * invalid UTF-8) to ids inside its vocabulary and decodes them back
 * without failing, and st_tokenizer_free releases everything
 * (LeakSanitizer). */
#include "tok/tokenizer.h"
#include "base/log.h"
#include "fuzz_common.h"

static const char text[] =
    "Hello, world! Grüße ‘quoted’ Привет 日本語 👍🏽 I'LL  two  spaces\t"
    "<|endoftext|><s>x</s> 1234567 \xff\xfe bad \xe2\x82 cut \xed\xa0\x80";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[300];
    if (!path[0])
        snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_dir());
    fuzz_write(path, data, size);
    st_tokenizer *t = NULL;
    fuzz_capture();
    int rc = st_tokenizer_load(path, &t);
    fuzz_released(rc);
    fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "load gives 0 or ST_EXIT_USAGE");
    if (rc)
        return 0;
    st_token_list ids = {0};
    fuzz_require(st_tokenizer_encode(t, text, sizeof text - 1, 1, &ids) == 0, "encode");
    for (size_t i = 0; i < ids.n; i++)
        fuzz_require(ids.ids[i] < (uint64_t)st_tokenizer_vocab_size(t), "ids in the vocabulary");
    char *out = NULL;
    size_t len = 0;
    fuzz_require(st_tokenizer_decode(t, ids.ids, ids.n, 1, &out, &len) == 0, "decode");
    fuzz_require(out && strlen(out) <= len, "decode gives a terminated string");
    free(out);
    st_token_list_free(&ids);
    st_tokenizer_free(t);
    fuzz_accepted();
    return 0;
}
