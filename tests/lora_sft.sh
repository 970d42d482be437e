#!/bin/sh
# The README's LoRA example end to end (etc/lora-sft.sh): a Hugging Face
# Llama made by transformers, JSONL prepared with its tokenizer, LoRA on 2
# ranks, a sample through the tokenizer, and the exported adapter loaded by
# peft onto the base model with the logits of the merged final weights.
# The validation loss must fall (the adapters learn; the base alone cannot
# move), and the adapter directory must say what trained.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
PEFT=${PEFT_PYTHON:-}
require "$PEFT" -c "import peft, transformers, tokenizers"
export OMP_NUM_THREADS=1

steps=200
small && steps=60
LORA_STEPS=$steps PYTHON=$PEFT NP=2 LAUNCH="mpirun --oversubscribe -np 2" \
    sh "$top_srcdir/etc/lora-sft.sh" "$SHARDTRAIN" "$top_srcdir" "$TMP/sft" \
    >"$TMP/sft.out" 2>"$TMP/sft.err"
rc=$?
if [ $rc -eq 0 ]; then ok "etc/lora-sft.sh runs"; else not_ok "etc/lora-sft.sh runs (exit $rc)"; diag "$(tail -n 8 "$TMP/sft.err")"; fi
check "the model was made by transformers with its tokenizer" \
    test -s "$TMP/sft/base/model.safetensors" -a -s "$TMP/sft/base/tokenizer.json"
check "prepare wrote a loss mask beside the shard" test -s "$TMP/sft/data/sft_train_000000.mask"
check "trained on 2 ranks" grep -q "full_shard over 2 rank(s)" "$TMP/sft.out"
vals=$(python3 -c '
import json, sys
v = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l]
print(v[0], v[-1], len(v))' "$TMP/sft/logs/metrics.jsonl")
set -- $vals
# The random base predicts nearly uniformly over its 512 ids: ln 512 =
# 6.24 nats is where the adapters start.
check "the validation loss falls ($1 at the first evaluation, $2 at the last of $3)" \
    python3 -c "import sys; sys.exit(not ($2 < $1))"
check "the last validation loss ($2) is at least 0.1 under ln 512 = 6.24, the untrained model's" \
    python3 -c "import math, sys; sys.exit(not ($2 < math.log(512) - 0.1))"
sample=$(sed -n '/^--- sample/,/^--- the adapter/p' "$TMP/sft.out" | sed '1d;$d')
check "the sample starts with the prompt, decoded through the tokenizer" \
    sh -c "printf '%s' \"\$1\" | head -n 1 | grep -q '^Who says: Before we proceed'" _ "$sample"
check "the sample continues past the prompt" test "$(printf '%s' "$sample" | sed 1d | tr -d '\n' | wc -c)" -ge 1
python3 - "$TMP/sft/adapter/adapter_config.json" <<'EOF_PY' >"$TMP/cfg.out" 2>&1
import json, sys
c = json.load(open(sys.argv[1]))
assert c["peft_type"] == "LORA" and c["r"] == 8 and c["lora_alpha"] == 16, c
assert sorted(c["target_modules"]) == sorted(
    ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]), c
assert c["fan_in_fan_out"] is False
print("ok")
EOF_PY
check "adapter_config.json: LORA, r 8, alpha 16, the seven llama targets" grep -q '^ok' "$TMP/cfg.out"
diff=$(sed -n 's/^peft: .*max |logits difference| //p' "$TMP/sft.out")
check "peft's base + adapter gives the merged final weights' logits (max difference $diff)" \
    python3 -c "import sys; sys.exit(not (0 <= float('${diff:-nan}') < 1e-4))"
exit 0
