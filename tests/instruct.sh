#!/bin/sh
# Instruction data with loss masks (shardtrain(1), PREPARE):
#   - prepare --format jsonl writes the tokens and loss masks that
#     tests/instruct_ref.py derives from the JSONL and the documented
#     template alone, at byte level and with three tokenizers of the
#     `tokenizers` library (gpt2, llama3 and llama2 forms, trained here);
#   - every malformed line is one FILE:LINE error with exit status 2, and
#     the reader refuses masks that do not fit their data;
#   - the validation loss of an HF model on instruction data equals
#     PyTorch's mean cross-entropy over the completion tokens only
#     (tests/hf_make.py refloss ... masked; ignore_index), for gpt2 and
#     llama, and the mean over every target disagrees;
#   - training averages over the completion tokens of the whole global
#     batch: 1 rank, 2 ranks (full_shard, no_shard, hybrid 2x1) and micro-
#     batches of 2 give the same losses.
# tests/torch.sh checks the masked loss's gradients against PyTorch.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hf_lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1
REF="$top_srcdir/tests/instruct_ref.py"
VPY=${TB_PYTHON:-${top_builddir}/_venv/bin/python}
require "$VPY" -c "import tokenizers"

# ---- the data: lines of the three forms, some with multi-byte text ----------
"$PY" - "$text" "$TMP/inst.jsonl" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.strip()][:1200]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i in range(0, len(lines) - 1, 2):
        q, a = lines[i], lines[i + 1]
        if i % 10 == 0:
            f.write(json.dumps({"messages": [{"role": "system", "content": "Speak as in the play."},
                                             {"role": "user", "content": q},
                                             {"role": "assistant", "content": a},
                                             {"role": "user", "content": "And then? \u00e9\u00e8 \u4e2d"},
                                             {"role": "assistant", "content": "Nothing. \U0001F600"}]}) + "\n")
        elif i % 10 == 4:
            f.write(json.dumps({"text": q + " " + a}) + "\n")
        else:
            f.write(json.dumps({"prompt": q + "\n", "completion": a}) + "\n")
        if i == 20:
            f.write("\n")  # a blank line is skipped
EOF
check "the instruction JSONL written" test -s "$TMP/inst.jsonl"

# ref_check DESCRIPTION COMMAND...: a reference comparison, its findings
# (what differs, or a summary) in the TAP line or as diagnostics.
ref_check() {
    _d=$1; shift
    if "$@" >"$TMP/ref.out" 2>&1; then
        ok "$_d ($(tail -n 1 "$TMP/ref.out"))"
    else
        not_ok "$_d"
        diag "$(tail -n 8 "$TMP/ref.out")"
    fi
}

# ---- prepare: byte level and three tokenizers, against the reference -------
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0.1 "$TMP/inst.jsonl" "$TMP/data/bytes" \
    >"$TMP/prep-bytes.out" 2>&1
check "prepare byte level: exit 0" test $? -eq 0
ref_check "prepare byte level: the tokens and loss masks the template gives" \
    "$PY" "$REF" check "$TMP/inst.jsonl" "$TMP/data/bytes" 0.1
check "prepare says how many tokens are trained" \
    grep -q 'wrote .*bytes_train_000000.bin (.* tokens, .* examples) and its loss mask .*bytes_train_000000.mask (.* tokens trained)' \
    "$TMP/prep-bytes.out"

mkdir -p "$TMP/tok"
if "$VPY" "$top_srcdir/tests/tokenizer_ref.py" train "$TMP/tok" "$text" >"$TMP/tok.log" 2>&1; then
    ok "tokenizers trained by the library"
else
    not_ok "tokenizers trained by the library"
    diag "$(tail -n 5 "$TMP/tok.log")"
fi
for t in gpt2 llama3 llama2; do
    "$SHARDTRAIN" prepare --format jsonl --val-fraction 0.1 --tokenizer "$TMP/tok/$t.json" \
        "$TMP/inst.jsonl" "$TMP/data/$t" >"$TMP/prep-$t.out" 2>&1
    check "prepare with the $t tokenizer: exit 0" test $? -eq 0
    ref_check "prepare with the $t tokenizer: the library's ids and the template's masks" \
        "$VPY" "$REF" check "$TMP/inst.jsonl" "$TMP/data/$t" 0.1 "$TMP/tok/$t.json"
done

# The reference can fail: a mask with one trained token dropped.
cp "$TMP/data/bytes_val_000000.mask" "$TMP/saved.mask"
"$PY" - "$TMP/data/bytes_val_000000.mask" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = next(k for k in range(1024, len(b)) if b[k] & 1)
b[i] &= ~1
open(sys.argv[1], "wb").write(b)
EOF
if "$PY" "$REF" check "$TMP/inst.jsonl" "$TMP/data/bytes" 0.1 >"$TMP/refail.out"; then
    not_ok "the reference misses one trained token left out of the mask"
else
    ok "the reference catches one trained token left out of the mask: $(head -n 1 "$TMP/refail.out")"
fi
cp "$TMP/saved.mask" "$TMP/data/bytes_val_000000.mask"

# A rerun as plain text removes the masks, which would otherwise turn the
# new shards back into instruction data.
mkdir -p "$TMP/re"
cp "$TMP/data/bytes_"* "$TMP/re/"
printf '{"text": "one"}\n{"text": "two"}\n{"text": "three"}\n' >"$TMP/plain.jsonl"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/plain.jsonl" "$TMP/re/bytes" \
    >"$TMP/re.out" 2>&1
check "a plain-text rerun removes the stale loss masks" \
    sh -c "test ! -e '$TMP/re/bytes_train_000000.mask' && test ! -e '$TMP/re/bytes_val_000000.mask' && grep -q 'removed stale .*bytes_train_000000.mask' '$TMP/re.out'"

# A stale mask that could not be removed (here a directory in its place)
# is refused before any work (prepare's look at every name it may write or
# remove): exit 2, one line naming it, nothing written or removed.
mkdir -p "$TMP/re2/x_train_000001.mask"
: >"$TMP/re2/x_train_000001.bin"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/plain.jsonl" "$TMP/re2/x" \
    >"$TMP/re2.out" 2>"$TMP/re2.err"
rc=$?
check "a directory at a stale mask's name is refused before any work (exit $rc), naming it" \
    sh -c "test $rc -eq 2 && test \$(grep -c '^shardtrain: error:' '$TMP/re2.err') -eq 1 &&
           grep -q 'x_train_000001.mask: is a directory' '$TMP/re2.err' &&
           test -e '$TMP/re2/x_train_000001.bin' && test ! -e '$TMP/re2/x_train_000000.bin'"

# ---- malformed lines: FILE:LINE, exit 2, nothing written --------------------
bad_line() { # DESCRIPTION LINE EXPECTED-MESSAGE-PART
    rm -rf "$TMP/bad"   # a shard left by a line wrongly taken would fail the next
    printf '{"prompt": "a", "completion": "b"}\n%s\n' "$2" >"$TMP/bad.jsonl"
    "$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/bad.jsonl" "$TMP/bad/x" \
        >"$TMP/bad.out" 2>"$TMP/bad.err"
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/bad.err")" -eq 1 ] &&
        grep -q "^shardtrain: error: $TMP/bad.jsonl:2: .*$3" "$TMP/bad.err" &&
        [ ! -e "$TMP/bad/x_train_000000.bin" ]; then
        ok "bad line, $1: FILE:LINE, exit 2"
    else
        not_ok "bad line, $1: exit $rc"
        diag "$(cat "$TMP/bad.err")"
    fi
}
bad_line "prompt without completion" '{"prompt": "a"}' 'field "completion" is missing'
bad_line "completion without prompt" '{"completion": "a"}' 'field "prompt" is missing'
bad_line "a number as completion" '{"prompt": "a", "completion": 3}' 'field "completion" is not a string'
bad_line "text and prompt together" '{"text": "a", "prompt": "b", "completion": "c"}' 'more than one of'
bad_line "no known field" '{"question": "a"}' 'no field "text", "prompt" or "messages"'
bad_line "messages not a list" '{"messages": "hi"}' '"messages" is not a list'
bad_line "messages empty" '{"messages": []}' '"messages" is empty'
bad_line "a message not an object" '{"messages": ["hi"]}' 'message 1 is not an object'
bad_line "an unknown role" '{"messages": [{"role": "tool", "content": "x"}]}' "message 1 has role 'tool'"
bad_line "a message without content" '{"messages": [{"role": "assistant"}]}' 'message 1 has no string "content"'
bad_line "no assistant message" '{"messages": [{"role": "user", "content": "x"}]}' 'no message has role "assistant"'
bad_line "an empty assistant message" '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]}' 'message 2 (assistant) has an empty "content", so it would train on nothing but the end of text; hint: '
bad_line "one empty assistant turn among good ones" '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "z"}, {"role": "assistant", "content": ""}]}' 'message 4 (assistant) has an empty "content"'
bad_line "only system and user messages" '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]}' 'no message has role "assistant"'
bad_line "a cut line" '{"prompt": "a", "compl' 'not valid JSON'
# Only an assistant's content must be non-empty: an empty system or user
# message is, like an empty prompt, context that happens to be blank.
printf '{"messages": [{"role": "system", "content": ""}, {"role": "user", "content": ""}, {"role": "assistant", "content": "b"}]}\n' >"$TMP/eu.jsonl"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/eu.jsonl" "$TMP/eu/x" \
    >"$TMP/eu.out" 2>"$TMP/eu.err"
check "empty system and user messages before an answer are taken (exit 0)" \
    sh -c "test $? -eq 0 && test -s '$TMP/eu/x_train_000000.mask'"

# ---- the reader: masks that do not fit their data ---------------------------
write_base_ini "$TMP/bad.ini" data.train="$TMP/rd/x_train_*.bin" model.seq_len=64
reader_refuses() { # DESCRIPTION EXPECTED-MESSAGE-PART
    "$SHARDTRAIN" train -s log.dir="$TMP/rdlog" -s checkpoint.dir="$TMP/rdck" "$TMP/bad.ini" \
        >"$TMP/rd.out" 2>"$TMP/rd.err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "^shardtrain: error: .*$2" "$TMP/rd.err"; then
        ok "reader refuses $1 (exit 2)"
    else
        not_ok "reader refuses $1: exit $rc"
        diag "$(tail -n 3 "$TMP/rd.err")"
    fi
}
fresh_rd() {
    rm -rf "$TMP/rd"; mkdir -p "$TMP/rd"
    "$SHARDTRAIN" prepare --format jsonl --val-fraction 0 --shard-tokens 20000 "$TMP/inst.jsonl" \
        "$TMP/rd/x" >/dev/null 2>&1
}
fresh_rd
check "instruction shards fall on example boundaries (several shards, each starting an example)" \
    "$PY" -c "
import glob, sys
fs = sorted(glob.glob('$TMP/rd/x_train_*.mask'))
sys.exit(not (len(fs) > 1 and all(open(f, 'rb').read()[1024] & 2 for f in fs)))"
rm "$TMP/rd/x_train_000001.mask"
reader_refuses "a set with a mask beside some shards only" 'x_train_000001.bin: has no loss mask (NAME.mask) but .* has one'
fresh_rd
"$PY" -c "
f = '$TMP/rd/x_train_000000.mask'; b = open(f, 'rb').read(); open(f, 'wb').write(b[:-1])"
reader_refuses "a mask shorter than its shard" 'x_train_000000.mask: holds .* entries .* hint: the mask belongs to other data'
fresh_rd
"$PY" -c "
f = '$TMP/rd/x_train_000000.mask'; b = bytearray(open(f, 'rb').read()); b[1030] = 7; open(f, 'wb').write(b)"
reader_refuses "a mask entry other than 0-3" 'entry 6 is 7, not a combination of 1'
fresh_rd
"$PY" -c "
f = '$TMP/rd/x_train_000000.mask'; b = bytearray(open(f, 'rb').read()); b[1024] &= 1; open(f, 'wb').write(b)"
reader_refuses "a shard whose first token starts no example" 'its first token does not start an example'
fresh_rd
cp "$TMP/rd/x_train_000000.bin" "$TMP/rd/x_train_000000.mask"
reader_refuses "a token file in a mask's place" 'not a loss-mask file'
printf '{"prompt": "%s", "completion": "b"}\n' "$(printf 'a%.0s' $(seq 1 80))" >"$TMP/long.jsonl"
rm -rf "$TMP/rd"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/long.jsonl" "$TMP/rd/x" >/dev/null 2>&1
reader_refuses "a set where no example has a completion token within seq_len + 1" \
    'none of its 1 examples has a completion token within the first seq_len + 1 = 65 tokens'

# ---- the validation loss against PyTorch, masked ----------------------------
# The models of hf_lib.sh (vocabulary 256: byte level), evaluated at a
# vanishing learning rate after one step, on the first 4 val examples.
for arch in gpt2 llama; do
    hf_weights "$arch"
    W="$TMP/w-$arch"
    name=eval-$arch
    timeout 300 "$SHARDTRAIN" train -s model.init="$W/f32-dir" -s log.dir="$TMP/$name" \
        -s checkpoint.dir="$TMP/$name/ck" -s data.train="$TMP/data/bytes_train_*.bin" \
        -s data.val="$TMP/data/bytes_val_*.bin" "$TMP/$arch.ini" >"$TMP/$name.out" 2>"$TMP/$name.err"
    check "$arch: trains on instruction data from the HF weights" test $? -eq 0
    got=$(python3 -c "
import json
v = [json.loads(l)['val_loss'] for l in open('$TMP/$name/metrics.jsonl') if 'val_loss' in l]
print(repr(v[-1]))")
    want=$("$PY" "$hf_make" refloss "$W" "$(cat "$TMP/$arch.json")" \
        "$TMP/data/bytes_val_000000.bin" 4 f32 masked 2>"$TMP/ref.err")
    all=$("$PY" "$hf_make" refloss "$W" "$(cat "$TMP/$arch.json")" \
        "$TMP/data/bytes_val_000000.bin" 4 f32 unmasked 2>>"$TMP/ref.err")
    close() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not abs(a - b) <= float(sys.argv[3]) * abs(b))" "$@" 2>/dev/null; }
    if close "$got" "$want" 1e-5; then
        ok "$arch: val_loss $got on the completions equals PyTorch's $want (ignore_index)"
    else
        not_ok "$arch: val_loss '$got' vs PyTorch '$want'"
        diag "$(tail -n 5 "$TMP/ref.err")"
    fi
    if [ -n "$all" ] && ! close "$got" "$all" 1e-4; then
        ok "$arch: ... and the mean over every target ($all) is another number"
    else
        not_ok "$arch: the mean over every target ('$all') agrees: the mask changes nothing"
    fi
done

# ---- training: the same losses at every world size and micro-batching -------
write_base_ini "$TMP/it.ini" data.train="$TMP/data/llama3_train_*.bin" \
    data.val="$TMP/data/llama3_val_*.bin" model.seq_len=64 model.vocab_size=1200 \
    train.steps=4 train.eval_every=2 train.eval_batches=2
vocab=$("$VPY" -c "from tokenizers import Tokenizer; print(Tokenizer.from_file('$TMP/tok/llama3.json').get_vocab_size())")
trainrun() { # NAME NP [-s ...]
    n=$1 np=$2; shift 2
    ranks "$np" 300 "$SHARDTRAIN" train -s log.dir="$TMP/$n/logs" -s checkpoint.dir="$TMP/$n/ckpt" \
        -s model.vocab_size="$vocab" "$@" "$TMP/it.ini" >"$TMP/$n.out" 2>"$TMP/$n.err"
    check "$n: exit 0" test $? -eq 0
}
trainrun t1 1
trainrun t2 2
trainrun t2n 2 -s parallel.strategy=no_shard
trainrun t2h 2 -s parallel.strategy=hybrid_shard -s parallel.shard_size=1
trainrun t1m 1 -s train.micro_batch=2
for n in t2 t2n t2h t1m; do
    check "$n: the losses and final weights of 1 rank at 1e-5 (means over the global batch's completions)" \
        compare_runs "$TMP/$n" "$TMP/t1" 1e-5
done
check "the training loss falls on the completions" python3 -c "
import json, sys
l = [json.loads(x)['loss'] for x in open('$TMP/t1/logs/metrics.jsonl') if '\"loss\"' in x]
sys.exit(not l[-1] < l[0])"
exit 0
