/* libFuzzer target for the Hugging Face config.json check
 * (src/hf/hf_config.c with hf/safetensors_parse.c for its printable-text
 * helper, base/files.c and base/log.c; nothing stubbed).  Each input is a config.json,
 * checked against a small GPT-2 and a small Llama shape (the ones the seed
 * corpus was written for, so the fuzzer starts from accepted files).  The
 * result must be 0 or ST_EXIT_USAGE with exactly one error line. */
#include "hf/hf_import.h"
#include "base/log.h"
#include "fuzz_common.h"

static st_model_config shape(int arch)
{
    st_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.arch = arch;
    mc.preset = (char *)"";
    mc.init = (char *)"random";
    mc.n_layer = 2;
    mc.n_head = 4;
    mc.n_kv_head = arch == ST_ARCH_GPT2 ? 4 : 2;
    mc.d_model = 64;
    mc.d_ff = arch == ST_ARCH_GPT2 ? 256 : 172;
    mc.vocab_size = 256;
    mc.seq_len = 32;
    mc.rope_theta = 10000.0;
    mc.norm_eps = 1e-5;
    mc.tie_embeddings = 1;
    mc.init_std = 0.02;
    return mc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[300];
    if (!path[0])
        snprintf(path, sizeof path, "%s/config.json", fuzz_dir());
    fuzz_write(path, data, size);
    int accepted = 0;
    for (int arch = ST_ARCH_GPT2; arch <= ST_ARCH_LLAMA; arch++) {
        st_model_config mc = shape(arch);
        fuzz_capture();
        int rc = st_hf_check_config(path, &mc);
        fuzz_released(rc);
        fuzz_require(rc == 0 || rc == ST_EXIT_USAGE, "result is 0 or ST_EXIT_USAGE");
        accepted |= rc == 0;
    }
    if (accepted)
        fuzz_accepted();
    return 0;
}
