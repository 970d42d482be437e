# Shared by tests/hf_import.sh and tests/safetensors_bad.sh (sourced after
# tests/lib.sh): the Python with numpy and torch, token data, and for each
# architecture one small model described once, as an INI for shardtrain and
# as JSON for tests/hf_make.py, so both sides build the same shape.
: "${top_builddir:=$top_srcdir}"
hf_make="$top_srcdir/tests/hf_make.py"
PY=${TORCH_PYTHON:-}
if [ -z "$PY" ] || ! "$PY" -c 'import numpy, torch' >/dev/null 2>&1; then
    not_ok "no Python with numpy and torch (TORCH_PYTHON='$PY'; configure looks for one)"
    exit 1
fi

text=$(shakespeare_text) || { not_ok "no Shakespeare text found"; exit 1; }
"$SHARDTRAIN" prepare "$text" "$TMP/data/sh" >/dev/null 2>&1
check "prepare the test data" test -s "$TMP/data/sh_val_000000.bin"

# hf_model ARCH: sets L H KV C F V T TIE and writes $TMP/ARCH.ini and
# $TMP/ARCH.json.  Eval after the single step at a vanishing learning rate
# measures the loaded weights themselves (AdamW moves them by ~1e-30).
hf_model() {
    case $1 in
        gpt2) L=2 H=4 KV=4 C=64 F=256 V=256 T=32 TIE=true ;;
        llama) L=2 H=4 KV=2 C=64 F=176 V=256 T=32 TIE=false ;;
    esac
    cat >"$TMP/$1.ini" <<EOF2
[model]
arch = $1
n_layer = $L
n_head = $H
n_kv_head = $KV
d_model = $C
d_ff = $F
vocab_size = $V
seq_len = $T
rope_theta = 10000
norm_eps = 1e-5
tie_embeddings = $TIE
[data]
train = $TMP/data/sh_train_*.bin
val = $TMP/data/sh_val_*.bin
[train]
micro_batch = 1
global_batch = 4
steps = 1
seed = 5
eval_every = 1
eval_batches = 1
[optim]
lr = 1e-30
weight_decay = 0
warmup_steps = 0
[parallel]
strategy = full_shard
[log]
every = 1
EOF2
    printf '{"arch":"%s","n_layer":%s,"n_head":%s,"n_kv_head":%s,"d_model":%s,"d_ff":%s,"vocab_size":%s,"seq_len":%s,"rope_theta":10000.0,"norm_eps":1e-5,"tie_embeddings":%s}\n' \
        "$1" $L $H $KV $C $F $V $T $TIE >"$TMP/$1.json"
}

# hf_weights ARCH: random weights in every layout under $TMP/w-ARCH.
hf_weights() {
    hf_model "$1"
    if "$PY" "$hf_make" make "$TMP/w-$1" "$(cat "$TMP/$1.json")" --seed 7 >"$TMP/make-$1.log" 2>&1; then
        ok "$1: Hugging Face layouts written by hf_make.py"
    else
        not_ok "$1: hf_make.py failed"
        diag "$(tail -n 20 "$TMP/make-$1.log")"
        exit 1
    fi
}
