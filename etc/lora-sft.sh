#!/bin/sh
# LoRA instruction tuning end to end: a Hugging Face Llama (MODEL; a small
# random one made by etc/lora-sft-model.py when unset, since the test
# suite cannot download), JSONL instruction data prepared with the model's
# own tokenizer, LoRA on NP ranks (etc/lora-sft.ini), a sample, and the
# adapter exported for peft, which loads it onto the base model.
#
# Usage: lora-sft.sh SHARDTRAIN SRCDIR [SFT_DIR]
# Environment: PYTHON (with transformers, tokenizers and peft; python3),
# NP (ranks, 2), LAUNCH (the launcher, `mpirun -np $NP`; srun under
# Slurm), MODEL, LORA_STEPS.
set -eu
st=$1
src=$2
SFT_DIR=${3:-${SFT_DIR:-lora-sft-run}}
PYTHON=${PYTHON:-python3}
NP=${NP:-2}
LAUNCH=${LAUNCH:-mpirun -np $NP}
export SFT_DIR
rm -rf "$SFT_DIR/logs" "$SFT_DIR/checkpoints" "$SFT_DIR/adapter" "$SFT_DIR/data"
mkdir -p "$SFT_DIR"
if [ -z "${MODEL:-}" ]; then
    MODEL=$SFT_DIR/base
    echo "--- a small random Llama and its tokenizer in $MODEL ---"
    "$PYTHON" "$src/etc/lora-sft-model.py" "$MODEL" "$src/etc/data/tinyshakespeare.txt"
fi
export MODEL

echo "--- instruction data: who speaks each of Shakespeare's first lines ---"
"$PYTHON" - "$src/etc/data/tinyshakespeare.txt" >"$SFT_DIR/sft.jsonl" <<'EOF_PY'
import json, sys
speeches = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
for s in speeches[:3000]:
    lines = s.strip().split("\n")
    if len(lines) >= 2 and lines[0].endswith(":"):
        print(json.dumps({"prompt": "Who says: " + lines[1] + "\n",
                          "completion": lines[0][:-1]}))
EOF_PY
"$st" prepare --tokenizer "$MODEL" --format jsonl "$SFT_DIR/sft.jsonl" "$SFT_DIR/data/sft"

echo "--- LoRA on $NP ranks ---"
# shellcheck disable=SC2086
$LAUNCH "$st" train "$src/etc/lora-sft.ini"

echo "--- sample (the merged final weights) ---"
"$st" sample --prompt "Who says: Before we proceed any further, hear me speak.
" --tokens 8 --temperature 0 "$src/etc/lora-sft.ini"

echo "--- the adapter for peft: $SFT_DIR/adapter ---"
"$st" export --adapter "$SFT_DIR/checkpoints" "$SFT_DIR/adapter"
"$PYTHON" - "$MODEL" "$SFT_DIR/adapter" "$SFT_DIR/checkpoints/final" <<'EOF_PY'
import sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
base, adapter, merged = sys.argv[1:]
tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).eval()
final = AutoModelForCausalLM.from_pretrained(merged).eval()
ids = torch.arange(1, 33).unsqueeze(0)
with torch.no_grad():
    d = (tuned(ids, use_cache=False).logits - final(ids, use_cache=False).logits).abs().max().item()
print(f"peft: base + adapter vs the merged final weights: max |logits difference| {d:.3g}")
EOF_PY
