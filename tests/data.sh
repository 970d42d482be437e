#!/bin/sh
# `shardtrain prepare` end to end on the Shakespeare text: the shards hold
# exactly the input's bytes, train first and val the tail, split at the
# requested shard size; bad inputs fail with status 2 and one error line.
# Shard headers and tokens are read with python3's struct, independently of
# the C reader.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"

require python3 -c 'import struct'

# shards.py INPUT SPLIT=GLOB...: checks that the shards, in order, hold the
# input's bytes (train the head, val the tail) and prints per split
# "SPLIT FILES TOKENS MAXTOKENS"; exits 1 with a reason on any mismatch.
cat > "$TMP/shards.py" <<'EOF'
import glob, struct, sys
data = open(sys.argv[1], "rb").read()
pos = 0
for arg in sys.argv[2:]:
    split, pattern = arg.split("=", 1)
    files = sorted(glob.glob(pattern))
    total = 0
    biggest = 0
    for f in files:
        raw = open(f, "rb").read()
        hdr = struct.unpack("<256i", raw[:1024])
        if hdr[0] != 20240520 or hdr[1] != 1:
            sys.exit("%s: bad magic/version %d %d" % (f, hdr[0], hdr[1]))
        n = hdr[2]
        if len(raw) != 1024 + 2 * n:
            sys.exit("%s: %d bytes for %d tokens" % (f, len(raw), n))
        toks = struct.unpack("<%dH" % n, raw[1024:])
        if bytes(toks) != data[pos:pos + n]:
            sys.exit("%s: tokens differ from input bytes %d..%d" % (f, pos, pos + n))
        pos += n
        total += n
        biggest = max(biggest, n)
    print(split, len(files), total, biggest)
if pos != len(data):
    sys.exit("shards hold %d tokens, input has %d bytes" % (pos, len(data)))
EOF

# one_error FILE NEEDLE: FILE is exactly one "shardtrain: error: " line
# containing NEEDLE.
one_error() {
    [ "$(wc -l < "$1")" -eq 1 ] &&
        head -n 1 "$1" | grep -q '^shardtrain: error: ' &&
        grep -qF -- "$2" "$1"
}

text=$(shakespeare_text) || { not_ok "Shakespeare text found"; exit 1; }
nbytes=$(wc -c < "$text" | tr -d ' ')
diag "input $text, $nbytes bytes"

# ---- default split: one train and one val shard ---------------------------
out="$TMP/new/dir/shake"
"$SHARDTRAIN" prepare "$text" "$out" > "$TMP/stdout" 2> "$TMP/stderr"
rc=$?
check "prepare exits 0" [ "$rc" -eq 0 ]
check "prepare writes nothing to stderr" [ ! -s "$TMP/stderr" ]
check "prepare creates the missing output directory" [ -d "$TMP/new/dir" ]
check "train shard exists" [ -f "${out}_train_000000.bin" ]
check "val shard exists" [ -f "${out}_val_000000.bin" ]
check "no other shards" [ "$(ls "$TMP/new/dir" | wc -l)" -eq 2 ]
check "no temporary files left" [ -z "$(ls "$TMP/new/dir" | grep '\.tmp$')" ]
check "one 'wrote' line per file" \
    [ "$(grep -cE '^wrote .*_(train|val)_000000\.bin \([0-9]+ tokens\)$' "$TMP/stdout")" -eq 2 ]
if python3 "$TMP/shards.py" "$text" "train=${out}_train_*.bin" "val=${out}_val_*.bin" \
        > "$TMP/sum" 2> "$TMP/why"; then
    ok "shards hold the input's bytes in order, val the tail; total $nbytes tokens"
else
    not_ok "shards hold the input's bytes in order, val the tail"
    diag "$(cat "$TMP/why")"
fi
# floor(n * 0.1) tokens of val, the default fraction.
want_val=$(python3 -c "print(int($nbytes * 0.1))")
check "val holds 10% of the bytes ($want_val)" \
    grep -q "^val 1 $want_val $want_val\$" "$TMP/sum"

# ---- shard splitting -------------------------------------------------------
out="$TMP/sharded/s"
"$SHARDTRAIN" prepare --shard-tokens 100000 "$text" "$out" > "$TMP/stdout" 2> "$TMP/stderr"
check "prepare --shard-tokens 100000 exits 0" [ $? -eq 0 ]
if python3 "$TMP/shards.py" "$text" "train=${out}_train_*.bin" "val=${out}_val_*.bin" \
        > "$TMP/sum" 2> "$TMP/why"; then
    ok "sharded: shards hold the input's bytes in order"
else
    not_ok "sharded: shards hold the input's bytes in order"
    diag "$(cat "$TMP/why")"
fi
want=$(python3 -c "
n = $nbytes; v = int(n * 0.1); t = n - v
c = lambda k: -(-k // 100000)
print('train %d %d %d' % (c(t), t, min(t, 100000)))
print('val %d %d %d' % (c(v), v, min(v, 100000)))")
if [ "$(cat "$TMP/sum")" = "$want" ]; then
    ok "sharded: file counts and sizes ($(echo $want))"
else
    not_ok "sharded: file counts and sizes"
    diag "want: $want" "got: $(cat "$TMP/sum")"
fi
nfiles=$(echo "$want" | awk '{ s += $2 } END { print s }')
check "sharded: one 'wrote' line per file ($nfiles)" \
    [ "$(grep -c '^wrote ' "$TMP/stdout")" -eq "$nfiles" ]

# Preparing again into the same prefix with one shard per split must not
# leave the earlier run's higher-numbered shards for a glob to pick up.
"$SHARDTRAIN" prepare "$text" "$out" > /dev/null 2>&1
check "re-prepare into the same prefix exits 0" [ $? -eq 0 ]
check "re-prepare leaves no stale shards" [ "$(ls "$TMP/sharded" | wc -l)" -eq 2 ]

# A run that fails part-way (here a directory where shard 2's temporary
# file goes, as a full disk would stop it) over an earlier run's shards:
# neither the new shards nor the old ones are left for a glob to read as a
# whole data set, and the failure is one error line, exit status 1.
out="$TMP/broken/t"
"$SHARDTRAIN" prepare --shard-tokens 100000 "$text" "$out" > /dev/null 2>&1
check "broken: a first run writes several shards per split" \
    [ "$(ls "$TMP/broken" | grep -c '^t_train_')" -ge 4 ]
mkdir "${out}_train_000002.bin.tmp"
"$SHARDTRAIN" prepare --shard-tokens 90000 "$text" "$out" > "$TMP/broken.out" 2> "$TMP/broken.err"
rc=$?
check "broken: the rerun stops with exit status 1 (got $rc) and one error line" \
    sh -c "test $rc -eq 1 && test \"\$(grep -c '^shardtrain: error:' '$TMP/broken.err')\" = 1 &&
        test \"\$(wc -l < '$TMP/broken.err')\" = 1"
check "broken: no shard of either run is left, old or new, train or val" \
    [ "$(ls "$TMP/broken")" = "t_train_000002.bin.tmp" ]
check "broken: it says what it removed" grep -q '^removed partial .*t_val_000000.bin' "$TMP/broken.out"

# ---- no val split ------------------------------------------------------------
out="$TMP/noval/t"
"$SHARDTRAIN" prepare --val-fraction 0 "$text" "$out" > /dev/null 2>&1
check "--val-fraction 0 exits 0" [ $? -eq 0 ]
check "--val-fraction 0 writes no val shard" [ ! -e "${out}_val_000000.bin" ]
check "--val-fraction 0 puts every byte in train" \
    sh -c 'python3 "$@" > /dev/null' - "$TMP/shards.py" "$text" "train=${out}_train_*.bin"

# ---- errors ------------------------------------------------------------------
missing="$TMP/no-such-input.txt"
"$SHARDTRAIN" prepare "$missing" "$TMP/err/x" > /dev/null 2> "$TMP/stderr"
check "missing input exits 2" [ $? -eq 2 ]
check "missing input: one error line naming it" one_error "$TMP/stderr" "$missing"
check "missing input: no output written" [ ! -e "$TMP/err" ]

: > "$TMP/empty.txt"
"$SHARDTRAIN" prepare "$TMP/empty.txt" "$TMP/err/x" > /dev/null 2> "$TMP/stderr"
check "empty input exits 2" [ $? -eq 2 ]
check "empty input: one error line naming it" one_error "$TMP/stderr" "$TMP/empty.txt"

"$SHARDTRAIN" prepare --val-fraction 1.5 "$text" "$TMP/err/x" > /dev/null 2> "$TMP/stderr"
check "--val-fraction 1.5 exits 2" [ $? -eq 2 ]
check "--val-fraction 1.5: one error line" one_error "$TMP/stderr" "shardtrain: error: "
check "--val-fraction 1.5: no output written" [ ! -e "$TMP/err" ]

printf 'abc' > "$TMP/tiny.txt"
"$SHARDTRAIN" prepare "$TMP/tiny.txt" "$TMP/err/x" > /dev/null 2> "$TMP/stderr"
check "val part under 2 tokens exits 2" [ $? -eq 2 ]
check "val part under 2 tokens: one error line naming the input" \
    one_error "$TMP/stderr" "$TMP/tiny.txt"

# A fraction too small for a normal double (strtod's ERANGE) is still a
# number in [0, 1): taken, and then refused for the val split it leaves.
"$SHARDTRAIN" prepare --val-fraction 1e-320 "$text" "$TMP/err/x" > /dev/null 2> "$TMP/stderr"
check "--val-fraction 1e-320 is a number in range: exit 2 for its empty val split" [ $? -eq 2 ]
check "--val-fraction 1e-320: one error line on the val split, not on the number" \
    one_error "$TMP/stderr" "leave 0 val tokens, fewer than 2"

# An OUT_PREFIX whose shard names are over the file system's NAME_MAX is
# refused before any work, not found at the first shard as a write error.
long=$(printf 'n%.0s' $(seq 1 240))
"$SHARDTRAIN" prepare "$text" "$TMP/long/$long" > /dev/null 2> "$TMP/stderr"
check "a 240-byte OUT_PREFIX name exits 2" [ $? -eq 2 ]
check "a 240-byte OUT_PREFIX name: one error line with its hint" \
    one_error "$TMP/stderr" "hint: give a shorter OUT_PREFIX"
check "a 240-byte OUT_PREFIX name: nothing made" [ ! -e "$TMP/long" ]

# ---- JSONL: empty prompts and completions -------------------------------------
# An empty prompt is an example trained on its whole completion; an empty
# completion would train nothing but the end of text, refused at its line.
printf '{"prompt": "", "completion": "b"}\n' > "$TMP/p0.jsonl"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/p0.jsonl" "$TMP/p0/x" \
    > /dev/null 2> "$TMP/stderr"
check "jsonl with an empty prompt exits 0" [ $? -eq 0 ]
check "jsonl with an empty prompt: 'b' and the end mark, both trained" \
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); m = open(sys.argv[2], "rb").read()
sys.exit(not (d[1024:] == b"b\0\n\0" and m[-2:] == b"\3\1"))' \
    "$TMP/p0/x_train_000000.bin" "$TMP/p0/x_train_000000.mask"
printf '{"prompt": "a", "completion": "b"}\n{"prompt": "a", "completion": ""}\n' > "$TMP/c0.jsonl"
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/c0.jsonl" "$TMP/c0/x" \
    > /dev/null 2> "$TMP/stderr"
check "jsonl with an empty completion exits 2" [ $? -eq 2 ]
check "jsonl with an empty completion: one error line at FILE:LINE" \
    one_error "$TMP/stderr" "$TMP/c0.jsonl:2: field \"completion\" is empty"
check "jsonl with an empty completion: no shard written" [ ! -e "$TMP/c0/x_train_000000.bin" ]

if [ "$tap_fail" -ne 0 ]; then exit 1; fi
exit 0
