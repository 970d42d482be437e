#!/bin/sh
# `shardtrain check --inputs`: the start-up checks of train made on a login
# node before a job is queued.  For every bad input below, check --inputs
# must refuse with the same error lines and exit status that train itself
# gives for the same configuration (train is the reference), print no
# configuration, and write nothing; for good inputs, its comment lines must
# say what train then finds (the tokens prepare wrote, the checkpoint
# train resumes from, the bytes its checkpoints and final weights take).
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" checkpoint.every=2
# st COMMAND [ARG...]: shardtrain COMMAND on the base configuration, with
# its log and checkpoints under $TMP/run
st() {
    _cmd=$1
    shift
    "$SHARDTRAIN" "$_cmd" -s log.dir="$TMP/run/logs" -s checkpoint.dir="$TMP/run/ckpt" "$@" \
        "$TMP/base.ini"
}

# same_refusal NAME [-s ...]: check --inputs and train (one rank) on the
# same overrides both fail, with the same exit status and the same
# warning and error lines, and check prints nothing on stdout and leaves
# $TMP/run as it was.
same_refusal() {
    _name=$1
    shift
    # --inputs last: the arguments before it stand where train's stand,
    # so the error lines name the same command-line positions
    find "$TMP/run" | sort >"$TMP/before.ls"
    timeout -k 10 60 "$SHARDTRAIN" check -s log.dir="$TMP/run/logs" \
        -s checkpoint.dir="$TMP/run/ckpt" "$@" "$TMP/base.ini" --inputs >"$TMP/c.out" 2>"$TMP/c.err"
    _c=$?
    find "$TMP/run" | sort >"$TMP/after.ls"
    ranks 1 120 "$SHARDTRAIN" train -s log.dir="$TMP/run/logs" -s checkpoint.dir="$TMP/run/ckpt" \
        "$@" "$TMP/base.ini" >"$TMP/t.out" 2>"$TMP/t.err"
    _t=$?
    grep -E '^shardtrain: (error|warning):' "$TMP/c.err" >"$TMP/c.lines"
    grep -E '^shardtrain: (error|warning):' "$TMP/t.err" >"$TMP/t.lines"
    if [ "$_c" -ne 0 ] && [ "$_c" -eq "$_t" ] && [ -s "$TMP/c.lines" ] &&
        cmp -s "$TMP/c.lines" "$TMP/t.lines" && [ ! -s "$TMP/c.out" ] &&
        cmp -s "$TMP/before.ls" "$TMP/after.ls" &&
        [ "$(grep -c '^shardtrain: error:' "$TMP/c.err")" -eq 1 ]; then
        ok "$_name: refused as train refuses it (exit $_c, $(wc -l <"$TMP/c.lines") line(s)), nothing written"
    else
        not_ok "$_name: check exit $_c, train exit $_t"
        diag "check: $(cut -c1-250 "$TMP/c.err")" "train: $(cut -c1-250 "$TMP/t.err")"
    fi
}

# ---- good inputs -------------------------------------------------------------

st check --inputs >"$TMP/good.out" 2>"$TMP/good.err"
check "check --inputs on good inputs: exit 0, nothing on stderr" \
    sh -c "[ $? -eq 0 ] && [ ! -s '$TMP/good.err' ]"

"$SHARDTRAIN" prepare "$(shakespeare_text)" "$TMP/data2/sh" >"$TMP/prep2.out" 2>&1
tokens=$(sed -n 's/^wrote .*sh_train_000000.bin (\([0-9]*\) tokens)$/\1/p' "$TMP/prep2.out")
check "it says data.train holds the tokens prepare wrote ($tokens)" \
    grep -qx "; data.train: 1 file(s), $tokens tokens" "$TMP/good.out"
check "... model.init random, the output directories made at start, and a fresh start" \
    sh -c "grep -q '^; model.init: random, [0-9]* parameters\$' '$TMP/good.out' &&
        grep -qx '; log.dir: $TMP/run/logs, made at start' '$TMP/good.out' &&
        grep -qx '; checkpoint.dir: $TMP/run/ckpt, made at start' '$TMP/good.out' &&
        grep -qx '; resume: no checkpoint saved yet (a fresh start)' '$TMP/good.out'"
check "what it prints is still a configuration check reads back" \
    sh -c "'$SHARDTRAIN' check '$TMP/good.out' >/dev/null 2>&1"
check "it wrote nothing: no log or checkpoint directory" test ! -e "$TMP/run"

# A run that keeps checkpoints at steps 2 and 4; check --inputs must name
# the one train then resumes from.
st train >"$TMP/r1.out" 2>&1
check "a 4-step run keeps checkpoints" test -f "$TMP/run/ckpt/step_00000004/manifest.json"
st check --inputs -s train.steps=6 >"$TMP/res.out" 2>"$TMP/res.err"
st train -s train.steps=6 >"$TMP/r2.out" 2>&1
from=$(sed -n 's/^shardtrain: resumed from \(.*\) at step \([0-9]*\)$/\1 \2/p' "$TMP/r2.out")
check "check --inputs names the checkpoint train resumes from ($from)" \
    sh -c "[ -n '$from' ] && grep -qx '; resume: from $(echo "$from" | sed 's/ / at step /')' '$TMP/res.out'"
check "... and finds the output directories there and writable" \
    sh -c "grep -qx '; log.dir: $TMP/run/logs, writable' '$TMP/res.out' &&
        grep -qx '; checkpoint.dir: $TMP/run/ckpt, writable' '$TMP/res.out'"

# The room the run needs in checkpoint.dir.  References: the shard file of
# the checkpoint the 4-step run wrote (one rank: one file, no padding),
# and its final weights' file less its safetensors header (8 bytes of
# length, then the header).  The fresh run (4 steps, a checkpoint every
# 2) saves twice and keeps both, then writes the final weights; the
# resumed one (to step 6) saves once beside the 2 kept.
shard=$(stat -c %s "$TMP/run/ckpt/step_00000004/shard_00000-of-00001.bin")
# tensor_bytes FILE...: the bytes of the safetensors files' tensors
tensor_bytes() {
    python3 -c '
import sys
t = 0
for p in sys.argv[1:]:
    f = open(p, "rb")
    n = int.from_bytes(f.read(8), "little")
    f.seek(0, 2)
    t += f.tell() - 8 - n
print(t)' "$@"
}
fin=$(tensor_bytes "$TMP/run/ckpt/final/model.safetensors")
space() { sed -n "s/^; checkpoint space: $2\$/\1/p" "$1"; }
got=$(space "$TMP/good.out" '.* a checkpoint (\([0-9]*\) bytes), .*')
gotf=$(space "$TMP/good.out" '.* the final weights (\([0-9]*\) bytes)')
check "a checkpoint takes what the run's shard file holds ($shard bytes; check said $got), the final weights their tensors ($fin; check said $gotf)" \
    sh -c "[ -n '$shard' ] && [ '$got' = '$shard' ] && [ -n '$fin' ] && [ '$gotf' = '$fin' ]"
check "the fresh run: 2 saves, up to 2 checkpoints and the final weights more ($((2 * shard + fin)) bytes)" \
    sh -c "grep -qx '; checkpoint space: 2 save(s) planned, 0 checkpoint(s) there, checkpoint.keep = 3' '$TMP/good.out' &&
        [ '$(space "$TMP/good.out" 'up to .* more (\([0-9]*\) bytes), .*')' = $((2 * shard + fin)) ]"
check "the resumed run: 1 save beside 2 kept, up to 1 checkpoint and the final weights more ($((shard + fin)) bytes)" \
    sh -c "grep -qx '; checkpoint space: 1 save(s) planned, 2 checkpoint(s) there, checkpoint.keep = 3' '$TMP/res.out' &&
        [ '$(space "$TMP/res.out" 'up to .* more (\([0-9]*\) bytes), .*')' = $((shard + fin)) ]"
# With LoRA a checkpoint holds the adapters' state alone, and the final
# weights are the merged model and the adapters: a 2-step LoRA run, which
# saves once, against what check --inputs said before it.
st check --inputs -s lora.rank=4 -s train.steps=2 -s checkpoint.dir="$TMP/lora" >"$TMP/lora.out" 2>&1
ranks 1 120 "$SHARDTRAIN" train -s lora.rank=4 -s train.steps=2 -s checkpoint.dir="$TMP/lora" \
    -s log.dir="$TMP/lora_logs" "$TMP/base.ini" >"$TMP/lora_t.out" 2>&1
lshard=$(stat -c %s "$TMP/lora/step_00000002/shard_00000-of-00001.bin" 2>/dev/null)
lfin=$(tensor_bytes "$TMP/lora/final/model.safetensors" "$TMP/lora/final/adapter/adapter_model.safetensors" 2>/dev/null)
check "LoRA: a checkpoint takes the run's shard file ($lshard bytes, a fraction of $shard), the final weights the merged model and adapters ($lfin)" \
    sh -c "[ -n '$lshard' ] && [ '$lshard' -lt '$shard' ] && [ -n '$lfin' ] && [ '$lfin' -gt '$fin' ] &&
        [ '$(space "$TMP/lora.out" '.* a checkpoint (\([0-9]*\) bytes), .*')' = '$lshard' ] &&
        [ '$(space "$TMP/lora.out" '.* the final weights (\([0-9]*\) bytes)')' = '$lfin' ]"
# checkpoint.keep = 1: the second save is written beside the first, which
# is then removed, so the most at once is 2 checkpoints, and 1 and the
# final weights at the end.
st check --inputs -s checkpoint.keep=1 -s checkpoint.dir="$TMP/k1" >"$TMP/k1.out" 2>/dev/null
check "checkpoint.keep = 1: up to 2 checkpoints more at once ($((2 * shard)) bytes, against $((shard + fin)) at the end)" \
    [ "$(space "$TMP/k1.out" 'up to .* more (\([0-9]*\) bytes), .*')" = $((2 * shard > shard + fin ? 2 * shard : shard + fin)) ]
st check --inputs >"$TMP/free.out" 2>/dev/null
avail=$(df -B1 --output=avail "$TMP" | tail -n 1 | tr -d ' ')
said=$(space "$TMP/free.out" '.* free (\([0-9]*\) bytes)')
check "the free space it reports is df's for the file system (df $avail, check $said, within 1% or 64 MiB)" \
    python3 -c "import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); sys.exit(abs(a - b) > max(a / 100, 64 << 20))" \
    "${avail:-0}" "${said:-x}"
# A file system one byte short of a fresh run's room: one warning line,
# exit 0, the configuration printed all the same; exactly enough: no
# warning.
need=$((2 * shard + fin))
SHARDTRAIN_TEST_FREE_BYTES=$((need - 1)) st check --inputs -s checkpoint.dir="$TMP/fresh" \
    >"$TMP/short.out" 2>"$TMP/short.err"
c=$?
check "one byte short of the room: exit $c, one warning line naming checkpoint.dir, the configuration printed" \
    sh -c "[ $c -eq 0 ] && [ \$(grep -c '^shardtrain: warning:' '$TMP/short.err') -eq 1 ] &&
        [ \$(grep -c . '$TMP/short.err') -eq 1 ] &&
        grep -q '^shardtrain: warning: checkpoint.dir = $TMP/fresh: .* free on its file system, and the run needs up to .* more (2 checkpoint save(s) of .* with checkpoint.keep = 3, and the final weights); hint: ' '$TMP/short.err' &&
        grep -q '^\[train\]' '$TMP/short.out'"
SHARDTRAIN_TEST_FREE_BYTES=$need st check --inputs -s checkpoint.dir="$TMP/fresh" \
    >/dev/null 2>"$TMP/enough.err"
check "exactly the room: no warning" sh -c "[ $? -eq 0 ] && [ ! -s '$TMP/enough.err' ]"
# train weighs the same room at start (rank 0): the same warning line as
# check's, and the run goes on.
SHARDTRAIN_TEST_FREE_BYTES=$((need - 1)) ranks 1 120 "$SHARDTRAIN" train -s log.dir="$TMP/fresh_logs" \
    -s checkpoint.dir="$TMP/fresh" "$TMP/base.ini" >/dev/null 2>"$TMP/short_t.err"
c=$?
grep '^shardtrain: warning:' "$TMP/short_t.err" >"$TMP/short_t.w"
check "train one byte short of the room: check's warning line at start, and the run completes (exit $c)" \
    sh -c "[ $c -eq 0 ] && cmp -s '$TMP/short.err' '$TMP/short_t.w' &&
        test -f '$TMP/fresh/final/model.safetensors'"

# A corrupt block in the newest checkpoint (a byte of its shard's first
# block flipped): with auto, check --inputs falls back past it with the
# warning train gives and names the checkpoint train then resumes from.
cp -a "$TMP/run/ckpt" "$TMP/flip"
newest=$(ls -d "$TMP/flip"/step_* | tail -n 1)
python3 -c '
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[100] ^= 0xFF
open(p, "wb").write(b)' "$newest/shard_00000-of-00001.bin"
# (a copy for checkpoint.resume below: train rewrites $newest)
cp -a "$newest" "$TMP/corrupt_step"
"$SHARDTRAIN" check -s log.dir="$TMP/flip_logs" -s checkpoint.dir="$TMP/flip" \
    -s train.steps=8 "$TMP/base.ini" --inputs >"$TMP/flip.out" 2>"$TMP/flip.err"
c=$?
ranks 1 120 "$SHARDTRAIN" train -s log.dir="$TMP/flip_logs" -s checkpoint.dir="$TMP/flip" \
    -s train.steps=8 "$TMP/base.ini" >"$TMP/flipt.out" 2>"$TMP/flipt.err"
from=$(sed -n 's/^shardtrain: resumed from \(.*\) at step \([0-9]*\)$/\1 \2/p' "$TMP/flipt.out")
grep 'checksum mismatch' "$TMP/flip.err" >"$TMP/flip.w"
grep 'checksum mismatch' "$TMP/flipt.err" >"$TMP/flipt.w"
check "a corrupt block in $(basename "$newest"): check --inputs (exit $c) warns as train warns and names the older checkpoint train resumes from ($from)" \
    sh -c "[ $c -eq 0 ] && [ -s '$TMP/flip.w' ] && cmp -s '$TMP/flip.w' '$TMP/flipt.w' &&
        grep -q '; falling back to an older checkpoint\$' '$TMP/flip.w' && [ -n '$from' ] &&
        [ '$(dirname "$newest")/$(echo "$from" | cut -d' ' -f1 | xargs basename)' != '$newest' ] &&
        grep -qx '; resume: from $(echo "$from" | sed 's/ / at step /')' '$TMP/flip.out'"

# ---- bad inputs: each refused as train refuses it ---------------------------------

same_refusal "data.train empty" -s data.train=
same_refusal "data.train matching no file" -s data.train="$TMP/nope/x_*.bin"
same_refusal "eval_every without data.val" -s train.eval_every=2
printf 'not a shard' >"$TMP/bad_000000.bin"
same_refusal "a data.train file that is not a shard" -s data.train="$TMP/bad_*.bin"
same_refusal "a token past model.vocab_size" -s model.vocab_size=64
# The run's final weights (a Hugging Face directory) as model.init of a
# model of another shape.
same_refusal "model.init of another shape" -s model.init="$TMP/run/ckpt/final" \
    -s model.n_layer=3 -s checkpoint.resume=never
echo "a file" >"$TMP/afile"
same_refusal "log.dir that is a file" -s log.dir="$TMP/afile"
same_refusal "checkpoint.dir below a file" -s checkpoint.dir="$TMP/afile/ckpt/"
mkdir -p "$TMP/fin_file/ckpt" && echo file >"$TMP/fin_file/ckpt/final"
same_refusal "checkpoint.dir/final a file, where the final weights go" \
    -s checkpoint.dir="$TMP/fin_file/ckpt"
mkdir -p "$TMP/fifo_step/ckpt" && mkfifo "$TMP/fifo_step/ckpt/step_00000002"
same_refusal "a FIFO at checkpoint.dir/step_00000002, where a checkpoint goes" \
    -s checkpoint.dir="$TMP/fifo_step/ckpt" -s checkpoint.resume=never
same_refusal "checkpoint.resume naming no checkpoint" -s checkpoint.resume="$TMP/nope"
same_refusal "auto resume where every checkpoint is of another shape (warnings, then the error)" \
    -s model.n_layer=3 -s train.steps=8
same_refusal "checkpoint.resume of a checkpoint with a corrupt block" \
    -s checkpoint.resume="$TMP/corrupt_step" -s train.steps=8
same_refusal "checkpoint.resume of a checkpoint past train.steps" \
    -s checkpoint.resume="$TMP/run/ckpt/step_00000006" -s train.steps=5

# --ranks N: train's batch rule for N ranks, against train on N ranks.
"$SHARDTRAIN" check --ranks 3 "$TMP/base.ini" >"$TMP/k3.out" 2>"$TMP/k3.err"
k=$?
ranks 3 120 "$SHARDTRAIN" train -s log.dir="$TMP/r3/logs" -s checkpoint.dir="$TMP/r3/ckpt" \
    "$TMP/base.ini" >"$TMP/t3.out" 2>"$TMP/t3.err"
t=$?
check "--ranks 3: global_batch 8 refused as train on 3 ranks refuses it (exit $k and $t)" \
    sh -c "[ $k -eq 2 ] && [ $t -eq 2 ] && grep -q 'train.global_batch is not a multiple' '$TMP/k3.err' &&
        [ \"\$(grep '^shardtrain: error:' '$TMP/k3.err')\" = \"\$(grep -m1 '^shardtrain: error:' '$TMP/t3.err')\" ]"
check "--ranks 2 passes (8 = 4 x 2)" sh -c "'$SHARDTRAIN' check --ranks 2 '$TMP/base.ini' >/dev/null"
refused "--ranks 0 is refused" "--ranks '0' is not a number of ranks" \
    "$SHARDTRAIN" check --ranks 0 "$TMP/base.ini"
