#!/bin/sh
# model.init from Hugging Face layouts (tests/hf_make.py writes them by hand
# from one set of random weights): for gpt2 and llama, in F32, F16 and BF16,
# as the hub's single file (GPT-2 without the "transformer." prefix and with
# its attn.bias buffers), a directory with model.safetensors + config.json,
# and a 3-shard directory with its index.  Checks:
#   - every layout gives bit-identical first-step and eval losses to the
#     fp32 file of the same values (for F16/BF16: the values rounded to that
#     dtype, rounded by Python), at 1 rank and at 4 ranks (full_shard);
#   - 4 ranks agree with 1 rank within fp32 rounding;
#   - the eval loss equals PyTorch's (tests/torch_ref.py, float64) on the
#     same weights and tokens within 1e-5;
#   - each rank reads only its own slices: the byte counts the ranks report
#     (SHARDTRAIN_DEBUG_IO) are each a quarter of the tensor data, and add
#     up to exactly all of it;
#   - model.init alone takes the shape from the directory's config.json
#     (check names it as the origin, training matches the INI that states
#     the shape, an explicit contradicting key is refused naming the field,
#     an epsilon of 1e-6 is taken), Llama 3.1's rope_scaling too (trained
#     with, kept by checkpoints, written back by export; yarn refused).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/hf_lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1

# losses RUN: "LOSS VAL_LOSS" of a run's metrics, as printed (repr).
losses() {
    python3 - "$TMP/$1/metrics.jsonl" <<'EOF2'
import json, sys
l = v = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    l = r.get("loss", l)
    v = r.get("val_loss", v)
print(repr(l), repr(v))
EOF2
}

# run NAME NP ARCH INIT [-s ...]: train one step into $TMP/NAME; stderr kept.
run() {
    name=$1 np=$2 arch=$3 init=$4
    shift 4
    set -- train -s model.init="$init" -s log.dir="$TMP/$name" -s checkpoint.dir="$TMP/$name/ckpt" \
        "$@" "$TMP/$arch.ini"
    if [ "$np" -eq 1 ]; then
        SHARDTRAIN_DEBUG_IO=1 timeout 300 "$SHARDTRAIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    else
        SHARDTRAIN_DEBUG_IO=1 timeout 300 mpirun --oversubscribe -x SHARDTRAIN_DEBUG_IO -np "$np" \
            "$SHARDTRAIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    fi
    rc=$?
    if [ "$rc" -eq 0 ] && [ -s "$TMP/$name/metrics.jsonl" ]; then
        ok "$name: trains from ${init##*/w-}"
    else
        not_ok "$name: exit $rc from $init"
        diag "$(tail -n 5 "$TMP/$name.err")"
    fi
}

# io_check NAME NP: the ranks' read counts split the tensor data evenly.
io_check() {
    if python3 - "$TMP/$1.err" "$2" >"$TMP/io.txt" 2>&1 <<'EOF2'
import re, sys
np_ = int(sys.argv[2])
pat = re.compile(r"^shardtrain: debug: rank (\d+) read (\d+) of (\d+) tensor data bytes "
                 r"and (\d+) header bytes from (\d+) files$")
got = {}
for line in open(sys.argv[1]):
    m = pat.match(line.strip())
    if m:
        got[int(m.group(1))] = tuple(int(x) for x in m.groups()[1:])
assert sorted(got) == list(range(np_)), "ranks reporting: %s" % sorted(got)
total = {t for _, t, _, _ in got.values()}
assert len(total) == 1, "ranks disagree on the total: %s" % total
total = total.pop()
reads = [got[r][0] for r in range(np_)]
assert sum(reads) == total, "reads %s add up to %d, not %d" % (reads, sum(reads), total)
for r in reads:
    assert abs(r - total / np_) <= 0.01 * total, "read %d, share %.0f" % (r, total / np_)
print("reads %s of %d" % (reads, total))
EOF2
    then ok "$1: each of $2 ranks read its own 1/$2 of the tensor data ($(cat "$TMP/io.txt"))"
    else not_ok "$1: per-rank reads"; diag "$(cat "$TMP/io.txt")"; fi
}

same() { # DESCRIPTION RUN_A RUN_B: identical printed losses
    a=$(losses "$2") b=$(losses "$3")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "$1 ($a)"
    else not_ok "$1 ($2: '$a', $3: '$b')"; fi
}

for arch in gpt2 llama; do
    hf_weights "$arch"
    W="$TMP/w-$arch"
    for r in f32 f16r bf16r; do
        ref=ref-${r%r}
        run "$arch-1-$ref" 1 "$arch" "$W/ref-$r.safetensors"
    done
    for dt in f32 f16 bf16; do
        for layout in single dir sharded; do
            init="$W/$dt-$layout"
            [ "$layout" = single ] && init="$init.safetensors"
            run "$arch-1-$dt-$layout" 1 "$arch" "$init"
            same "$arch $dt $layout, 1 rank: same losses as the fp32 file of the same values" \
                "$arch-1-$dt-$layout" "$arch-1-ref-$dt"
        done
    done
    io_check "$arch-1-bf16-sharded" 1
    a=$(losses "$arch-1-ref-f32") b=$(losses "$arch-1-ref-bf16")
    check "$arch: bf16 rounding changes the losses, so the comparisons tell dtypes apart" \
        test -n "$a" -a "$a" != "$b"

    # The independent reference: PyTorch on the same weights and eval tokens.
    for dt in f32 f16 bf16; do
        want=$("$PY" "$hf_make" refloss "$W" "$(cat "$TMP/$arch.json")" \
            "$TMP/data/sh_val_000000.bin" 4 "$dt" 2>"$TMP/ref.err")
        got=$(losses "$arch-1-$dt-single" | cut -d' ' -f2)
        if python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not abs(a - b) <= 1e-5 * abs(b))" \
            "$got" "$want" 2>/dev/null; then
            ok "$arch $dt single file: eval loss $got matches PyTorch's $want"
        else
            not_ok "$arch $dt single file: eval loss '$got' vs PyTorch '$want'"
            diag "$(tail -n 5 "$TMP/ref.err")"
        fi
    done

    # Four ranks, full_shard: ranged reads of each rank's slices.
    for r in f32 f16 bf16; do
        run "$arch-4-ref-$r" 4 "$arch" "$W/ref-$r$([ $r = f32 ] || echo r).safetensors"
    done
    for v in f32-sharded f16-single bf16-sharded bf16-dir; do
        init="$W/$v"
        case $v in *-single) init="$init.safetensors" ;; esac
        run "$arch-4-$v" 4 "$arch" "$init"
        same "$arch $v, 4 ranks: same losses as the fp32 file of the same values" \
            "$arch-4-$v" "$arch-4-ref-${v%-*}"
    done
    io_check "$arch-4-f32-sharded" 4
    io_check "$arch-4-bf16-sharded" 4
    io_check "$arch-4-f16-single" 4
    # Three ranks: units do not divide evenly, so slices end in padding and
    # cut tensors at odd places.
    run "$arch-3-ref-bf16" 3 "$arch" "$W/ref-bf16r.safetensors" -s train.global_batch=3
    run "$arch-3-bf16-sharded" 3 "$arch" "$W/bf16-sharded" -s train.global_batch=3
    same "$arch bf16 sharded, 3 ranks: same losses as the fp32 file of the same values" \
        "$arch-3-bf16-sharded" "$arch-3-ref-bf16"
    io_check "$arch-3-bf16-sharded" 3
    if python3 - "$(losses "$arch-1-ref-f32")" "$(losses "$arch-4-ref-f32")" <<'EOF2'
import sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
sys.exit(not (len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))))
EOF2
    then ok "$arch: 4 ranks match 1 rank within 1e-5"
    else not_ok "$arch: 4 ranks vs 1 rank: $(losses "$arch-4-ref-f32") vs $(losses "$arch-1-ref-f32")"; fi

    # Round trip through `shardtrain export`: import the fp32 model
    # directory, train the one step at lr 1e-30 (no weight moves: none is
    # within 1e-30 of zero), export its checkpoint; the tensors must be the
    # imported file's bit for bit.  Importing that export (its config.json
    # checked against the INI) and exporting again must give the same files.
    rt=$TMP/$arch-rt
    run "$arch-rt1" 1 "$arch" "$W/f32-dir" -s checkpoint.every=1
    "$SHARDTRAIN" export "$TMP/$arch-rt1/ckpt" "$rt/1" >/dev/null 2>"$TMP/rt.err"
    check "$arch round trip: the export's tensors equal the imported file's, bit for bit" \
        same_tensors "$W/f32-dir/model.safetensors" "$rt/1/model.safetensors"
    run "$arch-rt2" 1 "$arch" "$rt/1" -s checkpoint.every=1
    "$SHARDTRAIN" export "$TMP/$arch-rt2/ckpt" "$rt/2" >/dev/null 2>>"$TMP/rt.err"
    check "$arch round trip: import, export, import, export gives identical model.safetensors" \
        cmp "$rt/1/model.safetensors" "$rt/2/model.safetensors"
    check "$arch round trip: ... and identical config.json" cmp "$rt/1/config.json" "$rt/2/config.json"

    # model.init alone: the shape comes from config.json (seq_len stays, as
    # Llama's max_position_embeddings is no training length).
    awk '/^\[/ { sec = $0 } sec != "[model]" || /^\[/ || $1 == "seq_len"' "$TMP/$arch.ini" \
        >"$TMP/$arch-bare.ini"
    "$SHARDTRAIN" check -s model.init="$W/f32-dir" "$TMP/$arch-bare.ini" >"$TMP/bare.out" 2>&1
    n=$(grep -c "; from $W/f32-dir/config.json\$" "$TMP/bare.out")
    want=10; [ "$arch" = gpt2 ] && want=8  # llama adds n_kv_head and rope_theta
    check "$arch: check shows the shape from model.init's config.json ($n keys, $want expected)" \
        test "$n" -eq "$want"
    check "$arch: ... with config.json's values (n_layer $L, d_ff $F, n_head $H)" \
        sh -c "grep -q '^n_layer = $L ' '$TMP/bare.out' && grep -q '^d_ff = $F ' '$TMP/bare.out' &&
            grep -q '^n_head = $H ' '$TMP/bare.out'"
    SHARDTRAIN_DEBUG_IO= timeout 300 "$SHARDTRAIN" train -s model.init="$W/f32-dir" \
        -s log.dir="$TMP/$arch-bare2" -s checkpoint.dir="$TMP/$arch-bare2/ckpt" \
        "$TMP/$arch-bare.ini" >"$TMP/bare2.out" 2>&1
    same "$arch: the shape from config.json trains as the INI that states it" \
        "$arch-bare2" "$arch-1-ref-f32"
    refused "$arch: an INI key contradicting config.json names the field" \
        "config.json: .* is 2, but model.n_layer is 3" \
        "$SHARDTRAIN" train -s model.init="$W/f32-dir" -s model.n_layer=3 "$TMP/$arch-bare.ini"
    # Hugging Face Llama's default rms_norm_eps, 1e-6, is taken, not refused.
    mkdir -p "$TMP/$arch-eps"
    cp "$W/f32-dir/model.safetensors" "$TMP/$arch-eps/"
    python3 - "$W/f32-dir/config.json" "$TMP/$arch-eps/config.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
j["layer_norm_epsilon" if j["model_type"] == "gpt2" else "rms_norm_eps"] = 1e-6
json.dump(j, open(sys.argv[2], "w"))
EOF2
    "$SHARDTRAIN" check -s model.init="$TMP/$arch-eps" "$TMP/$arch-bare.ini" >"$TMP/eps.out" 2>&1
    check "$arch: an epsilon of 1e-6 in config.json becomes model.norm_eps" \
        grep -q "^norm_eps = 1e-06 *; from $TMP/$arch-eps/config.json" "$TMP/eps.out"
done

# Llama 3.1's rope_scaling in config.json: taken, trained with, kept through
# a checkpoint and written back by export; other kinds refused.
W="$TMP/w-llama"
mkdir -p "$TMP/rs" "$TMP/yarn"
cp "$W/f32-dir/model.safetensors" "$TMP/rs/"
cp "$W/f32-dir/model.safetensors" "$TMP/yarn/"
python3 - "$W/f32-dir/config.json" "$TMP/rs/config.json" "$TMP/yarn/config.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
j["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
json.dump(j, open(sys.argv[2], "w"))
j["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
json.dump(j, open(sys.argv[3], "w"))
EOF2
"$SHARDTRAIN" check -s model.init="$TMP/rs" "$TMP/llama-bare.ini" >"$TMP/rs.out" 2>&1
check "llama: rope_scaling llama3 in config.json sets model.rope_scaling and its factors" \
    sh -c "grep -q '^rope_scaling = llama3 *; from $TMP/rs/config.json' '$TMP/rs.out' &&
        grep -q '^rope_factor = 8 *; from' '$TMP/rs.out' &&
        grep -q '^rope_original_seq_len = 16 *; from' '$TMP/rs.out'"
timeout 300 "$SHARDTRAIN" train -s model.init="$TMP/rs" -s log.dir="$TMP/rs-run" \
    -s checkpoint.dir="$TMP/rs-run/ckpt" -s checkpoint.every=1 "$TMP/llama-bare.ini" \
    >"$TMP/rs-run.out" 2>&1
a=$(losses rs-run) b=$(losses llama-bare2)
check "llama: the scaled weights train, and the scaling changes the losses ($a vs $b)" \
    test -n "$a" -a "$a" != "$b"
"$SHARDTRAIN" export "$TMP/rs-run/ckpt" "$TMP/rs-export" >/dev/null 2>&1
check "llama: the checkpoint keeps the scaling and export writes it back to config.json" \
    python3 -c "import json, sys
a = json.load(open(sys.argv[1]))['rope_scaling']; b = json.load(open(sys.argv[2]))['rope_scaling']
sys.exit(not (a == b))" "$TMP/rs/config.json" "$TMP/rs-export/config.json"
refused "llama: rope_scaling of another type (yarn) is refused, not run as plain RoPE" \
    "rope_scaling of type 'yarn' is not implemented" \
    "$SHARDTRAIN" train -s model.init="$TMP/yarn" "$TMP/llama-bare.ini"
exit 0
