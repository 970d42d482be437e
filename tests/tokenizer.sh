#!/bin/sh
# Hugging Face tokenizers (src/tok/tokenizer*.c) against the library itself:
# PyPI's `tokenizers` in the virtual environment make check builds trains
# four small tokenizers on tinyshakespeare plus a multilingual UTF-8 sample
# with emoji, odd spaces, special-token text and invalid bytes
# (tests/tokenizer_ref.py): GPT-2's byte-level form, Llama 3's (Split
# regex, ignore_merges, BOS template), the metaspace form with byte
# fallback of TinyLlama and Mistral, and Llama 2's older normaliser form
# with fuse_unk.  Then, on every line of both texts: shardtrain's ids equal
# the library's, shardtrain decodes the library's ids to the library's
# text, and byte-level decoding gives the text back.  prepare --tokenizer
# writes the library's ids, uint16 or uint32 by the vocabulary; a model
# trained on them samples text that is the library's decoding of its ids.
# Tokenizers shardtrain cannot reproduce are refused with one line.
. "$top_srcdir/tests/lib.sh"
PY=${TB_PYTHON:-${top_builddir:-.}/_venv/bin/python}
if ! "$PY" -c "import tokenizers" >"$TMP/venv.err" 2>&1; then
    not_ok "$PY cannot import tokenizers: the tests' virtual environment is missing" \
        "or broken; make check builds it (make _venv/.stamp)"
    diag "$(cat "$TMP/venv.err")"
    exit 1
fi
UNIT="${top_builddir:-.}/tests/test_tokenizer"
require test -x "$UNIT"
REF="$top_srcdir/tests/tokenizer_ref.py"
TEXT=$(shakespeare_text) || { not_ok "no Shakespeare text found"; exit 1; }
export OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1

"$PY" "$REF" sample "$TMP/ml.txt" &&
    "$PY" "$REF" train "$TMP" "$TEXT" "$TMP/ml.txt" 2>"$TMP/train.err"
check "the library trains the four reference tokenizers" \
    test -s "$TMP/gpt2.json" -a -s "$TMP/llama3.json" -a -s "$TMP/llama2.json" \
    -a -s "$TMP/llama2norm.json"

# same_lines NAME A B: one check that files A and B are equal, the first
# differing lines shown when not.
same_lines() {
    if cmp -s "$2" "$3"; then ok "$1"; else
        not_ok "$1"; diag "$(diff "$2" "$3" | head -n 6 | cut -c1-200)"
    fi
}

for tok in gpt2 llama3 llama2 llama2norm; do
    for f in ml.txt shakespeare; do
        src=$TMP/$f
        [ "$f" = shakespeare ] && src=$TEXT
        "$PY" "$REF" encode "$TMP/$tok.json" "$src" >"$TMP/lib.ids"
        "$UNIT" encode "$TMP/$tok.json" "$src" >"$TMP/st.ids" 2>"$TMP/st.err"
        same_lines "$tok, $f: shardtrain's ids are the library's on every line" \
            "$TMP/lib.ids" "$TMP/st.ids"
        "$PY" "$REF" decode "$TMP/$tok.json" "$TMP/lib.ids" >"$TMP/lib.txt"
        "$UNIT" decode "$TMP/$tok.json" "$TMP/lib.ids" >"$TMP/st.txt" 2>"$TMP/st.err"
        same_lines "$tok, $f: shardtrain decodes the library's ids to the library's text" \
            "$TMP/lib.txt" "$TMP/st.txt"
        case $tok in gpt2|llama3)
            # The text as the library reads it (invalid bytes as U+FFFD),
            # without the lines holding special tokens, which decode drops.
            "$PY" -c 'import sys; sys.stdout.write(open(sys.argv[1], encoding="utf-8",
                errors="replace", newline="").read())' "$src" | grep -v '<|\|<s>' >"$TMP/want.txt"
            "$UNIT" encode "$TMP/$tok.json" "$TMP/want.txt" >"$TMP/rt.ids"
            "$UNIT" decode "$TMP/$tok.json" "$TMP/rt.ids" >"$TMP/rt.txt"
            # want.txt ends in a newline, so encode saw one more, empty, line.
            printf '\n' >>"$TMP/want.txt"
            same_lines "$tok, $f: decode(encode(line)) is the line, byte for byte" \
                "$TMP/want.txt" "$TMP/rt.txt"
        esac
    done
done

# The older merges format, "a b" strings (GPT-2's hub file has it).
"$PY" - "$TMP/gpt2.json" "$TMP/gpt2str.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
json.dump(j, open(sys.argv[2], "w"))
EOF
"$PY" "$REF" encode "$TMP/gpt2str.json" "$TMP/ml.txt" >"$TMP/lib.ids"
"$UNIT" encode "$TMP/gpt2str.json" "$TMP/ml.txt" >"$TMP/st.ids"
same_lines "merges written as \"a b\" strings give the library's ids" \
    "$TMP/lib.ids" "$TMP/st.ids"

# ---- prepare --tokenizer ---------------------------------------------------

# shard_ids PREFIX: the ids of PREFIX_train_* then PREFIX_val_*, one a line,
# after checking each header (magic, version, count); prints the version.
shard_ids() {
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import glob, struct, sys
out = open(sys.argv[2], "w")
versions = set()
for split in ("train", "val"):
    for p in sorted(glob.glob(sys.argv[1] + "_" + split + "_*.bin")):
        data = open(p, "rb").read()
        magic, version, n = struct.unpack("<3i", data[:12])
        width = {(20240520, 1): 2, (20240801, 7): 4}[(magic, version)]
        assert len(data) == 1024 + width * n, p
        versions.add(version)
        fmt = "<%d%s" % (n, "H" if width == 2 else "I")
        out.write("".join("%d\n" % x for x in struct.unpack(fmt, data[1024:])))
print(" ".join(map(str, sorted(versions))))
EOF
}

# lib_ids TOKENIZER FILE OUT: the library's encode(whole text), one id a line.
lib_ids() {
    "$PY" - "$@" <<'EOF'
import sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8", errors="replace", newline="").read()
open(sys.argv[3], "w").write("".join("%d\n" % x for x in t.encode(text).ids))
EOF
}

for tok in gpt2 llama3 llama2; do
    mkdir -p "$TMP/dir_$tok"
    cp "$TMP/$tok.json" "$TMP/dir_$tok/tokenizer.json"
    "$SHARDTRAIN" prepare --tokenizer "$TMP/dir_$tok" --shard-tokens 100000 "$TEXT" \
        "$TMP/data/$tok" >"$TMP/prep.out" 2>&1
    v=$(shard_ids "$TMP/data/$tok" "$TMP/st.ids")
    lib_ids "$TMP/$tok.json" "$TEXT" "$TMP/lib.ids"
    same_lines "prepare --tokenizer (a model directory, $tok): the shards hold the library's ids" \
        "$TMP/lib.ids" "$TMP/st.ids"
    check "prepare --tokenizer ($tok, vocabulary under 65,536): uint16 shards (version 1, got $v)" \
        test "$v" = 1
done

# JSONL documents: each encoded on its own, followed by the tokenizer's EOS
# (the library's ids per document, then EOS), blank lines skipped.
"$PY" - "$TMP/ml.txt" "$TMP/docs.jsonl" <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n")
with open(sys.argv[2], "w") as f:
    for i, line in enumerate(lines):
        f.write(json.dumps({"text": line, "id": i}) + "\n")
        if i == 3:
            f.write("\n   \n")
EOF
for tok in gpt2 llama3; do
    "$SHARDTRAIN" prepare --format jsonl --tokenizer "$TMP/$tok.json" --val-fraction 0 \
        "$TMP/docs.jsonl" "$TMP/data/docs_$tok" >"$TMP/prep.out" 2>&1
    shard_ids "$TMP/data/docs_$tok" "$TMP/st.ids" >/dev/null
    "$PY" - "$TMP/$tok.json" "$TMP/docs.jsonl" "$TMP/lib.ids" <<'EOF'
import json, sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
eos = t.token_to_id("<|endoftext|>")
eos = eos if eos is not None else t.token_to_id("<|end_of_text|>")
out = []
for line in open(sys.argv[2], encoding="utf-8"):
    if line.strip():
        out += t.encode(json.loads(line)["text"]).ids + [eos]
open(sys.argv[3], "w").write("".join("%d\n" % x for x in out))
EOF
    same_lines "prepare --format jsonl ($tok): each document's library ids, then EOS" \
        "$TMP/lib.ids" "$TMP/st.ids"
done
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/docs.jsonl" "$TMP/data/docs_bytes" \
    >"$TMP/prep.out" 2>&1
shard_ids "$TMP/data/docs_bytes" "$TMP/st.ids" >/dev/null
"$PY" - "$TMP/docs.jsonl" "$TMP/lib.ids" <<'EOF'
import json, sys
out = b"".join(json.loads(l)["text"].encode("utf-8") + b"\n"
               for l in open(sys.argv[1], encoding="utf-8") if l.strip())
open(sys.argv[2], "w").write("".join("%d\n" % x for x in out))
EOF
same_lines "prepare --format jsonl, byte level: each document's bytes, then a newline" \
    "$TMP/lib.ids" "$TMP/st.ids"
printf '{"text": "fine"}\n{"text": "cut\n' >"$TMP/cut.jsonl"
refused "JSONL: a line that is not JSON is refused with its line" "cut.jsonl:2: not valid JSON" \
    "$SHARDTRAIN" prepare --format jsonl "$TMP/cut.jsonl" "$TMP/data/x"
printf '{"text": "fine"}\n\n{"question": "q"}\n' >"$TMP/inst.jsonl"
refused "JSONL: a line without \"text\" is refused with its line" \
    'inst.jsonl:3: no field "text", "prompt" or "messages"' \
    "$SHARDTRAIN" prepare --format jsonl "$TMP/inst.jsonl" "$TMP/data/x"
printf '{"text": "fine"}\n[1, 2]\n' >"$TMP/arr.jsonl"
refused "JSONL: a line that is not an object is refused with its line" \
    "arr.jsonl:2: not a JSON object" \
    "$SHARDTRAIN" prepare --format jsonl "$TMP/arr.jsonl" "$TMP/data/x"
refused "an unknown --format is refused" "--format 'csv' is not text or jsonl" \
    "$SHARDTRAIN" prepare --format csv "$TMP/arr.jsonl" "$TMP/data/x"

# A vocabulary past 65,535 ids, as Llama 3's 128,256: 69,000 more tokens,
# and an added token after them (the library numbers it 70,200) that
# appears in the text, so a uint16 shard would corrupt it.
"$PY" - "$TMP/gpt2.json" "$TMP/big.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
vocab = j["model"]["vocab"]
for k in range(69000):
    vocab["<pad_%d>" % k] = len(vocab)
j["added_tokens"].append({"id": len(vocab), "content": "<|big|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True})
json.dump(j, open(sys.argv[2], "w"))
EOF
{ head -c 20000 "$TEXT"; printf '<|big|> and again<|big|>\n'; } >"$TMP/big.txt"
"$SHARDTRAIN" prepare --tokenizer "$TMP/big.json" "$TMP/big.txt" "$TMP/data/big" \
    >"$TMP/prep.out" 2>&1
v=$(shard_ids "$TMP/data/big" "$TMP/st.ids")
lib_ids "$TMP/big.json" "$TMP/big.txt" "$TMP/lib.ids"
same_lines "prepare --tokenizer, vocabulary of 70,201: the shards hold the library's ids" \
    "$TMP/lib.ids" "$TMP/st.ids"
check "prepare --tokenizer, vocabulary of 70,201: uint32 shards (version 7, got $v)" \
    test "$v" = 7
check "the uint32 shards hold id 70200" grep -qx 70200 "$TMP/st.ids"

# ---- training on them, and sample --------------------------------------------

write_base_ini "$TMP/run.ini" "model.vocab_size=1200" "data.train=$TMP/data/gpt2_train_*.bin" \
    "checkpoint.dir=$TMP/ck"
ranks 1 300 "$SHARDTRAIN" train "$TMP/run.ini" >"$TMP/train.out" 2>&1
check "a model trains on the tokenizer's shards (vocabulary 1200)" \
    test -s "$TMP/ck/final/model.safetensors"
# data.tokenizer: checked against the vocabulary, written beside the final
# weights, found there by sample and export.
ranks 1 300 "$SHARDTRAIN" train -s data.tokenizer="$TMP/dir_gpt2" \
    -s checkpoint.dir="$TMP/ckt" "$TMP/run.ini" >"$TMP/traint.out" 2>&1
check "data.tokenizer: training puts tokenizer.json beside the final weights" \
    cmp -s "$TMP/gpt2.json" "$TMP/ckt/final/tokenizer.json"
refused "data.tokenizer larger than model.vocab_size is refused at its key" \
    "data.tokenizer has 70201 ids but model.vocab_size is 1200" \
    "$SHARDTRAIN" train -s data.tokenizer="$TMP/big.json" "$TMP/run.ini"
ranks 1 120 "$SHARDTRAIN" sample "$TMP/run.ini" --tokenizer "$TMP/gpt2.json" \
    --prompt "ROMEO: Grüße 👍" --tokens 24 --temperature 0 --ids >"$TMP/sample.ids" 2>&1
ranks 1 120 "$SHARDTRAIN" sample "$TMP/run.ini" --tokenizer "$TMP/dir_gpt2" \
    --prompt "ROMEO: Grüße 👍" --tokens 24 --temperature 0 >"$TMP/sample.txt" 2>&1
"$PY" "$REF" decode "$TMP/gpt2.json" "$TMP/sample.ids" >"$TMP/lib.txt"
same_lines "sample --tokenizer prints the library's decoding of the ids it drew" \
    "$TMP/lib.txt" "$TMP/sample.txt"
printf '%s' "ROMEO: Grüße 👍" >"$TMP/prompt.txt"
"$UNIT" encode "$TMP/gpt2.json" "$TMP/prompt.txt" >"$TMP/prompt.ids"
n=$(wc -w <"$TMP/prompt.ids")
check "sample --tokenizer starts from the library's ids of the prompt ($n ids)" \
    test "$(cut -d' ' -f1-"$n" "$TMP/sample.ids")" = "$(cat "$TMP/prompt.ids")"
ranks 1 120 "$SHARDTRAIN" sample "$TMP/run.ini" -s data.tokenizer="$TMP/gpt2.json" \
    -s checkpoint.dir="$TMP/ckt" --prompt "ROMEO: Grüße 👍" --tokens 24 --temperature 0 \
    --ids >"$TMP/samplet.ids" 2>&1
ranks 1 120 "$SHARDTRAIN" sample "$TMP/run.ini" -s data.tokenizer="$TMP/gpt2.json" \
    -s checkpoint.dir="$TMP/ckt" --prompt "ROMEO: Grüße 👍" --tokens 24 --temperature 0 \
    >"$TMP/samplet.txt" 2>&1
"$PY" "$REF" decode "$TMP/gpt2.json" "$TMP/samplet.ids" >"$TMP/libt.txt"
same_lines "sample decodes with data.tokenizer" "$TMP/libt.txt" "$TMP/samplet.txt"
"$SHARDTRAIN" export "$TMP/ckt" "$TMP/exportt" >/dev/null 2>&1
check "export of final weights trained with data.tokenizer carries its tokenizer files" \
    sh -c "cmp -s '$TMP/gpt2.json' '$TMP/exportt/tokenizer.json' &&
        test -s '$TMP/exportt/tokenizer_config.json'"
# A Hugging Face directory as model.init: its tokenizer.json is the one.
mkdir -p "$TMP/hf"
cp "$TMP/ck/final/model.safetensors" "$TMP/hf/model.safetensors"
cp "$TMP/gpt2.json" "$TMP/hf/tokenizer.json"
ranks 1 120 "$SHARDTRAIN" sample "$TMP/run.ini" -s model.init="$TMP/hf" \
    --prompt "ROMEO: Grüße 👍" --tokens 24 --temperature 0 >"$TMP/sample_hf.txt" 2>&1
same_lines "sample decodes with the tokenizer.json of model.init's directory" \
    "$TMP/lib.txt" "$TMP/sample_hf.txt"
refused "sample: a tokenizer larger than the model's vocabulary is refused" \
    "prompt token 70200 is outside the model's vocabulary" \
    "$SHARDTRAIN" sample "$TMP/run.ini" --tokenizer "$TMP/big.json" --prompt "<|big|>"

# ---- export: a model directory transformers loads, tokenizer included ------

# The run above kept no step checkpoint: export takes its final weights.
"$SHARDTRAIN" export --tokenizer "$TMP/dir_gpt2" "$TMP/ck" "$TMP/export" >"$TMP/export.out" 2>&1
check "export works on the final weights of a run without a step checkpoint" \
    grep -q "final weights" "$TMP/export.out"
check "the final weights are exported unchanged" \
    cmp -s "$TMP/ck/final/model.safetensors" "$TMP/export/model.safetensors"
"$PY" - "$TMP/export" "$TMP/gpt2.json" "$TMP/ml.txt" >"$TMP/hf.out" 2>"$TMP/hf.err" <<'EOF'
import sys
from transformers import AutoConfig, AutoTokenizer, GenerationConfig
from tokenizers import Tokenizer
d, ref = sys.argv[1], Tokenizer.from_file(sys.argv[2])
tok, cfg, gen = (AutoTokenizer.from_pretrained(d), AutoConfig.from_pretrained(d),
                 GenerationConfig.from_pretrained(d))
eot = ref.token_to_id("<|endoftext|>")
print("config", cfg.model_type, cfg.vocab_size, cfg.n_layer, cfg.bos_token_id, cfg.eos_token_id)
print("generation", gen.bos_token_id == eot, gen.eos_token_id == eot)
print("tokens", tok.bos_token, tok.eos_token)
text = open(sys.argv[3], encoding="utf-8", errors="replace").read()
same = all(tok(line)["input_ids"] == ref.encode(line).ids for line in text.split("\n"))
back = all(tok.decode(ref.encode(line).ids, skip_special_tokens=True) ==
           ref.decode(ref.encode(line).ids) for line in text.split("\n"))
print("lines", same, back)
EOF
check "transformers' AutoConfig reads the export (gpt2, vocabulary 1200, 2 layers, BOS/EOS 0)" \
    grep -qx "config gpt2 1200 2 0 0" "$TMP/hf.out"
check "GenerationConfig reads the tokenizer's BOS and EOS" grep -qx "generation True True" "$TMP/hf.out"
check "AutoTokenizer knows BOS and EOS" grep -qx "tokens <|endoftext|> <|endoftext|>" "$TMP/hf.out"
check "AutoTokenizer on the export encodes and decodes every line as the library does" \
    grep -qx "lines True True" "$TMP/hf.out"
grep -q "^lines" "$TMP/hf.out" || diag "$(tail -n 5 "$TMP/hf.err")"
refused "export: a tokenizer larger than the model's vocabulary is refused" \
    "the tokenizer has 70201 ids but the model's vocabulary is 1200" \
    "$SHARDTRAIN" export --tokenizer "$TMP/big.json" "$TMP/ck" "$TMP/export_big"
check "the refused export made no directory" test ! -e "$TMP/export_big"
# Into the directory of the good export above: refused after the weights
# are staged, it must leave that export whole (config.json keeps the ids).
cp -a "$TMP/export" "$TMP/export_before"
refused "export: the same tokenizer refused over an earlier export" \
    "the tokenizer has 70201 ids but the model's vocabulary is 1200" \
    "$SHARDTRAIN" export --tokenizer "$TMP/big.json" "$TMP/ck" "$TMP/export"
check "the earlier export is left byte for byte as it was" \
    sh -c 'diff -r "$1" "$2" >/dev/null' sh "$TMP/export_before" "$TMP/export"

# ---- what shardtrain refuses ---------------------------------------------------

edit() { # OUT PYTHON-STATEMENTS: gpt2.json changed by the statements on j
    "$PY" -c "import json, sys
j = json.load(open(sys.argv[1]))
$2
json.dump(j, open(sys.argv[2], 'w'))" "$TMP/gpt2.json" "$TMP/$1"
}
edit wordpiece.json 'j["model"]["type"] = "WordPiece"'
refused "a WordPiece model is refused" "model type 'WordPiece' is not supported" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/wordpiece.json" "$TMP/ml.txt" "$TMP/data/x"
edit nfkc.json 'j["normalizer"] = {"type": "NFKC"}'
refused "an NFKC normalizer is refused, not approximated" "normalizer 'NFKC' is not supported" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/nfkc.json" "$TMP/ml.txt" "$TMP/data/x"
edit ws.json 'j["pre_tokenizer"] = {"type": "Whitespace"}'
refused "a Whitespace pre-tokenizer is refused" "pre-tokenizer 'Whitespace' is not supported" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/ws.json" "$TMP/ml.txt" "$TMP/data/x"
edit dropout.json 'j["model"]["dropout"] = 0.1'
refused "BPE dropout is refused" "BPE option 'dropout' is not supported" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/dropout.json" "$TMP/ml.txt" "$TMP/data/x"
edit badmerge.json 'j["model"]["merges"].append(["zz_missing", "t"])'
refused "a merge naming a token outside the vocabulary is refused" \
    "names a token missing from the vocabulary" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/badmerge.json" "$TMP/ml.txt" "$TMP/data/x"
head -c 300 "$TMP/gpt2.json" >"$TMP/cut.json"
refused "a cut tokenizer.json is refused with its file and line" "cut.json:[0-9]*: not valid JSON" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/cut.json" "$TMP/ml.txt" "$TMP/data/x"
refused "a directory without tokenizer.json is refused" "cannot read the tokenizer" \
    "$SHARDTRAIN" prepare --tokenizer "$TMP/data" "$TMP/ml.txt" "$TMP/data/x"

# ---- the benchmark script runs (its figures are docs/benchmarks.md's) -------

if command -v shellcheck >/dev/null 2>&1; then
    check "bench/tokenizer.sh passes shellcheck" shellcheck "$top_srcdir/bench/tokenizer.sh"
else
    not_ok "shellcheck is missing (install-deps.sh installs it)"
fi
PY=$PY UNIT=$UNIT ROUNDS=1 OUT=$TMP/bench sh "$top_srcdir/bench/tokenizer.sh" "$TMP/ml.txt" \
    >"$TMP/bench.out" 2>&1
rows=$(grep -c '^| [a-z0-9]* | [a-z]* | [0-9]' "$TMP/bench.out")
check "bench/tokenizer.sh times 8 cases with equal token counts (got $rows rows)" \
    sh -c "test $rows -eq 8 && ! grep -q MISMATCH '$TMP/bench.out'"
