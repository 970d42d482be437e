#!/bin/sh
# Compares shardtrain's forward and backward pass with an independent PyTorch
# reference (tests/torch_ref.py, float64): tests/test_dump writes the weights,
# inputs, logits, loss and every gradient of a small model for each
# architecture (and a Llama with Llama 3.1's RoPE scaling, masked targets,
# and LoRA adapters on every target), and torch_ref.py recomputes them.  Its TAP lines are passed
# through, renumbered into this script's sequence.  A missing PyTorch is a
# failure, never a skip.
. "$top_srcdir/tests/lib.sh"
: "${top_builddir:=$top_srcdir}"

if [ -z "${TORCH_PYTHON:-}" ]; then
    not_ok "torch not importable from TORCH_PYTHON (TORCH_PYTHON is empty; configure found no Python with torch and numpy)"
    exit 1
fi
if ! "$TORCH_PYTHON" -c 'import torch, numpy' >"$TMP/import.log" 2>&1; then
    not_ok "torch not importable from TORCH_PYTHON ($TORCH_PYTHON)"
    [ -s "$TMP/import.log" ] && diag "$(cat "$TMP/import.log")"
    exit 1
fi

# run_tap LABEL COMMAND...: runs a TAP-printing command and replays each of
# its ok / not ok lines as one of ours, then adds one check that it exited 0
# with a complete plan, so a crash or a cut-short run always counts as a
# failure even when every line it printed before was ok.
run_tap() {
    label=$1; shift
    "$@" >"$TMP/tap.out" 2>"$TMP/tap.err"
    rc=$?
    seen=0 bad=0 plan=
    while IFS= read -r line; do
        case $line in
            "ok "*|"not ok "*)
                seen=$((seen + 1))
                # strip "ok N - " / "not ok N - "
                desc=$(printf '%s\n' "$line" | sed -e 's/^\(not \)\{0,1\}ok [0-9]*\( - \)\{0,1\}//')
                case $line in
                    "ok "*) ok "$label: $desc" ;;
                    *)      not_ok "$label: $desc"; bad=$((bad + 1)) ;;
                esac ;;
            1..*) plan=${line#1..} ;;
            "#"*) echo "$line" ;;
            *) [ -n "$line" ] && diag "$line" ;;
        esac
    done <"$TMP/tap.out"
    if [ -s "$TMP/tap.err" ]; then
        diag "$label stderr:"
        diag "$(tail -n 40 "$TMP/tap.err")"
    fi
    if [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$seen" -gt 0 ] && [ "$plan" = "$seen" ]; then
        ok "$label: exited 0 after $seen checks"
    else
        not_ok "$label: exit status $rc, $seen checks seen, $bad failed, plan '${plan:-none}'"
    fi
}

ref="$top_srcdir/tests/torch_ref.py"
dumper="$top_builddir/tests/test_dump"
dumped=
# Both architectures, each with tied and untied output embeddings.
for variant in gpt2:1 gpt2:0 llama:0 llama:1; do
    arch=${variant%:*} tied=${variant#*:}
    name=$arch-tied$tied
    if "$dumper" "$arch" "$TMP/$name" "$tied" >"$TMP/dump-$name.log" 2>&1; then
        ok "test_dump $name"
    else
        not_ok "test_dump $name (exit status $?)"
        diag "$(tail -n 20 "$TMP/dump-$name.log")"
        continue
    fi
    run_tap "torch $name" "$TORCH_PYTHON" "$ref" "$TMP/$name"
    [ -n "$dumped" ] || dumped=$name
done

# Llama 3.1's RoPE scaling (model.rope_scaling = llama3), and the proof that
# the comparison sees it: the reference without the scaling must disagree.
if "$dumper" llama "$TMP/llama3" 0 llama3 >"$TMP/dump-llama3.log" 2>&1; then
    ok "test_dump llama with llama3 RoPE scaling"
    run_tap "torch llama-rope-llama3" "$TORCH_PYTHON" "$ref" "$TMP/llama3"
    if ST_REF_IGNORE_ROPE_SCALING=1 "$TORCH_PYTHON" "$ref" "$TMP/llama3" >"$TMP/noscale.out" 2>&1; then
        not_ok "the reference without RoPE scaling still agrees: the scaled case tests nothing"
    else
        ok "the reference without RoPE scaling disagrees ($(grep -c '^not ok' "$TMP/noscale.out") checks fail)"
    fi
else
    not_ok "test_dump llama with llama3 RoPE scaling (exit status $?)"
    diag "$(tail -n 20 "$TMP/dump-llama3.log")"
fi

# Instruction data's loss mask: targets of -1 do not count, and the mean
# is over the rest (PyTorch's ignore_index); and the proof that the
# comparison sees the mask: with the ignored rows dropped from the dump's
# targets' meaning (every target counted), the reference must disagree.
for arch in gpt2 llama; do
    if "$dumper" $arch "$TMP/$arch-masked" 0 masked >"$TMP/dump-$arch-masked.log" 2>&1; then
        ok "test_dump $arch with masked targets"
        run_tap "torch $arch-masked" "$TORCH_PYTHON" "$ref" "$TMP/$arch-masked"
    else
        not_ok "test_dump $arch with masked targets (exit status $?)"
        diag "$(tail -n 20 "$TMP/dump-$arch-masked.log")"
    fi
done
if [ -s "$TMP/gpt2-masked/dump.bin" ]; then
    if ST_REF_COUNT_IGNORED=1 "$TORCH_PYTHON" "$ref" "$TMP/gpt2-masked" >"$TMP/nomask.out" 2>&1; then
        not_ok "the reference counting the ignored positions still agrees: the masked case tests nothing"
    else
        ok "the reference counting the ignored positions disagrees ($(grep -c '^not ok' "$TMP/nomask.out") checks fail)"
    fi
fi

# LoRA (rank 3, alpha 5, every target of the arch; gpt2 with its tied
# embeddings, llama untied): the base weights frozen (no gradient record),
# the loss, logits and every adapter's A and B gradient as PEFT's LoRA
# computes them; and the proof that the comparison sees the adapters'
# scale alpha / rank: the reference with a scale of 1 must disagree.
for variant in gpt2:1 llama:0; do
    arch=${variant%:*} tied=${variant#*:}
    if "$dumper" $arch "$TMP/$arch-lora" $tied lora >"$TMP/dump-$arch-lora.log" 2>&1; then
        ok "test_dump $arch with LoRA adapters"
        run_tap "torch $arch-lora" "$TORCH_PYTHON" "$ref" "$TMP/$arch-lora"
        if ST_REF_LORA_SCALE=1 "$TORCH_PYTHON" "$ref" "$TMP/$arch-lora" >"$TMP/$arch-lora-scale1.out" 2>&1; then
            not_ok "$arch: the reference with LoRA scale 1 (not alpha/rank) still agrees: the LoRA case tests nothing"
        else
            ok "$arch: the reference with LoRA scale 1 (not alpha/rank) disagrees ($(grep -c '^not ok' "$TMP/$arch-lora-scale1.out") checks fail)"
        fi
    else
        not_ok "test_dump $arch with LoRA adapters (exit status $?)"
        diag "$(tail -n 20 "$TMP/dump-$arch-lora.log")"
    fi
done
if [ -s "$TMP/llama-lora/dump.bin" ]; then
    run_tap "torch llama-lora" "$TORCH_PYTHON" "$ref" "$TMP/llama-lora" --self-test
else
    not_ok "LoRA self-test: no dump to run it on"
fi

# The comparison must be able to fail: perturbed gradients, logits and loss,
# missing, extra and misshapen records must all be caught.
if [ -n "$dumped" ]; then
    run_tap "torch $dumped" "$TORCH_PYTHON" "$ref" "$TMP/$dumped" --self-test
else
    not_ok "self-test: no dump to run it on"
fi
exit 0
