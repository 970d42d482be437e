/* libFuzzer target for the JSONL reader of `shardtrain prepare --format
 * jsonl` (src/data/prepare_jsonl.c with base/log.c; nothing stubbed).  Each
 * input is a JSONL file's bytes: documents, prompt/completion lines and
 * conversations.  Promises checked: the reader gives 0 or ST_EXIT_USAGE, a
 * refused file prints exactly one error line; on an accepted file every
 * example has segments, each segment's text lies inside the input's JSON
 * strings as jansson decoded them (its length covers its bytes), a
 * conversation has a trained segment, and a file reported as holding no
 * instruction line gave only single trained segments. */
#include "data/data.h"
#include "base/log.h"
#include "fuzz_common.h"

typedef struct {
    int examples, instruction_like;
} tally;

static int on_example(void *ctx, const st_segment *segs, int n)
{
    tally *t = ctx;
    fuzz_require(n >= 1, "an example has segments");
    int trained = 0;
    for (int i = 0; i < n; i++) {
        fuzz_require(segs[i].text != NULL, "a segment has text");
        /* Touch every byte: ASan reports a length past the string. */
        volatile unsigned char sink = 0;
        for (size_t k = 0; k < segs[i].len; k++)
            sink ^= (unsigned char)segs[i].text[k];
        (void)sink;
        trained |= segs[i].loss;
    }
    fuzz_require(trained, "an example trains on something");
    t->instruction_like |= n > 1 || !segs[0].loss;
    t->examples++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tally t = {0, 0};
    int any_instruction = -1;
    fuzz_capture();
    int rc = st_jsonl_examples("fuzz.jsonl", data, (int64_t)size, on_example, &t,
                               &any_instruction);
    fuzz_released(rc);
    fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "the reader gives 0 or ST_EXIT_USAGE");
    if (rc)
        return 0;
    fuzz_require(t.examples >= 1, "an accepted file has an example");
    fuzz_require(any_instruction == 0 || any_instruction == 1, "instruction flag set");
    fuzz_require(!t.instruction_like || any_instruction, "instruction lines are reported");
    fuzz_accepted();
    return 0;
}
