#!/bin/sh
# Encoding speed of shardtrain's tokenizer (src/tok/tokenizer*.c, driven by
# tests/test_tokenizer) against Hugging Face's tokenizers library on one
# thread (tests/tokenizer_ref.py with RAYON_NUM_THREADS=1), on the same
# tokenizers tests/tokenizer.sh trains, over a text (default
# tinyshakespeare).  Two ways of encoding: the whole file as one text
# (encode(text)), and line by line (the library's encode_batch of the
# lines, shardtrain's encode per line).  Each figure is the fastest of
# ROUNDS rounds inside one process, load time excluded, both pinned to
# CPU 0; the token counts must agree.  docs/benchmarks.md records a run.
#
#   sh bench/tokenizer.sh [TEXT]    # from a built tree (make check-TESTS
#                                   # or make _venv/.stamp-hf first)
#
# Environment: PY (default _venv/bin/python), UNIT (default
# tests/test_tokenizer), ROUNDS (default 5), OUT (default bench/out).
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-_venv/bin/python}
UNIT=${UNIT:-tests/test_tokenizer}
for f in "$UNIT" "$PY"; do
    [ -x "$f" ] || { echo "tokenizer.sh: error: $f is missing; run make tests/test_tokenizer _venv/.stamp-hf" >&2; exit 1; }
done
text=${1:-../shared/data/tinyshakespeare.txt}
[ -f "$text" ] || text=etc/data/tinyshakespeare.txt
rounds=${ROUNDS:-5}
out=${OUT:-bench/out}/tokenizer
mkdir -p "$out"
"$PY" tests/tokenizer_ref.py sample "$out/ml.txt"
"$PY" tests/tokenizer_ref.py train "$out" "$text" "$out/ml.txt"
echo "text: $text ($(wc -c <"$text") bytes), best of $rounds rounds, CPU 0"
echo
echo "| tokenizer | mode | tokens | library MB/s | shardtrain MB/s | shardtrain / library |"
echo "| --- | --- | --- | --- | --- | --- |"
bytes=$(wc -c <"$text")
for tok in gpt2 llama3 llama2 llama2norm; do
    for mode in whole lines; do
        lib=$(RAYON_NUM_THREADS=1 taskset -c 0 "$PY" tests/tokenizer_ref.py time \
            "$out/$tok.json" "$text" "$rounds" "$mode")
        st=$(taskset -c 0 "$UNIT" time "$out/$tok.json" "$text" "$rounds" "$mode")
        echo "$lib $st" | awk -v t="$tok" -v m="$mode" -v b="$bytes" '{
            if ($1 != $3) { printf "| %s | %s | MISMATCH %s vs %s | | | |\n", t, m, $1, $3; exit }
            printf "| %s | %s | %d | %.2f | %.2f | %.1f |\n", t, m, $1, b / $2 / 1e6,
                   b / $4 / 1e6, $2 / $4 }'
    done
done
