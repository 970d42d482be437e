#!/bin/sh
# End-to-end training on one rank: metrics, determinism, accumulation
# invariance, activation recomputation, bf16, evaluation, exact state
# bytes, weights round trip, sampling, and the errors a user can hit.
. "$top_srcdir/tests/lib.sh"

prepare_test_data

# The base with evaluation data, 12 steps and 2 warmup steps.
write_base_ini "$TMP/base.ini"
sets="-s train.steps=12 -s optim.warmup_steps=2"
# st COMMAND [ARG...]: shardtrain COMMAND ARGS on that configuration
st() {
    _cmd=$1
    shift
    "$SHARDTRAIN" "$_cmd" $sets -s data.val="$TMP/data/sh_val_*.bin" "$@" "$TMP/base.ini"
}

# metrics FILE FIELD: the field of every non-eval line, one per line
metrics() {
    python3 -c '
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r:
        v = r[sys.argv[2]]
        print(repr(v))
' "$@"
}

run_train() { # NAME [-s ...]: runs into $TMP/NAME
    name=$1
    shift
    st train -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
}

if run_train a; then ok "tiny gpt2 trains"; else not_ok "tiny gpt2 trains"; diag "$(cat "$TMP/a.err")"; fi
check "one metrics line per step" test "$(metrics "$TMP/a/logs/metrics.jsonl" loss | wc -l)" -eq 12
python3 - "$TMP/a/logs/metrics.jsonl" <<'EOF2' && ok "metrics lines carry every field" || not_ok "metrics lines carry every field"
import json, sys
need = {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "time_ms", "state_bytes", "peak_bytes"}
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if "loss" in r]
assert all(need <= set(r) for r in train), "missing field"
assert [r["step"] for r in train] == list(range(1, 13))
assert all(r["peak_bytes"] >= r["state_bytes"] > 0 for r in train)
EOF2
first=$(metrics "$TMP/a/logs/metrics.jsonl" loss | head -n 1)
last=$(metrics "$TMP/a/logs/metrics.jsonl" loss | tail -n 1)
check "loss falls ($first -> $last)" python3 -c "import sys; sys.exit(not ($last < $first - 0.3))"
check "initial loss is near ln(256) = 5.545 ($first)" python3 -c "import sys; sys.exit(not (abs($first - 5.545) < 0.1))"
check "progress line format" grep -Eq '^step 12/12 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| gnorm [0-9.]+ \| [0-9]+ tok/s \| mfu - \| eta ' "$TMP/a.out"

# state_bytes is exact: parameters + gradients + two AdamW moments, fp32.
# Parameter count of tiny gpt2 (V=256, C=64, T=32, L=2, F=256), tied:
# wte + wpe + L * (2 LN (4C) + qkv (3C*C + 3C) + proj (C*C + C) + fc (C*F + F) + proj (F*C + C)) + ln_f (2C)
nparams=$(( 256*64 + 32*64 + 2*(4*64 + 3*64*64 + 3*64 + 64*64 + 64 + 64*256 + 256 + 256*64 + 64) + 2*64 ))
sb=$(metrics "$TMP/a/logs/metrics.jsonl" state_bytes | tail -n 1)
check "state_bytes = 16 x parameters ($sb = 16 x $nparams)" test "$sb" -eq $((16 * nparams))

# Determinism: a rerun gives identical metrics, timing aside.
run_train b
for field in loss lr grad_norm state_bytes peak_bytes; do
    if compare_runs --exact --only metrics --field $field "$TMP/a" "$TMP/b"; then
        ok "rerun: identical $field"
    else
        not_ok "rerun: identical $field"
    fi
done
check "rerun: identical final weights" cmp -s "$TMP/a/ckpt/final/model.safetensors" "$TMP/b/ckpt/final/model.safetensors"
if (OMP_NUM_THREADS=1 && export OMP_NUM_THREADS && run_train c1) &&
    cmp -s "$TMP/a/ckpt/final/model.safetensors" "$TMP/c1/ckpt/final/model.safetensors"
then ok "threads do not change results"; else not_ok "threads do not change results"; fi

# Accumulation: the same global batch in 1, 2 or 8 micro-batches.
run_train m8 -s train.micro_batch=8
run_train m1 -s train.micro_batch=1
check "micro_batch 8 (no accumulation) = micro_batch 4 x 2 within 1e-5" compare_runs --only metrics "$TMP/m8" "$TMP/a" 1e-5
check "micro_batch 1 x 8 = micro_batch 4 x 2 within 1e-5" compare_runs --only metrics "$TMP/m1" "$TMP/a" 1e-5

# Activation recomputation: same numbers, less memory.
run_train ck -s train.activation_checkpointing=full
check "activation_checkpointing = full: identical losses" compare_runs --exact --only metrics "$TMP/ck" "$TMP/a"
pk_full=$(metrics "$TMP/a/logs/metrics.jsonl" peak_bytes | tail -n 1)
pk_ck=$(metrics "$TMP/ck/logs/metrics.jsonl" peak_bytes | tail -n 1)
check "activation_checkpointing lowers peak_bytes ($pk_full -> $pk_ck)" test "$pk_ck" -lt "$pk_full"

# bf16 (emulated): trains, and its first loss is within 2e-2 of fp32's.
run_train bf -s train.precision=bf16
bf_first=$(metrics "$TMP/bf/logs/metrics.jsonl" loss | head -n 1)
check "bf16 first loss within 2e-2 of fp32 ($bf_first vs $first)" python3 -c "import sys; sys.exit(not (abs($bf_first - $first) / $first < 2e-2))"
# bf16 keeps the fp32 master and adds the shard's bf16 copy the gathers send.
check "bf16 state_bytes = 18 x parameters (fp32 master + its bf16 copy)" test "$(metrics "$TMP/bf/logs/metrics.jsonl" state_bytes | tail -n 1)" -eq $((18 * nparams))

# Llama, with evaluation.
if run_train ll -s model.arch=llama -s train.eval_every=6 -s train.eval_batches=2; then ok "tiny llama trains"; else not_ok "tiny llama trains"; diag "$(cat "$TMP/ll.err")"; fi
lf=$(metrics "$TMP/ll/logs/metrics.jsonl" loss | head -n 1)
ll=$(metrics "$TMP/ll/logs/metrics.jsonl" loss | tail -n 1)
check "llama loss falls ($lf -> $ll)" python3 -c "import sys; sys.exit(not ($ll < $lf - 0.3))"
check "val_loss logged at steps 6 and 12" test "$(grep -c '"val_loss"' "$TMP/ll/logs/metrics.jsonl")" -eq 2

# Weights round trip: model.init reads the final weights back.
run_train re -s model.init="$TMP/a/ckpt/final/model.safetensors" -s train.steps=1
re1=$(metrics "$TMP/re/logs/metrics.jsonl" loss | head -n 1)
check "model.init continues from trained weights (first loss $re1 < $first - 0.3)" python3 -c "import sys; sys.exit(not ($re1 < $first - 0.3))"

# Sampling.
st sample --tokens 40 --temperature 0 --prompt "ROMEO:" -s checkpoint.dir="$TMP/a/ckpt" >"$TMP/s1" 2>"$TMP/s1.err"
check "sample prints the prompt and 40 tokens" test "$(head -c 6 "$TMP/s1")" = "ROMEO:" -a "$(wc -c <"$TMP/s1")" -eq 47
st sample --tokens 40 --temperature 0 --prompt "ROMEO:" -s checkpoint.dir="$TMP/a/ckpt" >"$TMP/s2" 2>&1
check "greedy sampling is deterministic" cmp -s "$TMP/s1" "$TMP/s2"

# Errors: exit 2 and one line naming the problem.
expect_error() { # DESCRIPTION PATTERN COMMAND...
    d=$1 pat=$2
    shift 2
    "$@" >/dev/null 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- "$pat" "$TMP/err"; then ok "$d"
    else not_ok "$d (exit $rc)"; diag "$(cat "$TMP/err")"; fi
}
printf 'garbage that is not a token file at all, long enough to have a header? no\n' >"$TMP/bad.bin"
expect_error "bad data file: exit 2 naming it" "bad.bin" st train -s data.train="$TMP/bad.bin" -s data.val=
expect_error "no file matches data.train" "no file matches" st train -s data.train="$TMP/none_*.bin"
expect_error "vocab too small for the data" "vocab" st train -s model.vocab_size=64
expect_error "device = cuda without a usable GPU (none visible, or a build without CUDA)" "train.device = cuda but \(no CUDA device is visible\|this build has no CUDA backend\)" st train -s train.device=cuda
expect_error "sample with missing weights" "cannot open weights" st sample -s checkpoint.dir="$TMP/nowhere"
printf 'not safetensors' >"$TMP/bad.safetensors"
expect_error "model.init not safetensors" "bad.safetensors" st train -s model.init="$TMP/bad.safetensors"
expect_error "weights of another shape" "shape" st train -s model.init="$TMP/a/ckpt/final/model.safetensors" -s model.d_model=128
expect_error "checkpoint.resume = a missing PATH is an error, not ignored" "no such checkpoint" st train -s checkpoint.resume=/some/ckpt
expect_error "unknown subcommand" "unknown subcommand" "$SHARDTRAIN" frobnicate
expect_error "train without CONFIG" "missing CONFIG" "$SHARDTRAIN" train
if command -v mpirun >/dev/null 2>&1; then
    if mpirun -np 1 "$SHARDTRAIN" train $sets -s data.val="$TMP/data/sh_val_*.bin" -s log.dir="$TMP/mp/logs" \
           -s checkpoint.dir="$TMP/mp/ckpt" "$TMP/base.ini" >/dev/null 2>&1 &&
       compare_runs --exact --only metrics "$TMP/mp" "$TMP/a"; then
        ok "mpirun -np 1 gives the same losses as a plain run"
    else not_ok "mpirun -np 1 gives the same losses as a plain run"; fi
else
    not_ok "mpirun not found"
fi
