#!/bin/sh
# The CPU-checkable parts of the GPU benchmark (bench/, docs/gpu.md):
# bench/torch_train.py builds the same models as shardtrain (parameter count
# and FLOPs per token equal to the binary's own, for the tiny preset on both
# architectures after real training steps, and the parameter count of every
# preset the binary knows), and bench/gpu.sh is valid sh, passes shellcheck,
# turns a run into its table and JSON, and reports failures as "failed: ..."
# instead of numbers; the CPU benchmark bench/cpu.sh turns a short run into
# its table and refuses a run whose loss does not fall.  No timing is
# checked.  A missing PyTorch or a
# missing shellcheck is a failure, never a skip.
. "$top_srcdir/tests/lib.sh"

bench=$top_srcdir/bench
if [ -z "${TORCH_PYTHON:-}" ] || ! "$TORCH_PYTHON" -c 'import torch' >"$TMP/import.log" 2>&1; then
    not_ok "torch not importable from TORCH_PYTHON (${TORCH_PYTHON:-empty})"
    exit 1
fi
PY=$TORCH_PYTHON

# json FILE EXPR: prints EXPR evaluated with d = the last JSON line of FILE.
json() {
    "$PY" - "$1" "$2" <<'EOF2'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
d = json.loads(lines[-1])
print(eval(sys.argv[2]))
EOF2
}
# same_count NAME A B [REL]: A equals B (or within relative REL); both numbers.
same_count() {
    if "$PY" -c 'import sys; a, b, r = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); sys.exit(not (b > 0 and abs(a - b) <= r * b))' \
        "$2" "$3" "${4:-0}" 2>/dev/null; then
        ok "$1: $2 = $3"
    else
        not_ok "$1: torch_train.py $2, shardtrain $3"
    fi
}
# The comparison itself must be able to fail.
if "$PY" -c 'import sys; a, b = 120577.0, 120576.0; sys.exit(not (abs(a - b) <= 0 * b))'; then
    not_ok "an off-by-one parameter count is told apart"
else
    ok "an off-by-one parameter count is told apart"
fi

prepare_test_data

# Tiny preset, both architectures: shardtrain trains one step with a peak
# set, so that its FLOPs per token are mfu x peak / tokens_per_s (each
# printed to 6 significant digits: compared to 2e-5), and its log names
# the parameter count.  torch_train.py trains two steps on the CPU.
peak=0.001
for arch in gpt2 llama; do
    cat >"$TMP/$arch.ini" <<EOF2
[model]
arch = $arch
preset = tiny
[data]
train = $TMP/data/sh_train_*.bin
[train]
device = cpu
steps = 1
[log]
dir = $TMP/$arch/logs
peak_tflops = $peak
[checkpoint]
dir = $TMP/$arch/ckpt
EOF2
    if "$SHARDTRAIN" train "$TMP/$arch.ini" >"$TMP/$arch.st.log" 2>&1; then
        ok "shardtrain trains tiny $arch"
    else
        not_ok "shardtrain trains tiny $arch"; diag "$(tail -n 5 "$TMP/$arch.st.log")"
        continue
    fi
    st_params=$(sed -n 's/.* \([0-9][0-9]*\) parameters.*/\1/p' "$TMP/$arch.st.log" | head -n 1)
    st_flops=$(json "$TMP/$arch/logs/metrics.jsonl" "d['mfu'] * $peak * 1e12 / d['tokens_per_s']")
    if "$PY" "$bench/torch_train.py" --model tiny --arch "$arch" --device cpu --no-compile \
        --micro-batch 2 --steps 2 --warmup 1 >"$TMP/$arch.torch.json" 2>"$TMP/$arch.torch.err"; then
        ok "torch_train.py trains tiny $arch on the CPU"
    else
        not_ok "torch_train.py trains tiny $arch on the CPU"
        diag "$(cat "$TMP/$arch.torch.json")" "$(tail -n 5 "$TMP/$arch.torch.err")"
        continue
    fi
    check "torch_train.py tiny $arch: status ok, finite losses, 64-token sequences" \
        test "$(json "$TMP/$arch.torch.json" "d['status'] == 'ok' and d['seq'] == 64 and d['micro_batch'] == 2 and all(abs(d[k]) < 1e9 for k in ('loss_first', 'loss_last'))")" = True
    same_count "tiny $arch parameters" "$(json "$TMP/$arch.torch.json" "d['params']")" "${st_params:-0}"
    same_count "tiny $arch FLOPs per token" "$(json "$TMP/$arch.torch.json" "d['flops_per_token']")" "${st_flops:-0}" 2e-5
done

# Every preset the binary knows (from its own error message), built on the
# meta device: the parameter count equals shardtrain estimate's fp32
# parameter bytes / 4 on one rank.
presets=$("$SHARDTRAIN" check -s model.preset=none-such /dev/null 2>&1 | sed -n 's/.*allowed: //p' | tr '|' ' ')
check "shardtrain lists its presets" test -n "$presets"
for p in $presets; do
    arch=
    [ "$p" = tiny ] && arch="--arch llama"
    # vocab_padding 1: the estimate's parameter bytes are the stored
    # elements, which the default padding of the vocabulary rows
    # (tests/vocab_pad.sh) would raise above the parameter count.
    printf '[model]\npreset = %s\nvocab_padding = 1\n%s' "$p" "${arch:+arch = llama
}" >"$TMP/p.ini"
    # shellcheck disable=SC2086
    if ! "$PY" "$bench/torch_train.py" --model "$p" $arch --count-only >"$TMP/p.json" 2>"$TMP/p.err"; then
        not_ok "torch_train.py knows preset $p"; diag "$(cat "$TMP/p.json" "$TMP/p.err")"
        continue
    fi
    st=$("$SHARDTRAIN" estimate --nodes 1 --tasks-per-node 1 --json "$TMP/p.ini" 2>"$TMP/e.err" |
         "$PY" -c 'import json, sys; print(int(json.load(sys.stdin)["no_shard"]["none"]["params"]) // 4)')
    same_count "preset $p parameters" "$(json "$TMP/p.json" "d['params']")" "${st:-0}"
done

# bench/gpu.sh: syntax, shellcheck.
check "sh -n bench/gpu.sh" sh -n "$bench/gpu.sh"
require shellcheck --version
if shellcheck -s sh "$bench/gpu.sh" >"$TMP/sc.log" 2>&1; then
    ok "shellcheck bench/gpu.sh"
else
    not_ok "shellcheck bench/gpu.sh"; diag "$(head -n 20 "$TMP/sc.log")"
fi

# bench/cpu.sh and bench/gemm_cpu.sh (the CPU benchmarks): shellcheck, then
# a short cpu.sh run of the small shape against PyTorch (one round of three
# steps, one thread): a row with numbers and a ratio; and the same with a
# learning rate too small to move the loss, which its loss check must
# refuse in every cell.
for f in cpu.sh gemm_cpu.sh; do
    if shellcheck -s sh "$bench/$f" >"$TMP/sc.log" 2>&1; then
        ok "shellcheck bench/$f"
    else
        not_ok "shellcheck bench/$f"; diag "$(head -n 20 "$TMP/sc.log")"
    fi
done
cpu_bench() { # OUT [VAR=VALUE...]
    _o=$1
    shift
    env SHAPES=small STEPS=3 SKIP=1 ROUNDS=1 THREADS=1 TABLES=cpu TORCH_PYTHON="$PY" \
        SHARDTRAIN="$SHARDTRAIN" OUT="$_o" "$@" sh "$bench/cpu.sh" >"$_o.log" 2>&1
}
cpu_bench "$TMP/cpu" || diag "$(tail -n 20 "$TMP/cpu.log")"
check "bench/cpu.sh: a small row with tokens/s for shardtrain and PyTorch and their ratio" \
    "$PY" -c '
import re, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| small | 1 (pinned) |")]
c = [x.strip() for x in rows[0].split("|")[1:-1]] if rows else []
num = lambda x: re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", x)
sys.exit(not (len(rows) == 1 and len(c) == 7 and num(c[2]) and num(c[3]) and num(c[5])))
' "$TMP/cpu/results.md"
cpu_bench "$TMP/cpu-lr" LR=1e-9 || true
check "bench/cpu.sh: a loss that does not fall gives 'failed: loss' cells, no number" \
    "$PY" -c '
import sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| small | 1 (pinned) |")]
c = [x.strip() for x in rows[0].split("|")[1:-1]] if rows else []
sys.exit(not (len(rows) == 1 and len(c) == 7 and c[2].startswith("failed: loss")
              and c[3].startswith("failed: loss") and c[5] == "n/a"))
' "$TMP/cpu-lr/results.md"

# A whole run on the CPU (tiny preset, the binary under test): a table row
# with numbers for both, a ratio, and the raw JSON.
if GPU_BENCH_DEVICE=cpu GPU_BENCH_MODELS=tiny GPU_BENCH_NO_BUILD=1 GPU_BENCH_MAX_MB=2 \
    GPU_BENCH_STEPS=3 GPU_BENCH_SKIP=1 GPU_BENCH_TORCH_STEPS=2 GPU_BENCH_TORCH_WARMUP=1 \
    GPU_BENCH_BUDGET_S=400 OUT="$TMP/run" sh "$bench/gpu.sh" >"$TMP/run.log" 2>&1; then
    ok "bench/gpu.sh runs on the CPU"
else
    not_ok "bench/gpu.sh runs on the CPU"; diag "$(tail -n 20 "$TMP/run.log")"
fi
row=$(grep '^| tiny |' "$TMP/run/results.md" 2>/dev/null)
check "results.md: a tiny row with tok/s for both and a ratio" \
    "$PY" -c 'import re, sys; c = [x.strip() for x in sys.argv[1].split("|")[1:-1]]; sys.exit(not (len(c) == 7 and c[1] == "2 / 2" and all(re.fullmatch(r"[0-9,]+", c[i]) for i in (2, 4)) and re.fullmatch(r"[0-9.]+", c[6])))' "$row"
check "results.json: both sides ok, shardtrain's parameter count" \
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]["tiny"]; sys.exit(not (r["shardtrain"]["status"] == r["torch"]["status"] == "ok" and r["shardtrain"]["params"] == r["torch"]["params"]))' "$TMP/run/results.json"

# A run where both sides fail: every cell says why, none holds a number.
if SHARDTRAIN=/bin/false TORCH_PYTHON=/bin/false GPU_BENCH_MODELS="gpt2-124m llama-1b" \
    GPU_BENCH_NO_BUILD=1 GPU_BENCH_BUDGET_S=400 OUT="$TMP/fail" sh "$bench/gpu.sh" >"$TMP/fail.log" 2>&1; then
    :
fi
check "failed run: two rows, each cell 'failed: ...' and no ratio" \
    "$PY" -c '
import sys
rows = [l for l in open(sys.argv[1]) if l.startswith(("| gpt2-124m |", "| llama-1b |"))]
ok = len(rows) == 2
for l in rows:
    c = [x.strip() for x in l.split("|")[1:-1]]
    ok = ok and all(x.startswith("failed: ") for x in c[2:6]) and c[6].startswith("n/a")
sys.exit(not ok)' "$TMP/fail/results.md"
exit 0
