#!/bin/sh
# LoRA fine-tuning ([lora], shardtrain.ini(5) LORA) on real MPI ranks, from
# Hugging Face base weights made by tests/hf_make.py: every strategy at
# every world size equals 1 rank (with dropout, whose mask follows the
# samples); the base weights stay frozen; dropout is applied and
# reproducible; state_bytes shows the saving and the estimate follows it;
# checkpoints resume (bit-identical, also after a crash) and reshard; a
# full/LoRA mismatch is
# refused; export merges the adapters or writes the PEFT adapter
# directory, which Hugging Face's peft loads onto the base model with the
# merged model's logits (tests/peft_ref.py); bad keys are one error line.
# The loss and the A/B gradients against an independent PyTorch LoRA are
# tests/torch.sh's (test_dump lora).
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
. "$top_srcdir/tests/hf_lib.sh"
export OMP_NUM_THREADS=1
PEFT=${PEFT_PYTHON:-}
require "$PEFT" -c "import peft, transformers"

# run NAME NP CFG [-s ...]: train on NP ranks into $TMP/NAME
run() {
    _name=$1 _np=$2 _cfg=$3
    shift 3
    rm -rf "$TMP/$_name"
    ranks "$_np" 300 "$SHARDTRAIN" train -s log.dir="$TMP/$_name/logs" \
        -s checkpoint.dir="$TMP/$_name/ckpt" "$@" "$_cfg" >"$TMP/$_name.out" 2>"$TMP/$_name.err"
}
ran() {
    if run "$@"; then ok "$1: trained"; else not_ok "$1: training failed"; diag "$(tail -n 5 "$TMP/$1.err")"; fi
}
metric() {   # metric NAME FIELD: the field of the last metrics line that has it
    python3 -c "import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if sys.argv[2] in r][-1][sys.argv[2]])" \
        "$TMP/$1/logs/metrics.jsonl" "$2"
}

for arch in gpt2 llama; do
    hf_weights "$arch"
    base=$TMP/w-$arch/f32-dir
    ini=$TMP/lora-$arch.ini
    # 4 steps of 8 sequences at a learning rate that moves the adapters.
    sed -e 's/^steps = 1/steps = 4/' -e 's/^lr = 1e-30/lr = 1e-2/' \
        -e 's/^global_batch = 4/global_batch = 8/' -e 's/^eval_every = 1/eval_every = 2/' \
        "$TMP/$arch.ini" >"$ini"
    # optim.eps 1e-6: B starts at zero, so AdamW's first steps move each
    # element of B by about lr whatever its gradient's size, and with eps
    # 1e-8 a gradient element near zero has a sign that summation order
    # decides; a larger eps keeps those elements still, so the comparisons
    # below measure the gradients, not that amplification (at 1e-8, 2
    # ranks in micro-batches of 2 differ from 1 rank by 2.9e-5 on llama,
    # with the step-1 loss and gradient norm equal to 1e-8).
    printf '[model]\ninit = %s\n[lora]\nrank = 4\nalpha = 12\ndropout = 0.1\n[optim]\neps = 1e-6\n' \
        "$base" >>"$ini"
    # the [model] section appended twice is one section (inih merges them)
    ran "$arch-1" 1 "$ini"

    # ---- every strategy and world size equals one rank -------------------
    ran "$arch-fs2" 2 "$ini" -s parallel.strategy=full_shard
    ran "$arch-sgo2" 2 "$ini" -s parallel.strategy=shard_grad_op
    ran "$arch-ns2" 2 "$ini" -s parallel.strategy=no_shard
    ran "$arch-hs4" 4 "$ini" -s parallel.strategy=hybrid_shard -s parallel.shard_size=2
    ran "$arch-fs3" 3 "$ini" -s parallel.strategy=full_shard -s train.global_batch=9 -s train.micro_batch=3
    ran "$arch-1b3" 1 "$ini" -s train.global_batch=9 -s train.micro_batch=3
    ran "$arch-mb" 1 "$ini" -s train.micro_batch=4
    for r in fs2 sgo2 ns2 hs4 mb; do
        check "$arch: $r equals 1 rank at 1e-5 (losses, merged final weights)" \
            compare_runs "$TMP/$arch-1" "$TMP/$arch-$r" 1e-5
    done
    check "$arch: 3 ranks full_shard equals 1 rank (9 sequences) at 1e-5" \
        compare_runs "$TMP/$arch-1b3" "$TMP/$arch-fs3" 1e-5
    # Recomputed activations redo the forward with the same dropout mask;
    # no_sync accumulates the adapters' full gradients.
    ran "$arch-ckpt" 2 "$ini" -s train.activation_checkpointing=full -s train.micro_batch=2
    check "$arch: activation checkpointing (2 ranks, micro-batches of 2) equals 1 rank at 1e-5" \
        compare_runs "$TMP/$arch-1" "$TMP/$arch-ckpt" 1e-5
    ran "$arch-nosync" 2 "$ini" -s parallel.no_sync=true -s train.micro_batch=2
    check "$arch: no_sync (2 ranks) equals 1 rank at 1e-5" \
        compare_runs "$TMP/$arch-1" "$TMP/$arch-nosync" 1e-5

    # ---- bf16: the frozen base as bf16 words -------------------------------
    # The test backend cpu-bf16params keeps the gathered words as they
    # arrive (as the cuda backend does), so both parts of a unit travel as
    # bf16 words: it must match the cpu backend, which widens them, bit for
    # bit; and bf16 stays near fp32.
    ran "$arch-bf" 2 "$ini" -s train.precision=bf16 -s checkpoint.every=4
    # The merge is into model.init's fp32 base, not the bf16 copy training
    # computed with: the final weights equal export's of the last checkpoint.
    "$SHARDTRAIN" export "$TMP/$arch-bf/ckpt" "$TMP/$arch-bf-x" >/dev/null 2>&1
    check "$arch: bf16: the merged final weights equal export's (the fp32 base merged)" \
        same_tensors "$TMP/$arch-bf-x/model.safetensors" "$TMP/$arch-bf/ckpt/final/model.safetensors"
    SHARDTRAIN_TEST_KERNELS=cpu-bf16params run "$arch-bfw" 2 "$ini" -s train.precision=bf16
    check "$arch: bf16 with the base kept as bf16 words equals the widening backend, bit for bit" \
        cmp -s "$TMP/$arch-bf/ckpt/final/model.safetensors" "$TMP/$arch-bfw/ckpt/final/model.safetensors"
    check "$arch: bf16 losses within 2e-2 of fp32" \
        compare_runs --only metrics "$TMP/$arch-1" "$TMP/$arch-bf" 2e-2
    # A poisoned gradient (the first block's adapters) skips the step.
    SHARDTRAIN_TEST_NONFINITE_STEPS=2 run "$arch-nan" 2 "$ini"
    check "$arch: a non-finite adapter gradient skips the step and the run goes on" \
        grep -q '"step":2,"skipped":"nonfinite"' "$TMP/$arch-nan/logs/metrics.jsonl"

    # ---- the base is frozen, the adapters train ----------------------------
    check "$arch: final/adapter written beside the merged final weights" \
        test -s "$TMP/$arch-1/ckpt/final/adapter/adapter_model.safetensors"
    "$PY" - "$base/model.safetensors" "$TMP/$arch-1/ckpt/final/model.safetensors" \
        "$TMP/$arch-1/ckpt/final/adapter/adapter_model.safetensors" <<'EOF_PY' >"$TMP/frozen-$arch.out" 2>&1
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    d = b[8 + n:]
    return {k: np.frombuffer(d[v["data_offsets"][0]:v["data_offsets"][1]], np.float32).reshape(v["shape"])
            for k, v in h.items() if k != "__metadata__"}
base, final, ad = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
adapted = {k[len("base_model.model."):-len(".lora_A.weight")] for k in ad if k.endswith("lora_A.weight")}
assert adapted, "no adapters"
changed = [k for k in final if not np.array_equal(final[k], base[k])]
# Exactly the adapted weights change; norms, biases, embeddings do not.
assert sorted(changed) == sorted(a + ".weight" for a in adapted), (changed, adapted)
for k in ad:
    if k.endswith("lora_B.weight"):
        assert np.abs(ad[k]).max() > 0, k + " did not train (B starts at zero)"
print("ok", len(changed), "weights changed")
EOF_PY
    check "$arch: only the adapted weights differ from the base, every B trained" \
        grep -q '^ok' "$TMP/frozen-$arch.out"
    diag "$(cat "$TMP/frozen-$arch.out")"

    # ---- dropout: applied, and the same run twice is the same --------------
    ran "$arch-nodrop" 1 "$ini" -s lora.dropout=0
    ran "$arch-again" 1 "$ini"
    check "$arch: the same run twice gives identical weights" \
        cmp -s "$TMP/$arch-1/ckpt/final/model.safetensors" "$TMP/$arch-again/ckpt/final/model.safetensors"
    if compare_runs "$TMP/$arch-1" "$TMP/$arch-nodrop" 1e-5 >/dev/null 2>&1; then
        not_ok "$arch: dropout 0.1 changes nothing (is it applied?)"
    else
        ok "$arch: dropout 0.1 changes the run (it is applied)"
    fi

    # ---- memory: state_bytes and the estimate ------------------------------
    ran "$arch-full" 1 "$ini" -s lora.rank=0 -s checkpoint.every=4
    sl=$(metric "$arch-1" state_bytes) sf=$(metric "$arch-full" state_bytes)
    check "$arch: LoRA state_bytes $sl is under a third of full fine-tuning's $sf" \
        test "$((3 * sl))" -lt "$sf"
    for cell in "1 full_shard fp32" "2 full_shard fp32" "2 no_shard bf16"; do
        set -- $cell
        run "$arch-m" "$1" "$ini" -s parallel.strategy="$2" -s train.precision="$3" \
            -s train.global_batch="$((4 * $1))" -s train.steps=1 -s train.eval_every=0
        m=$(metric "$arch-m" peak_bytes)
        e=$("$SHARDTRAIN" estimate --json --nodes 1 --tasks-per-node "$1" -s train.precision="$3" \
            -s train.global_batch="$((4 * $1))" "$ini" |
            python3 -c "import json, sys; print(json.load(sys.stdin)['$2']['none']['peak'])")
        check "$arch: estimate $e within 10% of the measured peak $m ($1 rank(s) $2 $3)" \
            python3 -c "import sys; m, e = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(e - m) <= 0.10 * m else 1)" "$m" "$e"
    done

    # ---- checkpoints: resume, reshard, mismatch ----------------------------
    ran "$arch-A" 2 "$ini" -s checkpoint.every=2
    "$PY" - "$TMP/$arch-A/ckpt/step_00000002/manifest.json" <<'EOF_PY' >"$TMP/man-$arch.out" 2>&1
import json, sys
m = json.load(open(sys.argv[1]))
lo = m["lora"]
assert lo["rank"] == 4 and lo["alpha"] == 12 and lo["base"].endswith("f32-dir"), lo
assert all(".lora_" in t["name"] for t in m["tensors"]), "a base tensor in the checkpoint"
assert m["units"][0]["numel"] == 0 and m["units"][-1]["numel"] == 0
print("ok")
EOF_PY
    check "$arch: the checkpoint holds the adapters only (manifest lora object)" grep -q '^ok' "$TMP/man-$arch.out"
    ran "$arch-R2" 2 "$ini" -s checkpoint.resume="$TMP/$arch-A/ckpt/step_00000002"
    check "$arch: resumed at step 2 on the same layout: final weights identical" \
        cmp -s "$TMP/$arch-A/ckpt/final/model.safetensors" "$TMP/$arch-R2/ckpt/final/model.safetensors"
    ran "$arch-R4" 4 "$ini" -s parallel.strategy=hybrid_shard -s parallel.shard_size=2 \
        -s checkpoint.resume="$TMP/$arch-A/ckpt/step_00000002"
    check "$arch: resumed on 4 ranks hybrid_shard 2x2 equals the run at 1e-5" \
        compare_runs --resumed-at 2 "$TMP/$arch-R4" "$TMP/$arch-A" 1e-5
    # A crash right after the step-2 checkpoint, then checkpoint.resume =
    # auto (what a requeued job does): the run continues exactly.
    SHARDTRAIN_TEST_FAULT=0:ckpt_done:kill:1 run "$arch-K" 2 "$ini" -s checkpoint.every=2
    check "$arch: killed after its first checkpoint (exit $?)" test -e "$TMP/$arch-K/ckpt/step_00000002" -a ! -e "$TMP/$arch-K/ckpt/final"
    ranks 2 300 "$SHARDTRAIN" train -s log.dir="$TMP/$arch-K/logs" -s checkpoint.dir="$TMP/$arch-K/ckpt" \
        -s checkpoint.every=2 "$ini" >"$TMP/$arch-K2.out" 2>"$TMP/$arch-K2.err"
    check "$arch: the restarted run resumes from step 2 and ends with the uninterrupted run's weights" \
        cmp -s "$TMP/$arch-A/ckpt/final/model.safetensors" "$TMP/$arch-K/ckpt/final/model.safetensors"
    refused "$arch: a LoRA checkpoint resumed without LoRA is refused" "holds LoRA adapters" \
        "$SHARDTRAIN" train -s lora.rank=0 -s log.dir="$TMP/x/logs" -s checkpoint.dir="$TMP/x/ckpt" \
        -s checkpoint.resume="$TMP/$arch-A/ckpt/step_00000002" "$ini"

    # ---- export: merged, adapter, and peft ---------------------------------
    "$SHARDTRAIN" export "$TMP/$arch-A/ckpt" "$TMP/$arch-merged" >/dev/null 2>"$TMP/ex.err"
    check "$arch: export of the LoRA checkpoint (merged) equals the final weights" \
        same_tensors "$TMP/$arch-merged/model.safetensors" "$TMP/$arch-A/ckpt/final/model.safetensors"
    # The base is opened once for a whole stream of units (the final
    # weights, export): one debug line each, every header read once and
    # every base tensor byte once, as the start of the run reads them.
    SHARDTRAIN_DEBUG_IO=1 run "$arch-io" 1 "$ini" -s train.steps=1
    SHARDTRAIN_DEBUG_IO=1 "$SHARDTRAIN" export "$TMP/$arch-A/ckpt" "$TMP/$arch-merged-io" \
        >/dev/null 2>"$TMP/exio.err"
    check "$arch: the final weights and export read the base's headers once, each byte once" \
        python3 - "$TMP/$arch-io.err" "$TMP/exio.err" <<'EOF_PY'
import re, sys
pat = re.compile(r"^shardtrain: debug: rank 0 read (\d+) of (\d+) tensor data bytes "
                 r"and (\d+) header bytes from (\d+) files$")
def lines(p):
    return [tuple(map(int, m.groups())) for m in map(pat.match, open(p)) if m]
train, export = lines(sys.argv[1]), lines(sys.argv[2])
# the start of the run, then the final weights; export's one stream
assert len(train) == 2 and len(export) == 1, (train, export)
start = train[0]
assert start[0] == start[1] > 0 and start[2] > 0, start
assert train[1] == start and export[0] == start, (train, export)
EOF_PY
    # A base that cannot be read is refused before anything is written.
    refused "$arch: export --base of a missing base is refused" "nothing-here.*cannot open weights" \
        "$SHARDTRAIN" export --base "$TMP/nothing-here" "$TMP/$arch-A/ckpt" "$TMP/$arch-nobase"
    check "$arch: ... and no output directory is made" test ! -e "$TMP/$arch-nobase"
    "$SHARDTRAIN" export --adapter "$TMP/$arch-A/ckpt" "$TMP/$arch-adapter" >/dev/null 2>"$TMP/ex.err"
    check "$arch: export --adapter equals final/adapter" \
        same_tensors "$TMP/$arch-adapter/adapter_model.safetensors" \
        "$TMP/$arch-A/ckpt/final/adapter/adapter_model.safetensors"
    "$PEFT" "$top_srcdir/tests/peft_ref.py" check "$base" "$TMP/$arch-adapter" "$TMP/$arch-merged" \
        >"$TMP/peft-$arch.out" 2>&1
    check "$arch: peft loads the adapter onto the base with the merged model's logits" \
        test $? -eq 0
    diag "$(cat "$TMP/peft-$arch.out")"
    "$PEFT" "$top_srcdir/tests/peft_ref.py" check "$base" "$TMP/$arch-adapter" "$base" \
        >"$TMP/peft-neg.out" 2>&1
    check "$arch: the peft check fails against the base alone" test $? -ne 0
done

refused "export --adapter of a full fine-tuning checkpoint is refused" "not a LoRA checkpoint" \
    "$SHARDTRAIN" export --adapter "$TMP/llama-full/ckpt" "$TMP/x-adapter"
refused "export --adapter of a full fine-tuning run's final weights is refused" "no LoRA adapters" \
    "$SHARDTRAIN" export --adapter "$TMP/llama-full/ckpt/final" "$TMP/x-adapter"

# ---- bad keys ----------------------------------------------------------------
write_base_ini "$TMP/bad.ini"
refused "lora.targets naming a layer gpt2 lacks" 'lora.targets names "q"' \
    "$SHARDTRAIN" check -s lora.rank=4 -s lora.targets=c_attn,q "$TMP/bad.ini"
refused "lora.targets naming a layer llama lacks" 'c_fc' \
    "$SHARDTRAIN" check -s model.arch=llama -s lora.rank=4 -s lora.targets=c_fc "$TMP/bad.ini"
refused "empty lora.targets" 'lora.targets is empty' \
    "$SHARDTRAIN" check -s lora.rank=4 -s lora.targets= "$TMP/bad.ini"
refused "lora.dropout = 1" 'lora.dropout' \
    "$SHARDTRAIN" check -s lora.rank=4 -s lora.dropout=1 "$TMP/bad.ini"
refused "lora.rank = -1" 'lora.rank' \
    "$SHARDTRAIN" check -s lora.rank=-1 "$TMP/bad.ini"
refused "lora.alpha = 0" 'lora.alpha' \
    "$SHARDTRAIN" check -s lora.rank=4 -s lora.alpha=0 "$TMP/bad.ini"
"$SHARDTRAIN" check -s model.arch=llama -s lora.rank=4 -s lora.targets="q, v,down_proj" "$TMP/bad.ini" \
    >"$TMP/good.out" 2>&1
check "short llama names and spaces are accepted (q, v,down_proj)" test $? -eq 0
exit 0
