#!/bin/sh
# The whole-step table of docs/gpu.md is the step the code makes: the
# emulated shardtrain (tests/gpu/emu/build_shardtrain.sh) walks one bf16
# training step of gpt2-124m (B 64, T 1024) and llama-1b (B 8, T 2048) at
# full size in record-only mode (bench/step_walk.sh: every launch,
# cuBLASLt product, copy and memset recorded with its grid and sizes, and
# checked, none executed), and bench/step_model.py regenerates the table
# from those records; it must equal the committed block byte for byte.
# So a launch added to or removed from the step, a changed grid or buffer
# size, or a changed cost formula fails here until the table is
# regenerated (bench/step_model.py DIR --write docs/gpu.md).  It also
# checks that every kernel with a 16-byte path takes it in both steps.
# Self-checks: one launch more in the record is told apart, a launch on a
# one-element path is reported, and an operation without a cost formula
# stops the generator.  gpt2-124m is also walked on 8 ranks (full_shard)
# and on 16 (hybrid_shard, two nodes of 8), and llama-1b the same two
# ways, for the two-stream replay of their collectives (see below).  About
# 10 minutes on two busy cores, most of it the host's set-up of llama-1b's
# 1.2 billion parameters.
# Registered only where configure found the CUDA toolkit.
. "$top_srcdir/tests/lib.sh"
require command -v g++
require command -v python3
export OMP_NUM_THREADS=1

EMU="$TMP/shardtrain-emu"
build_emulated_shardtrain "$EMU" "emulated shardtrain builds"

W="$TMP/walk"
if nice -n 10 sh "$top_srcdir/bench/step_walk.sh" "$EMU" "$SHARDTRAIN" "$W" "$top_srcdir" \
        >"$TMP/walk.log" 2>&1; then
    ok "full-size steps walked in record-only mode (gpt2-124m B 64 T 1024, llama-1b B 8 T 2048)"
else
    not_ok "full-size steps walked in record-only mode"
    diag "$(tail -n 20 "$TMP/walk.log")"
    exit 1
fi

tab=$(printf '\t')
model() { python3 "$top_srcdir/bench/step_model.py" "$@"; }
if model "$W" --check "$top_srcdir/docs/gpu.md" >"$TMP/diff" 2>&1; then
    ok "docs/gpu.md's whole-step table matches the walked step's launches"
else
    not_ok "docs/gpu.md's whole-step table matches the walked step's launches" \
        "(regenerate: bench/step_model.py DIR --write docs/gpu.md)"
    diag "$(head -n 40 "$TMP/diff")"
fi

# The prose summary above the block ("At the roofline ...") quotes the
# block's figures; each of its percentages and millisecond figures must be
# one the regenerated block prints (so the summary cannot go stale).
model "$W" >"$TMP/block.md" 2>/dev/null
if python3 - "$top_srcdir/docs/gpu.md" "$TMP/block.md" >"$TMP/prose" 2>&1 <<'EOP'
import re, sys
doc, block = (open(p).read() for p in sys.argv[1:3])
a = doc.index("At the roofline")
prose = doc[a:doc.index("\n\n", a)]
figs = re.findall(r"\d+\.\d+(?:%| ms)", prose)
missing = [f for f in figs if f not in block]
print(f"{len(figs)} figures; not in the block: {missing}")
sys.exit(1 if missing or not figs else 0)
EOP
then ok "docs/gpu.md's summary quotes the block's figures ($(cat "$TMP/prose"))"
else not_ok "docs/gpu.md's summary quotes the block's figures"; diag "$(cat "$TMP/prose")"; fi

for m in gpt2-124m llama-1b; do
    check "$m: the step has attention, GEMMs and AdamW in its record" \
        sh -c "grep -q '^launch${tab}attn_fwd_tc_kernel' '$W/$m.steps2.rec' &&
               grep -q '^gemm${tab}' '$W/$m.steps2.rec' &&
               grep -q '^launch${tab}adamw_unit_kernel' '$W/$m.steps2.rec'"
done

# The multi-rank walks of gpt2-124m (parallel.backend = nccl): rank 0's
# record holds its collectives, their groups' world ranks and the event
# ordering comm_nccl.c enqueues, which bench/step_overlap.py replays on two
# streams for the table's multi-rank rows; tests/step_overlap_check.py
# checks that replay on records worked by hand, its link figures against
# src/plan/projection.c, and the walked steps against the bounds any
# schedule of them meets and the collectives their units make.
for w in gpt2-124m.r8 gpt2-124m.r16h8 llama-1b.r8 llama-1b.r16h8; do
    check "$w: rank 0's record has collectives, event records and waits" \
        sh -c "grep -q '^nccl${tab}all_gather' '$W/$w.steps2.rec' &&
               grep -q '^nccl${tab}reduce_scatter' '$W/$w.steps2.rec' &&
               grep -q '^record${tab}' '$W/$w.steps2.rec' &&
               grep -q '^wait${tab}' '$W/$w.steps2.rec'"
done
python3 "$top_srcdir/tests/step_overlap_check.py" "$top_srcdir" "$W" >"$TMP/overlap" 2>&1
if ! grep -q '^PASS ' "$TMP/overlap"; then
    not_ok "tests/step_overlap_check.py runs"
    diag "$(tail -n 20 "$TMP/overlap")"
fi
while IFS= read -r line; do
    case $line in
        "PASS "*) ok "step_overlap: ${line#PASS }" ;;
        "FAIL "*) not_ok "step_overlap: ${line#FAIL }" ;;
    esac
done <"$TMP/overlap"

# Every memory-bound kernel with a 16-byte path must take it in the bf16
# step: the model's layouts are aligned (widths multiples of 8, buffers
# 256-byte aligned), and the table prices every such launch at full
# bandwidth.  The records carry each launch's template arguments (kVec).
model "$W" --scalar >"$TMP/scalar" 2>&1
vec=$(grep -c "^launch${tab}[^${tab}]*kVec[^${tab}]* = <[^${tab}]*true" "$W/gpt2-124m.steps2.rec" \
    "$W/llama-1b.steps2.rec" | awk -F: '{ n += $2 } END { print n + 0 }')
if [ ! -s "$TMP/scalar" ] && [ "$vec" -gt 0 ]; then
    ok "the bf16 steps take every kernel's 16-byte path ($vec launches with kVec = true in the two-step records)"
else
    not_ok "the bf16 steps take every kernel's 16-byte path ($vec launches with kVec = true)"
    diag "$(head -n 20 "$TMP/scalar")"
fi

# Self-checks on copies of the records: one launch more in gpt2's step (a
# copy of its first kernel launch) changes the table against a document
# regenerated from the unchanged records, and a kernel without a cost
# formula stops the generator.
cp -r "$W" "$TMP/extra"
cp "$top_srcdir/docs/gpu.md" "$TMP/gpu.md"
model "$W" --write "$TMP/gpu.md" 2>/dev/null
extra=$(grep -m1 "^launch${tab}" "$W/gpt2-124m.steps2.rec")
printf '%s\n' "$extra" >>"$TMP/extra/gpt2-124m.steps2.rec"
if [ -z "$extra" ] || model "$TMP/extra" --check "$TMP/gpu.md" >/dev/null 2>&1; then
    not_ok "self-check: one launch added to the step is told apart"
else
    ok "self-check: one launch added to the step is told apart"
fi
# (the last SwiGLU launch of llama's second step turned to kVec = false)
cp -r "$W" "$TMP/scalarrec"
n=$(grep -n "^launch${tab}swiglu_forward_kernel" "$W/llama-1b.steps2.rec" | tail -n 1 | cut -d: -f1)
sed "${n:-0}s/, true>/, false>/" "$W/llama-1b.steps2.rec" >"$TMP/scalarrec/llama-1b.steps2.rec"
model "$TMP/scalarrec" --scalar >"$TMP/scalar2" 2>&1
if grep -q "^llama-1b: 1 x swiglu_forward_kernel<bf16, false>" "$TMP/scalar2"; then
    ok "self-check: a launch recorded on its one-element path is reported"
else
    not_ok "self-check: a launch recorded on its one-element path is reported"
    diag "$(head -n 5 "$TMP/scalar2")"
fi
cp -r "$W" "$TMP/unknown"
printf 'launch\tnew_kernel\t1,1,1\t32,1,1\t0\tp4\t64\n' >>"$TMP/unknown/llama-1b.steps2.rec"
if model "$TMP/unknown" >/dev/null 2>"$TMP/unknown.err"; then
    not_ok "self-check: a kernel without a cost formula stops the generator"
else
    check "self-check: a kernel without a cost formula stops the generator" \
        grep -q "no cost formula for 'new_kernel'" "$TMP/unknown.err"
fi
exit $((tap_fail > 0))
