#!/bin/sh
# Everything a resume trusts is verified (issue 17, class 2): the manifest
# carries its own checksum (ckpt/manifest_seal.h), checked here against an
# independent XXH64 (Debian's python3-xxhash); an edited manifest is refused
# naming the file and the field (exit 2), and resume = auto falls back to
# the previous checkpoint; manifests edited and then resealed, so that only
# the field checks can catch them, are refused naming the field (the model
# fields too, by export: each in its [model] key's range, the shape
# consistent, the same as the embedded configuration's); a
# malformed or non-regular `latest`, or a manifest that is a FIFO, is an
# error, never a silent fresh start or a hang.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
PY=/usr/bin/python3
require "$PY" -c "import json, xxhash"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini"

# run NAME NP [-s ...]: train on NP ranks; status in $TMP/NAME.rc
run() {
    name=$1 np=$2
    shift 2
    ranks "$np" 120 "$SHARDTRAIN" train -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$@" "$TMP/base.ini" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}
errors() { grep -c '^shardtrain: error:' "$1"; }
# refused NAME PATTERN: exit 2 and exactly one error line matching PATTERN
refused() {
    if [ "$(cat "$TMP/$1.rc")" = 2 ] && [ "$(errors "$TMP/$1.err")" -eq 1 ] &&
        grep '^shardtrain: error:' "$TMP/$1.err" | grep -q -- "$2"; then return 0; fi
    diag "exit $(cat "$TMP/$1.rc")" "$(cat "$TMP/$1.err")"
    return 1
}

run A 2 -s checkpoint.every=2 -s train.steps=4
check "reference run: checkpoints of steps 2 and 4" \
    test -s "$TMP/A/ckpt/step_00000002/manifest.json" -a -s "$TMP/A/ckpt/step_00000004/manifest.json"

# edit FILE PYTHON-STATEMENTS [reseal]: change the manifest's JSON object m;
# with reseal, write a valid seal over the result (as a forger would).
edit() {
    "$PY" - "$@" <<'EOF'
import json, sys, xxhash
path, code = sys.argv[1], sys.argv[2]
reseal = len(sys.argv) > 3
m = json.load(open(path))
exec(code)
m["manifest_xxh64"] = "0" * 16
text = json.dumps(m, indent=1) + "\n"
if reseal:
    text = text.replace('"manifest_xxh64": "' + "0" * 16, '"manifest_xxh64": "' + xxhash.xxh64(text.encode()).hexdigest())
open(path, "w").write(text)
EOF
}

check "the seal is the XXH64 of the manifest's bytes with the seal zeroed" \
    "$PY" - "$TMP/A/ckpt/step_00000004/manifest.json" <<'EOF'
import json, sys, xxhash
raw = open(sys.argv[1], "rb").read()
seal = json.loads(raw)["manifest_xxh64"]
zeroed = raw.replace(b'"manifest_xxh64": "' + seal.encode(), b'"manifest_xxh64": "' + b"0" * 16)
sys.exit(0 if xxhash.xxh64(zeroed).hexdigest() == seal and raw.count(b"manifest_xxh64") == 1 else 1)
EOF

# ---- edits without a new seal ---------------------------------------------
cp -r "$TMP/A/ckpt" "$TMP/step"
sed -i 's/"step": 4,/"step": 5,/' "$TMP/step/step_00000004/manifest.json"
run E1 2 -s checkpoint.resume="$TMP/step/step_00000004" -s train.steps=8
check "step 4 -> 5: refused, naming the file and the seal" \
    refused E1 "step_00000004/manifest.json: the manifest does not match its manifest_xxh64"
run E2 2 -s checkpoint.dir="$TMP/step" -s train.steps=8
check "step 4 -> 5 under resume = auto: warns and falls back to step 2" \
    sh -c "test \"\$(cat '$TMP/E2.rc')\" = 0 &&
           grep -q 'warning: .*step_00000004/manifest.json: the manifest does not match.*falling back' '$TMP/E2.err' &&
           grep -q 'resumed from .*step_00000002 at step 2' '$TMP/E2.out'"
cp -r "$TMP/A/ckpt" "$TMP/opt"
sed -i 's/"optimizer_steps": 4,/"optimizer_steps": 3,/' "$TMP/opt/step_00000004/manifest.json"
run E3 2 -s checkpoint.resume="$TMP/opt/step_00000004"
check "optimizer_steps 4 -> 3: refused" refused E3 "manifest.json: the manifest does not match"
cp -r "$TMP/A/ckpt" "$TMP/noseal"
"$PY" -c "
import json, sys
p = sys.argv[1]; m = json.load(open(p)); del m['manifest_xxh64']
open(p, 'w').write(json.dumps(m, indent=1) + '\n')" "$TMP/noseal/step_00000004/manifest.json"
run E4 2 -s checkpoint.resume="$TMP/noseal/step_00000004"
check "a manifest without its seal: refused, naming the field" \
    refused E4 "manifest.json: field manifest_xxh64 is missing"

# ---- resealed edits: only the field checks can tell --------------------------
n=0
for case in \
    'm["dtype"] = "BF16"|field dtype' \
    'm["world_size"] = 3|field world_size' \
    'm["strategy"] = "zero3"|field strategy' \
    'm["strategy"] = "no_shard"|field strategy (no_shard) does not match' \
    'm["step"] = 0; m["data"]["next_step"] = 0; m["optimizer_steps"] = 0|field step is 0' \
    'm["optimizer_steps"] = 9|field optimizer_steps (9) exceeds step' \
    'm["data"]["next_step"] = 3|field data.next_step' \
    'm["format_version"] = 1|format version 1'; do
    n=$((n + 1))
    code=${case%%|*} pat=${case#*|}
    cp -r "$TMP/A/ckpt" "$TMP/f$n"
    edit "$TMP/f$n/step_00000004/manifest.json" "$code" reseal
    run F$n 2 -s checkpoint.resume="$TMP/f$n/step_00000004"
    check "resealed $code: refused ($pat)" refused "F$n" "$pat"
done
refused_nothing_written() { refused "$1" "$2" && test ! -e "$3"; }
# The model a manifest describes is what export writes into config.json:
# each field in its [model] key's range, the shape consistent, and the
# same as the configuration the manifest embeds.
n=0
for case in \
    'm["model"]["norm_eps"] = -1|field model.norm_eps = -1 is out of range; must be > 0' \
    'm["model"]["init_std"] = -5; m["config"]["model"]["init_std"] = -5|field model.init_std = -5 is out of range' \
    'm["model"]["rope_theta"] = -1.0|field model.rope_theta = -1 is out of range' \
    'm["model"]["n_layer"] = 0|field model.n_layer = 0 is out of range; must be \[1, 1024\]' \
    'm["model"]["norm_eps"] = 1e-6|field model.norm_eps = 1e-06 disagrees with config.model.norm_eps = 1e-05' \
    'm["model"]["n_head"] = 3|field model.n_head = 3 disagrees with config.model.n_head = 4' \
    'm["model"]["n_head"] = 3; m["config"]["model"]["n_head"] = 3|field model.n_head: model.d_model = 64 is not divisible by model.n_head = 3' \
    'm["model"]["n_kv_head"] = 2; m["config"]["model"]["n_kv_head"] = 2|field model.n_kv_head: arch gpt2 needs model.n_kv_head = model.n_head' \
    'm["model"]["tie_embeddings"] = False|field model.tie_embeddings disagrees'; do
    n=$((n + 1))
    code=${case%%|*} pat=${case#*|}
    cp -r "$TMP/A/ckpt" "$TMP/m$n"
    edit "$TMP/m$n/step_00000004/manifest.json" "$code" reseal
    "$SHARDTRAIN" export "$TMP/m$n/step_00000004" "$TMP/m$n/out" >"$TMP/M$n.out" 2>"$TMP/M$n.err"
    echo $? >"$TMP/M$n.rc"
    check "export of resealed $code: refused ($pat), nothing written" \
        refused_nothing_written "M$n" "manifest.json: $pat" "$TMP/m$n/out"
done
run M0 2 -s checkpoint.resume="$TMP/m1/step_00000004"
check "a resume from a manifest with norm_eps = -1: refused, naming the field" \
    refused M0 "manifest.json: field model.norm_eps = -1 is out of range"
run P1 2 -s checkpoint.resume="$TMP/A/ckpt/step_00000004" -s train.steps=3
check "a checkpoint past train.steps: refused, naming the field" \
    refused P1 "field step (4) is past train.steps (3)"
# Found by tests/fuzz_manifest: JSON whose parser message quotes a newline
# from the file (a string with a bad escape) was printed as two lines.
cp -r "$TMP/A/ckpt" "$TMP/nl"
"$PY" -c "import sys; p = sys.argv[1]; t = open(p).read()
open(p, 'w').write(t.replace('{', '{\"x\": \"a\\\\\n\",', 1))" "$TMP/nl/step_00000004/manifest.json"
run J1 1 -s checkpoint.resume="$TMP/nl/step_00000004"
check "a newline quoted from a broken manifest stays inside one error line" \
    refused J1 "manifest.json: not a valid manifest (line 2: invalid escape near '\"a\\\\x5c\\\\x0a')"

# ---- latest and manifest that are not what they should be --------------------
mkdir -p "$TMP/L1/ckpt"
echo garbage >"$TMP/L1/ckpt/latest"
run L1 2
check "a malformed latest and no step directory: an error, not a fresh start" \
    refused L1 "ckpt/latest: does not name a step directory"
mkdir -p "$TMP/L2/ckpt"
mkfifo "$TMP/L2/ckpt/latest"
run L2 1
check "latest is a FIFO: an error, not a hang" refused L2 "ckpt/latest: is not a readable regular file"
cp -r "$TMP/A/ckpt" "$TMP/fifo"
rm "$TMP/fifo/step_00000004/manifest.json"
mkfifo "$TMP/fifo/step_00000004/manifest.json"
run L3 1 -s checkpoint.resume="$TMP/fifo/step_00000004"
check "manifest.json is a FIFO: an error, not a hang" refused L3 "manifest.json: not a regular file"
mkdir -p "$TMP/L4/ckpt"
run L4 1
check "an empty checkpoint.dir still starts afresh" \
    sh -c "test \"\$(cat '$TMP/L4.rc')\" = 0 && ! grep -q resumed '$TMP/L4.out'"
