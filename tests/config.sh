#!/bin/sh
# Configuration layer, through `shardtrain check`: every malformed config
# must be refused with exit status 2 and exactly one error line naming the
# file and line to fix, never a crash; valid configs, ${VAR} expansion,
# -s overrides and presets must resolve to the values the documentation
# promises.
. "$(dirname "$0")/lib.sh"

# bad NAME EXPECTED_LINE SUBSTRING [-s OVERRIDE]... <<< CONFIG
# Writes stdin to $TMP/NAME.ini and checks the refusal.  EXPECTED_LINE is
# the line in the message: a number for FILE:N, "-" for FILE alone, or
# "cmd:N" for an error in the Nth command-line argument.
bad() {
    name=$1 line=$2 want=$3
    shift 3
    f="$TMP/$name.ini"
    cat > "$f"
    "$SHARDTRAIN" check "$@" "$f" > "$TMP/out" 2> "$TMP/err"
    st=$?
    case $line in
        -) prefix="shardtrain: error: $f: " ;;
        cmd:*) prefix="shardtrain: error: command line:${line#cmd:}: " ;;
        *) prefix="shardtrain: error: $f:$line: " ;;
    esac
    nl=$(wc -l < "$TMP/err")
    first=$(head -n 1 "$TMP/err")
    if [ "$st" -eq 2 ] && [ "$nl" -eq 1 ] &&
       case $first in "$prefix"*) true ;; *) false ;; esac &&
       case $first in *"$want"*) true ;; *) false ;; esac; then
        ok "refuses $name"
    else
        not_ok "refuses $name"
        diag "exit status $st (want 2), $nl stderr lines (want 1)" \
             "want prefix: $prefix" "want substring: $want" "got:" "$(cat "$TMP/err")"
        [ "$st" -ge 128 ] && diag "CRASHED"
    fi
}

long=$(printf 'x%.0s' $(seq 1 250))
unset ST_TEST_UNSET_VAR

bad unknown-section 2 "unknown section [modle]; did you mean 'model'?" <<EOF
; comment
[modle]
n_layer = 2
EOF
bad unknown-key 3 "unknown key 'n_layr' in [model]; did you mean 'n_layer'?" <<EOF
[model]
n_head = 4
n_layr = 2
EOF
bad bad-int 2 "invalid integer 'ten' for train.steps" <<EOF
[train]
steps = ten
EOF
bad int-junk 3 "invalid integer '12abc'" <<EOF
[train]

steps = 12abc
EOF
bad bad-float 2 "invalid number 'fast' for optim.lr" <<EOF
[optim]
lr = fast
EOF
bad float-nan 2 "invalid number 'nan'" <<EOF
[optim]
lr = nan
EOF
bad bad-bool 2 "invalid boolean 'maybe' for model.tie_embeddings; allowed: true|false" <<EOF
[model]
tie_embeddings = maybe
EOF
bad bad-enum 2 "invalid value 'bert' for model.arch; allowed: gpt2|llama" <<EOF
[model]
arch = bert
EOF
bad negative-lr 2 "optim.lr = -0.1 is out of range; must be > 0" <<EOF
[optim]
lr = -0.1
EOF
bad beta1-one 3 "optim.beta1 = 1 is out of range; must be [0, 1)" <<EOF
[optim]
lr = 0.001
beta1 = 1
EOF
bad zero-layers 2 "model.n_layer = 0 is out of range; must be [1, 1024]" <<EOF
[model]
n_layer = 0
EOF
bad undefined-var 2 "undefined environment variable 'ST_TEST_UNSET_VAR'; hint: set it or write \${ST_TEST_UNSET_VAR:-default}" <<'EOF'
[data]
train = ${ST_TEST_UNSET_VAR}/train.bin
EOF
bad unterminated-var 2 "unterminated '\${'" <<'EOF'
[data]
train = ${HOME/train.bin
EOF
bad duplicate-key 4 "duplicate key 'steps' in [train]; first set on line 2" <<EOF
[train]
steps = 10
seed = 1
steps = 20
EOF
bad continuation 3 "indented line; continuation lines are not supported; hint: put the value on one line" <<EOF
[data]
train = a.bin
  b.bin
EOF
bad long-line 3 "line longer than 199 bytes" <<EOF
[data]
val = x
train = $long
EOF
bad outside-section 2 "key 'steps' outside any section" <<EOF
# no header yet
steps = 10
EOF
bad no-equals 3 "line has no '='" <<EOF
[train]
steps = 10
seed 1
EOF
bad bad-header 1 "section header without closing ']'" <<EOF
[train
steps = 10
EOF
bad head-divides 3 "not divisible by model.n_head" <<EOF
[model]
d_model = 64
n_head = 3
EOF
bad kv-divides 4 "not divisible by model.n_kv_head" <<EOF
[model]
arch = llama
n_head = 4
n_kv_head = 3
EOF
bad gpt2-kv 2 "arch gpt2 needs model.n_kv_head = model.n_head" <<EOF
[model]
n_kv_head = 2
EOF
bad batch-multiple 3 "train.global_batch = 10 is not a multiple of train.micro_batch = 4" <<EOF
[train]
micro_batch = 4
global_batch = 10
EOF
bad min-lr 3 "optim.min_lr = 0.1 is above optim.lr" <<EOF
[optim]
lr = 0.01
min_lr = 0.1
EOF
bad rope-scaling-gpt2 3 "model.rope_scaling = llama3 needs arch llama" <<EOF
[model]
arch = gpt2
rope_scaling = llama3
EOF
bad rope-freq-factors 5 "model.rope_high_freq_factor = 1 is not above model.rope_low_freq_factor = 2" <<EOF
[model]
arch = llama
rope_scaling = llama3
rope_low_freq_factor = 2
rope_high_freq_factor = 1
EOF
bad unknown-preset 2 "unknown preset 'gpt5' for model.preset; allowed: tiny|gpt2-124m" <<EOF
[model]
preset = gpt5
EOF
bad empty-int 2 "empty value for train.steps" <<EOF
[train]
steps =
EOF
bad int-overflow 2 "train.steps = 99999999999999999999 is out of range" <<EOF
[train]
steps = 99999999999999999999
EOF
# Integer bounds compare as integers: as a double 2^53 + 1 rounds to 2^53.
bad seed-past-2p53 2 "train.seed = 9007199254740993 is out of range; must be [0, 9007199254740992]" <<EOF
[train]
seed = 9007199254740993
EOF
bad seed-past-2p53-cmdline cmd:3 "train.seed = 9007199254740993 is out of range" \
    -s train.seed=9007199254740993 </dev/null
# A quoted value cut at 64 bytes says so: 64 nines alone would look valid.
bad value-cut 2 "invalid integer '$(printf '9%.0s' $(seq 1 64))...' for train.steps" <<EOF
[train]
steps = $(printf '9%.0s' $(seq 1 71))x
EOF
bad value-cut-cmdline cmd:3 "optim.lr = -0.$(printf '0%.0s' $(seq 1 61))... is out of range" \
    -s "optim.lr=-0.$(printf '0%.0s' $(seq 1 70))1" </dev/null
# A ${...} error quotes the bad text whole, into a 768-byte buffer: a
# message cut there ends with "..." (or a cut name would read as the
# whole); one of 767 bytes, the most that fits, is printed unmarked.
# refused_line NAME LINE ARGS...: `check ARGS c.ini` exits 2 with exactly
# the one stderr line LINE.
printf '[train]\nsteps = 3\n' > "$TMP/cut.ini"
refused_line() {
    name=$1 want=$2
    shift 2
    "$SHARDTRAIN" check "$@" "$TMP/cut.ini" > "$TMP/out" 2> "$TMP/err"
    st=$?
    if [ "$st" -eq 2 ] && [ "$(wc -l < "$TMP/err")" -eq 1 ] && [ "$(cat "$TMP/err")" = "$want" ]
    then
        ok "refuses $name"
    else
        not_ok "refuses $name"
        diag "exit status $st (want 2)" "want: $want" "got:" "$(cat "$TMP/err")"
    fi
}
ys() { printf "y%.0s" $(seq 1 "$1"); }
H='; hint: write ${VAR} or ${VAR:-default}'
P="shardtrain: error: command line:3: data.train: unsupported '\${A:"
# 15 + 2 + 709 + 41 = 767 bytes: whole, ending with its hint.
refused_line var-message-767-bytes "$P$(ys 709)}'$H" -s "data.train=\${A:$(ys 709)}"
# One byte more: the last 4 bytes give way to the mark.
refused_line var-message-768-bytes-cut "$P$(ys 710)}'; hint: write \${VAR} or \${VAR:-defa..." \
    -s "data.train=\${A:$(ys 710)}"
# Far over: cut at the same byte, inside the quote.
refused_line var-message-2000-bytes-cut "$P$(ys 747)..." -s "data.train=\${A:$(ys 2000)}"
refused_line var-name-2000-bytes-cut \
    "shardtrain: error: command line:3: data.train: invalid environment variable name '1$(ys 728)..." \
    -s "data.train=\${1$(ys 2000)}"
# inih ignores what follows a header's ']' and splits lines at \n only.
bad header-junk 3 "text after ']' in section header; hint:" <<EOF
[model]
n_layer = 2
[train] steps = 3
EOF
bad header-hash-comment 1 "text after ']' in section header" <<EOF
[train] # '#' starts no comment after text
steps = 3
EOF
# (printf into a file, not a pipe: bad must run in this shell to count.)
printf '[train]\rsteps = 3\r' > "$TMP/cr.src"
bad cr-only 1 "carriage return without a line feed; hint: convert the file to Unix line endings" \
    < "$TMP/cr.src"
printf '[train]\nsteps = 3\r\nseed = 1\rsteps = 4\n' > "$TMP/cr.src"
bad cr-inside 3 "carriage return without a line feed" < "$TMP/cr.src"
# lora.targets: an empty item, a layer twice (or by an alias) and all beside
# names are refused at their line.
bad lora-targets-empty-item 3 "lora.targets 'c_attn,,c_fc' has an empty item; hint:" <<EOF
[lora]
rank = 4
targets = c_attn,,c_fc
EOF
bad lora-targets-trailing-comma 3 "has an empty item" <<EOF
[lora]
rank = 4
targets = c_attn, c_fc,
EOF
bad lora-targets-twice 3 'lora.targets names "c_attn" a second time' <<EOF
[lora]
rank = 4
targets = c_attn,c_fc,c_attn
EOF
bad lora-targets-alias-twice 4 'lora.targets names "q_proj" a second time' <<EOF
[model]
arch = llama
[lora]
targets = q, q_proj
rank = 4
EOF
bad lora-targets-all-and-names 3 "lora.targets combines all with layer names; hint:" <<EOF
[lora]
rank = 4
targets = all,c_fc
EOF
bad lora-targets-names-and-all 3 "combines all with layer names" <<EOF
[lora]
rank = 4
targets = c_fc all
EOF
bad odd-head-dim 3 "head dimension d_model/n_head = 3 is odd" <<EOF
[model]
arch = llama
n_head = 4
d_model = 12
EOF
bad override-syntax cmd:3 "invalid override 'foo'; hint: write -s section.key=value" -s foo </dev/null
bad override-unknown cmd:3 "unknown key 'stepz' in [train]; did you mean 'steps'?" -s train.stepz=3 </dev/null
bad override-value cmd:5 "invalid integer 'x' for train.steps" -s train.seed=1 -s train.steps=x </dev/null
bad batch-from-cmdline cmd:3 "not a multiple of train.micro_batch" -s train.global_batch=3 <<EOF
[train]
micro_batch = 2
EOF

# A missing file is named without a line.
"$SHARDTRAIN" check /nonexistent.ini > "$TMP/out" 2> "$TMP/err"
st=$?
if [ "$st" -eq 2 ] && [ "$(wc -l < "$TMP/err")" -eq 1 ] &&
   grep -q '^shardtrain: error: /nonexistent\.ini: ' "$TMP/err"; then
    ok "refuses a missing file"
else
    not_ok "refuses a missing file"
    diag "exit status $st" "$(cat "$TMP/err")"
fi

# ---- valid configurations -------------------------------------------------

good="$TMP/good.ini"
cat > "$good" <<'EOF'
# a complete, valid configuration
[model]
arch = llama            ; grouped-query attention
n_head = 4
n_kv_head = 2
d_model = 64

[data]
train = ${ST_TEST_DATA}/train-*.bin
val = ${ST_TEST_UNSET_VAR:-/default/val}.bin

[train]
micro_batch = 2
global_batch = 8
steps = 50

[optim]
lr = 1e-3
min_lr = 1e-4
schedule = wsd

[parallel]
no_sync = yes
EOF
ST_TEST_DATA=/data/ts "$SHARDTRAIN" check "$good" > "$TMP/out" 2> "$TMP/err"
st=$?
check "valid file passes" test "$st" -eq 0
[ "$st" -eq 0 ] || diag "$(cat "$TMP/err")"
check "valid file: no stderr" test ! -s "$TMP/err"
check "\${VAR} expands" grep -q '^train = /data/ts/train-\*\.bin ' "$TMP/out"
check "\${VAR:-default} falls back" grep -q '^val = /default/val\.bin ' "$TMP/out"
check "origin is FILE:LINE" grep -q "^steps = 50 *; from $good:15\$" "$TMP/out"
check "llama d_ff default" grep -q '^d_ff = 176 ' "$TMP/out"
check "llama unties embeddings" grep -q '^tie_embeddings = false ' "$TMP/out"
check "enum printed by name" grep -q '^schedule = wsd ' "$TMP/out"

# The check output is itself a valid config that resolves to the same values.
sed 's/ *;.*$//' "$TMP/out" > "$TMP/again.ini"
"$SHARDTRAIN" check "$TMP/again.ini" > "$TMP/out2" 2> "$TMP/err"
sed 's/ *;.*$//' "$TMP/out2" > "$TMP/again2.ini"
check "check output reads back" cmp -s "$TMP/again.ini" "$TMP/again2.ini"

ST_TEST_DATA=/d "$SHARDTRAIN" check -s train.steps=7 -s 'optim.lr = 0.002' "$good" \
    > "$TMP/out" 2> "$TMP/err"
check "-s overrides the file" grep -q '^steps = 7 *; from command line$' "$TMP/out"
check "-s value is trimmed" grep -q '^lr = 0.002 ' "$TMP/out"

cat > "$TMP/preset.ini" <<EOF
[model]
preset = gpt2-124m
n_layer = 2
EOF
"$SHARDTRAIN" check "$TMP/preset.ini" > "$TMP/out" 2> "$TMP/err"
check "preset passes" test $? -eq 0
check "explicit key beats preset" grep -q '^n_layer = 2 *; from .*preset\.ini:3$' "$TMP/out"
check "preset sets d_model" grep -q '^d_model = 768 *; from preset gpt2-124m$' "$TMP/out"
check "preset sets vocab_size" grep -q '^vocab_size = 50257 ' "$TMP/out"

"$SHARDTRAIN" check -s model.preset=llama-8b -s model.arch=llama /dev/null > "$TMP/out" 2> "$TMP/err"
check "llama-8b via -s" grep -q '^d_ff = 14336 ' "$TMP/out"
check "llama-8b kv heads" grep -q '^n_kv_head = 8 ' "$TMP/out"

"$SHARDTRAIN" check -s model.preset=tiny -s model.arch=llama /dev/null > "$TMP/out" 2> "$TMP/err"
check "tiny follows arch" grep -q '^n_kv_head = 2 ' "$TMP/out"

# The largest seed, 2^53, is accepted and kept exactly.
"$SHARDTRAIN" check -s train.seed=9007199254740992 /dev/null > "$TMP/out" 2> "$TMP/err"
check "train.seed = 2^53 is accepted" grep -q '^seed = 9007199254740992 ' "$TMP/out"
# CRLF line endings, and a ' ;' comment after a header, are accepted.
printf '[train]\r\nsteps = 3\r\n[optim] ; the optimizer\r\nlr = 0.002\r\n' > "$TMP/crlf.ini"
"$SHARDTRAIN" check "$TMP/crlf.ini" > "$TMP/out" 2> "$TMP/err"
check "CRLF file passes" test $? -eq 0
check "CRLF file: steps read" grep -q '^steps = 3 ' "$TMP/out"
check "header with a ' ;' comment: its keys read" grep -q '^lr = 0.002 ' "$TMP/out"
# lora.targets' accepted forms.
for t in all "c_attn, c_fc" "c_attn c_fc" "c_proj,c_fc"; do
    "$SHARDTRAIN" check -s lora.rank=4 -s "lora.targets=$t" /dev/null > /dev/null 2> "$TMP/err"
    check "lora.targets = $t is accepted" test $? -eq 0
done

# Every integer key is bounded (issue 17): 2^62 is refused for each, with
# one line and exit status 2, never a crash later in train.  The integer
# keys are read from the man page text the schema generates.
"$SHARDTRAIN" keys --man | awk '/^\.SS/ { sec = $2; gsub(/[][]/, "", sec) }
    /^\.B / { key = $2 } /fIinteger/ { print sec "." key }' > "$TMP/intkeys"
check "the schema has integer keys" test "$(wc -l < "$TMP/intkeys")" -ge 15
unbounded=0
while read -r key; do
    "$SHARDTRAIN" check -s "$key=4611686018427387904" /dev/null > /dev/null 2> "$TMP/err"
    st=$?
    if [ "$st" -ne 2 ] || [ "$(wc -l < "$TMP/err")" -ne 1 ] ||
        ! grep -q "$key = 4611686018427387904 is out of range; must be \\[" "$TMP/err"; then
        diag "$key = 2^62: exit $st: $(cat "$TMP/err")"; unbounded=1
    fi
done < "$TMP/intkeys"
check "every integer key refuses 2^62 with one line, exit 2" test "$unbounded" -eq 0

# Products of in-range keys that would overflow a size are refused by check.
bad tokens-overflow 4 "the run's tokens (steps 1000000000 x global_batch 16000000 x seq_len 1000000) pass 2^59" <<EOF
[model]
seq_len = 1000000
[train]
steps = 1000000000
global_batch = 16000000
EOF
bad acts-overflow 2 "one micro-batch's activations pass 2^59 values" <<EOF
[train]
micro_batch = 65536
[model]
seq_len = 1048576
d_model = 1048576
n_head = 1024
EOF
bad eval-overflow 3 "one evaluation's tokens" <<EOF
[train]
global_batch = 16777216
eval_batches = 1048576
[model]
seq_len = 1048576
EOF

# Every schema key appears in its section of the check output.
"$SHARDTRAIN" check "$TMP/preset.ini" > "$TMP/out" 2>&1
awk '/^\[/ { sec = substr($0, 2, length($0) - 2); next }
     / = / { print sec "." $1 }' "$TMP/out" > "$TMP/printed"
"$SHARDTRAIN" keys > "$TMP/keys"
check "keys lists keys" test -s "$TMP/keys"
missing=0
while read -r key; do
    grep -qx "$key" "$TMP/printed" || { diag "missing from check: $key"; missing=1; }
done < "$TMP/keys"
check "check prints every key" test "$missing" -eq 0
