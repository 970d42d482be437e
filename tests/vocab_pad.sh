#!/bin/sh
# model.vocab_padding: the token embedding and the untied output weight are
# stored with their rows padded to a multiple of it (zero rows past
# vocab_size, the tail of their unit: src/model/model.h).  On the CPU
# backend, which never reads the padding rows, a padded run must be the
# unpadded run exactly: the same loss bits at every step, the same final
# weights bit for bit and a byte-identical export (model.safetensors and
# config.json), for gpt2 (tied) and llama (untied).  The checkpoint manifest
# proves that the padding was stored: each unit's padded size is the one
# computed here from the tensor table and the documented rule, which the
# unpadded run does not reach.  Checkpoints keep the true vocabulary, so a
# run resumes across paddings (128 -> 1 and 1 -> 128) bit for bit, and 2
# ranks, whose shards split the padded units, match 1 rank within fsdp.sh's
# 1e-5.  A model.init of 300 rows trains under padding 128 as under
# padding 1, bit for bit.  The CUDA head over the padded rows is checked in
# tests/cuda_train_emu.sh.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1

prepare_test_data
# 300 token ids (the byte-level data uses the first 256): 384 stored rows
# under the default padding of 128, 300 under padding 1.
write_base_ini "$TMP/base.ini" model.vocab_size=300 checkpoint.every=2

# run NAME NP [-s ...]: train into $TMP/NAME
run() {
    name=$1 np=$2
    shift 2
    ranks "$np" 300 "$SHARDTRAIN" train -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$@" "$TMP/base.ini" \
        >"$TMP/$name.out" 2>"$TMP/$name.err" || diag "$name: exit $?" "$(tail -n 3 "$TMP/$name.err")"
}

# padded_as_documented NAME PAD: every unit's stored size in NAME's step-4
# manifest is its element count plus (round_up(V, PAD) - V) x d_model when
# the unit ends with the token embedding or the output weight, rounded up
# to the shard group (1 rank: nothing more).
padded_as_documented() {
    python3 - "$TMP/$1/ckpt/step_00000004/manifest.json" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
pad = int(sys.argv[2])
vocab = ("transformer.wte.weight", "model.embed_tokens.weight", "lm_head.weight")
tail = {}
for t in m["tensors"]:
    if t["name"] in vocab:
        V, C = t["shape"]
        tail[t["unit"]] = ((V + pad - 1) // pad * pad - V) * C
bad = [(u, e["numel"], e["padded"]) for u, e in enumerate(m["units"])
       if e["padded"] != e["numel"] + tail.get(u, 0)]
if not tail or bad:
    print("# units (index, numel, padded) not as documented:", bad or "no vocabulary tensor")
    sys.exit(1)
EOF
}

for arch in gpt2 llama; do
    run ${arch}_p1 1 -s model.arch=$arch -s model.vocab_padding=1
    run ${arch}_p128 1 -s model.arch=$arch
    check "$arch: padding 128 stored (manifest units as documented)" \
        padded_as_documented ${arch}_p128 128
    check "$arch: padding 1 stores vocab_size rows" padded_as_documented ${arch}_p1 1
    check "$arch: padded and unpadded runs give the same losses and final weights bit for bit" \
        compare_runs --exact "$TMP/${arch}_p1" "$TMP/${arch}_p128" 4
    for p in p1 p128; do
        "$SHARDTRAIN" export "$TMP/${arch}_$p/ckpt" "$TMP/ex_${arch}_$p" \
            >"$TMP/ex_${arch}_$p.out" 2>&1 || diag "export ${arch}_$p failed"
    done
    check "$arch: byte-identical export (model.safetensors)" \
        cmp "$TMP/ex_${arch}_p1/model.safetensors" "$TMP/ex_${arch}_p128/model.safetensors"
    check "$arch: byte-identical export (config.json)" \
        cmp "$TMP/ex_${arch}_p1/config.json" "$TMP/ex_${arch}_p128/config.json"
    check "$arch: the export holds the true vocabulary" python3 -c "
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(c['vocab_size'] != 300)" "$TMP/ex_${arch}_p128/config.json"
done

# Import (model.init) of a vocabulary that is not a multiple of the
# padding: the exported files hold 300 rows, the stored units 384 under
# padding 128, the import filling the tail with zeros.  Training from them
# must be the unpadded import's training bit for bit.
for arch in gpt2 llama; do
    for p in 1 128; do
        run ${arch}_init_p$p 1 -s model.arch=$arch -s model.vocab_padding=$p \
            -s model.init="$TMP/ex_${arch}_p1"
    done
    check "$arch: importing 300 rows under padding 128 trains as under padding 1, bit for bit" \
        compare_runs --exact "$TMP/${arch}_init_p1" "$TMP/${arch}_init_p128" 4
    check "$arch: the import under padding 128 stored the padded units" \
        padded_as_documented ${arch}_init_p128 128
    # The import happened: training from the exported weights is not the
    # training from the random start that produced them.
    check "$arch: the imported run is not the random start's" \
        sh -c '! python3 "$1/tests/compare_runs.py" --exact "$2" "$3" 4 >/dev/null 2>&1' \
        sh "$top_srcdir" "$TMP/${arch}_init_p128" "$TMP/${arch}_p128"
done

# Resume across paddings: the checkpoint's tensors are [vocab_size, C] and
# its units hold their true element counts, so either padding reads it.
run gpt2_r1 1 -s model.vocab_padding=1 -s checkpoint.resume="$TMP/gpt2_p128/ckpt/step_00000002"
check "gpt2: a padding-128 checkpoint resumes under padding 1, bit for bit" \
    compare_runs --exact --resumed-at 2 "$TMP/gpt2_r1" "$TMP/gpt2_p1"
run llama_r128 1 -s model.arch=llama -s checkpoint.resume="$TMP/llama_p1/ckpt/step_00000002"
check "llama: a padding-1 checkpoint resumes under padding 128, bit for bit" \
    compare_runs --exact --resumed-at 2 "$TMP/llama_r128" "$TMP/llama_p128"

# Two ranks shard the padded units: the tail lands on the last rank's shard.
run llama_p128_x2 2 -s model.arch=llama
check "llama: padding 128 on 2 ranks full_shard matches 1 rank within 1e-5" \
    compare_runs "$TMP/llama_p128_x2" "$TMP/llama_p128" 1e-5 4

# A padding the schema refuses.
refused "model.vocab_padding = 0 is refused" "vocab_padding" \
    "$SHARDTRAIN" check -s model.vocab_padding=0 "$TMP/base.ini"
