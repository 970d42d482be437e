#!/bin/sh
# Malformed weights given to model.init: each must stop shardtrain with
# exit status 2 and exactly one line
#   shardtrain: error: FILE: what; hint: ...
# naming the file at fault (and the tensor or config.json field when there
# is one).  The container-level table comes from tests/safetensors_cases.py
# (the same files seed the fuzzer); the cases that need a model, an index or
# a config.json are built here from tests/hf_make.py's valid layouts.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hf_lib.sh"

# expect NAME WHERE PATTERN ARCH INIT: exit 2, one line, naming WHERE, with PATTERN
expect() {
    name=$1 where=$2 pat=$3 arch=$4 init=$5
    timeout 120 "$SHARDTRAIN" train -s model.init="$init" -s log.dir="$TMP/logs" \
        -s checkpoint.dir="$TMP/ckpt" "$TMP/$arch.ini" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err")
    first=$(head -n 1 "$TMP/err")
    case $first in
        "shardtrain: error: $where: "*) named=1 ;;
        *) named=0 ;;
    esac
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [ "$named" -eq 1 ] && grep -qF -- "$pat" "$TMP/err"; then
        ok "$name: exit 2, one line naming ${where##*/}"
    else
        not_ok "$name: exit $rc, $lines lines, want one naming $where with '$pat'"
        diag "$(head -n 5 "$TMP/err")"
    fi
}

hf_weights gpt2
hf_weights llama
G="$TMP/w-gpt2" Lw="$TMP/w-llama"

# ---- the container: lengths, JSON, dtypes, shapes, offsets -------------
python3 "$top_srcdir/tests/safetensors_cases.py" bad "$TMP/bad"
check "malformed table written" test -s "$TMP/bad/cases.txt"
tab=$(printf '\t')
while IFS="$tab" read -r name pat; do
    expect "$name" "$TMP/bad/$name.safetensors" "$pat" gpt2 "$TMP/bad/$name.safetensors"
done <"$TMP/bad/cases.txt"

# ---- tensors against the model -----------------------------------------
ed() { "$PY" "$hf_make" edit "$@" || not_ok "hf_make.py edit $*"; }
mkdir -p "$TMP/m"
ed "$G/f32-single.safetensors" "$TMP/m/missing.safetensors" drop h.1.mlp.c_fc.bias
expect "a missing tensor" "$TMP/m/missing.safetensors" \
    "tensor 'transformer.h.1.mlp.c_fc.bias' is missing" gpt2 "$TMP/m/missing.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/shape.safetensors" shrink wpe.weight 16
expect "a tensor with the wrong shape for the model" "$TMP/m/shape.safetensors" \
    "tensor 'wpe.weight' has shape [16,64], the model needs [32,64]" gpt2 "$TMP/m/shape.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/linear.safetensors" transpose h.0.mlp.c_fc.weight
expect "a Conv1D weight stored as Linear [out, in]" "$TMP/m/linear.safetensors" \
    "tensor 'h.0.mlp.c_fc.weight' has shape [256,64], the model needs [64,256]; hint: it is stored transposed" \
    gpt2 "$TMP/m/linear.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/extra.safetensors" dup h.0.ln_1.weight h.5.ln_1.weight
expect "a tensor the model does not have" "$TMP/m/extra.safetensors" \
    "tensor 'h.5.ln_1.weight' is not part of this model" gpt2 "$TMP/m/extra.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/twice.safetensors" dup wte.weight transformer.wte.weight
expect "one tensor under both GPT-2 prefixes" "$TMP/m/twice.safetensors" "is given twice" \
    gpt2 "$TMP/m/twice.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/int.safetensors" retype h.0.attn.c_attn.bias
expect "an integer dtype for a weight" "$TMP/m/int.safetensors" \
    "tensor 'h.0.attn.c_attn.bias' has dtype I32" gpt2 "$TMP/m/int.safetensors"
ed "$G/f32-single.safetensors" "$TMP/m/head.safetensors" dup wte.weight lm_head.weight
expect "lm_head.weight in a tied model" "$TMP/m/head.safetensors" "tie_embeddings is true" \
    gpt2 "$TMP/m/head.safetensors"
ed "$Lw/f32-single.safetensors" "$TMP/m/nohead.safetensors" drop lm_head.weight
expect "no lm_head.weight in an untied model" "$TMP/m/nohead.safetensors" \
    "tensor 'lm_head.weight' is missing; hint: the weights tie" llama "$TMP/m/nohead.safetensors"
expect "gpt2 weights given to a llama model" "$G/f32-single.safetensors" \
    "is not part of this model" llama "$G/f32-single.safetensors"
expect "model.init that does not exist" "$TMP/nowhere" "cannot open weights" gpt2 "$TMP/nowhere"
mkfifo "$TMP/fifo.safetensors"
expect "model.init that is a FIFO (no hang)" "$TMP/fifo.safetensors" "not a regular file" gpt2 \
    "$TMP/fifo.safetensors"

# Four ranks: every rank finds the same problem, all stop with exit 2, and
# the problem is printed once (by the lowest rank).
if command -v mpirun >/dev/null 2>&1; then
    timeout 120 mpirun --oversubscribe -np 4 "$SHARDTRAIN" train -s model.init="$TMP/m/linear.safetensors" \
        -s log.dir="$TMP/logs" -s checkpoint.dir="$TMP/ckpt" "$TMP/gpt2.ini" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    n=$(grep -c "^shardtrain: error: $TMP/m/linear.safetensors: tensor 'h.0.mlp.c_fc.weight'" "$TMP/err")
    all=$(grep -c '^shardtrain: error: ' "$TMP/err")
    if [ "$rc" -eq 2 ] && [ "$n" -eq 1 ] && [ "$all" -eq 1 ]
    then ok "4 ranks: the bad tensor is reported once, exit 2"
    else not_ok "4 ranks: exit $rc, $n line(s) report the bad tensor, $all error line(s) (want 1)"
        diag "$(head -n 8 "$TMP/err")"; fi
else
    not_ok "mpirun not found"
fi

# ---- sharded directories and their index -------------------------------
shard_copy() { rm -rf "$TMP/$1" && cp -r "$G/f32-sharded" "$TMP/$1"; }
idx=model.safetensors.index.json
shard_copy s1 && rm "$TMP/s1/model-00002-of-00003.safetensors"
expect "an index naming a missing shard" "$TMP/s1/$idx" \
    "shard '$TMP/s1/model-00002-of-00003.safetensors' cannot be opened" gpt2 "$TMP/s1"
shard_copy s2 && printf '{"weight_map": {"wte.weight": ' >"$TMP/s2/$idx"
expect "an index that is not valid JSON" "$TMP/s2/$idx" "not valid JSON" gpt2 "$TMP/s2"
shard_copy s3 && printf '{"metadata": {}}' >"$TMP/s3/$idx"
expect "an index without weight_map" "$TMP/s3/$idx" "weight_map" gpt2 "$TMP/s3"
shard_copy s4 && sed -i 's/"model-0000[0-9]-of-00003.safetensors"/"..\/evil.safetensors"/' "$TMP/s4/$idx"
expect "an index naming a file outside its directory" "$TMP/s4/$idx" \
    "hint: shards are file names in the index's directory" gpt2 "$TMP/s4"
shard_copy s5
holder=$("$PY" - "$TMP/s5/$idx" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
wm = d["weight_map"]
was = wm["transformer.wte.weight"]
wm["transformer.wte.weight"] = [s for s in sorted(set(wm.values())) if s != was][0]
json.dump(d, open(sys.argv[1], "w"))
print(was)
EOF2
)
expect "an index that puts a tensor in the wrong shard" "$TMP/s5/$holder" \
    "tensor 'transformer.wte.weight' is not listed for this shard" gpt2 "$TMP/s5"
shard_copy s6
"$PY" - "$TMP/s6/$idx" <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
d["weight_map"]["transformer.h.9.ln_1.weight"] = "model-00001-of-00003.safetensors"
json.dump(d, open(sys.argv[1], "w"))
EOF2
expect "an index naming a tensor its shard lacks" "$TMP/s6/$idx" \
    "names tensor 'transformer.h.9.ln_1.weight' in shard 'model-00001-of-00003.safetensors', which does not hold it" \
    gpt2 "$TMP/s6"
shard_copy s7 && cp "$TMP/bad/header-length-overflow.safetensors" "$TMP/s7/model-00003-of-00003.safetensors"
expect "a corrupt shard" "$TMP/s7/model-00003-of-00003.safetensors" "exceeds the file" gpt2 "$TMP/s7"
shard_copy s8 && cp "$G/f32-dir/model.safetensors" "$TMP/s8/"
expect "a directory with both layouts" "$TMP/s8" "holds both" gpt2 "$TMP/s8"
mkdir -p "$TMP/empty" && cp "$G/f32-dir/config.json" "$TMP/empty/"
expect "a directory without weights" "$TMP/empty" "has neither" gpt2 "$TMP/empty"

# ---- config.json against the configured shape --------------------------
cfg_copy() { # NAME ARCH PYTHON-EXPR-ON-c
    rm -rf "$TMP/$1" && cp -r "$TMP/w-$2/f32-dir" "$TMP/$1"
    "$PY" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $3; json.dump(c, open(p, 'w'))" \
        "$TMP/$1/config.json"
}
cfg_copy c1 gpt2 'c["n_layer"] = 3'
expect "config.json with another n_layer" "$TMP/c1/config.json" \
    "n_layer is 3, but model.n_layer is 2" gpt2 "$TMP/c1"
cfg_copy c2 gpt2 'c["n_embd"] = 128'
expect "config.json with another width" "$TMP/c2/config.json" \
    "n_embd is 128, but model.d_model is 64" gpt2 "$TMP/c2"
cfg_copy c3 gpt2 'c["tie_word_embeddings"] = False'
expect "config.json untied, the model tied" "$TMP/c3/config.json" \
    "tie_word_embeddings is false, but model.tie_embeddings is true" gpt2 "$TMP/c3"
cfg_copy c4 llama 'c["num_key_value_heads"] = 4'
expect "config.json with other kv heads" "$TMP/c4/config.json" \
    "num_key_value_heads is 4, but model.n_kv_head is 2" llama "$TMP/c4"
cfg_copy c5 llama 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}'
expect "config.json with a llama3 rope_scaling lacking its numbers" "$TMP/c5/config.json" \
    'rope_scaling of rope_type llama3 lacks a number "low_freq_factor"' llama "$TMP/c5"
cfg_copy c5y llama 'c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}'
expect "config.json asking for yarn rope_scaling" "$TMP/c5y/config.json" \
    "rope_scaling of type 'yarn' is not implemented" llama "$TMP/c5y"
cfg_copy c6 llama 'c["rms_norm_eps"] = 1e-6'
expect "config.json with another norm epsilon" "$TMP/c6/config.json" \
    "rms_norm_eps is 1e-06, but model.norm_eps is 1e-05" llama "$TMP/c6"
cfg_copy c7 gpt2 'c["model_type"] = "llama"'
expect "config.json of another architecture" "$TMP/c7/config.json" "model_type is 'llama'" gpt2 "$TMP/c7"
cfg_copy c8 gpt2 'c["n_layer"] = "two"'
expect "config.json with a field of the wrong type" "$TMP/c8/config.json" \
    'field "n_layer" is not an integer' gpt2 "$TMP/c8"
cfg_copy c9 gpt2 'pass'
printf '{"n_layer": 2,' >"$TMP/c9/config.json"
expect "config.json that is not valid JSON" "$TMP/c9/config.json" "not valid JSON" gpt2 "$TMP/c9"
exit 0
