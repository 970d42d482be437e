#!/bin/sh
# Sharded checkpoints on real MPI ranks (tiny models, at most 8 ranks on 2
# cores): resume at the same layout is bit-identical to the uninterrupted
# run (fp32 on 4 ranks, bf16 on 2); resume at other world sizes and strategies matches it within fp32
# tolerance; corrupt, truncated and mismatched checkpoints are one error
# naming the file (auto falls back to an older one); keep prunes; SIGUSR1
# checkpoints and exits 3; a crash in the middle of a save leaves the
# previous checkpoint in charge, and a full disk leaves it too, with no
# partial directory; export writes the same tensors as the
# final weights and a transformers config.json.  The reference for every
# comparison is the uninterrupted run of the same configuration.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
# Debian's Python with numpy (python3-numpy), whatever python3 is on PATH
PY=/usr/bin/python3
require "$PY" -c "import json, struct, numpy"
export OMP_NUM_THREADS=1

prepare_test_data

# d_model 128, d_ff 512 make each of 4 shard files span two 1 MiB checksum blocks,
# so ranged reads cross block and file boundaries.
write_base_ini "$TMP/base.ini"
gpt2="-s model.d_model=128 -s model.d_ff=512 -s train.micro_batch=1 -s train.steps=6 \
    -s checkpoint.every=2"
sets=$gpt2

# run NAME NP [-s ...]: train on NP ranks (1 = no launcher) into $TMP/NAME
run() {
    name=$1 np=$2
    shift 2
    set -- train $sets -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        "${CFG:-$TMP/base.ini}"
    if [ "$np" -eq 1 ]; then
        timeout 600 "$SHARDTRAIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    else
        timeout 600 mpirun --oversubscribe -np "$np" "$SHARDTRAIN" "$@" \
            >"$TMP/$name.out" 2>"$TMP/$name.err"
    fi
}

# same_metrics A B [OPTION...]: every metrics line of A and B identical
# but the timing-dependent fields (tests/compare_runs.py options)
same_metrics() {
    _a=$1 _b=$2
    shift 2
    compare_runs --exact --only metrics --records-but time_ms,tokens_per_s,peak_bytes,mfu "$@" \
        "$TMP/$_a" "$TMP/$_b"
}

errors() { grep -c '^shardtrain: error:' "$1"; }

# ---- the reference: 4 ranks full_shard, uninterrupted ------------------
run A 4
check "uninterrupted 4-rank run" test -s "$TMP/A/ckpt/final/model.safetensors"
check "checkpoints of steps 2, 4, 6 and latest = step_00000006" \
    test "$(ls "$TMP/A/ckpt" | tr '\n' ' ')" = "final latest step_00000002 step_00000004 step_00000006 " -a \
    "$(cat "$TMP/A/ckpt/latest")" = step_00000006
"$PY" - "$TMP/A/ckpt/step_00000004" <<'EOF2' >"$TMP/manifest.check" 2>&1
import json, os, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
assert m["format_version"] == 2 and m["step"] == 4 and m["optimizer_steps"] == 4
assert m["world_size"] == 4 and m["shard_size"] == 4 and m["strategy"] == "full_shard"
assert m["data"]["next_step"] == 4 and m["config"]["model"]["d_model"] == 128
assert len(m["files"]) == 4
for f in m["files"]:
    assert os.path.getsize(os.path.join(d, f["name"])) == f["bytes"]
    assert len(f["block_xxh64"]) == (f["bytes"] + m["block_bytes"] - 1) // m["block_bytes"] >= 2
assert sum(u["numel"] for u in m["units"]) == sum(
    __import__("math").prod(t["shape"]) for t in m["tensors"])
EOF2
check "manifest: step, layout, one file per rank, per-block checksums" test ! -s "$TMP/manifest.check"

# ---- 1. same layout: bit-identical ---------------------------------------
run R4 4 -s checkpoint.resume="$TMP/A/ckpt/step_00000004"
check "resume at 4 ranks full_shard runs" grep -q "resumed from .*step_00000004 at step 4" "$TMP/R4.out"
check "same layout: metrics after the resume point identical (steps 5, 6)" \
    same_metrics R4 A --resumed-at 4 --steps 5-6
check "same layout: final weights identical" \
    cmp -s "$TMP/A/ckpt/final/model.safetensors" "$TMP/R4/ckpt/final/model.safetensors"

# bf16 on 2 ranks: the gathers send each shard's bf16 copy, which the
# optimizer keeps; after a load it must be packed again from the loaded
# fp32 shard, or the resumed run computes on stale words.
run BF 2 -s train.precision=bf16
run BFR 2 -s train.precision=bf16 -s checkpoint.resume="$TMP/BF/ckpt/step_00000004"
check "bf16 on 2 ranks, resumed at step 4: metrics identical (steps 5, 6)" \
    same_metrics BFR BF --resumed-at 4 --steps 5-6
check "bf16 on 2 ranks, resumed: final weights identical" \
    cmp -s "$TMP/BF/ckpt/final/model.safetensors" "$TMP/BFR/ckpt/final/model.safetensors"

# ---- 2. other world sizes and strategies ---------------------------------
run R2 2 -s checkpoint.resume="$TMP/A/ckpt/step_00000004"
check "4 -> 2 ranks full_shard: losses within 1e-5" compare_runs --only metrics --resumed-at 4 "$TMP/R2" "$TMP/A" 1e-5
run R8 8 -s parallel.strategy=hybrid_shard -s parallel.shard_size=4 \
    -s checkpoint.resume="$TMP/A/ckpt/step_00000004"
check "4 -> 8 ranks hybrid_shard 2x4: losses within 1e-5" compare_runs --only metrics --resumed-at 4 "$TMP/R8" "$TMP/A" 1e-5
check "hybrid_shard writes one file per shard index (4, not 8)" \
    test "$(ls "$TMP/R8/ckpt/step_00000006" | grep -c '^shard_')" -eq 4
run R1 1 -s parallel.strategy=no_shard -s checkpoint.resume="$TMP/A/ckpt/step_00000004"
check "4 -> 1 rank no_shard: losses within 1e-5" compare_runs --only metrics --resumed-at 4 "$TMP/R1" "$TMP/A" 1e-5
run R8b 1 -s parallel.strategy=no_shard -s checkpoint.resume="$TMP/R8/ckpt/step_00000006" \
    -s train.steps=6
check "a hybrid 2x4 checkpoint loads on 1 rank" grep -q "resumed from .*step_00000006 at step 6" "$TMP/R8b.out"

# ---- 3. corruption --------------------------------------------------------
# expect_load_error DESC PATTERN NAME NP [-s ...]: exit 2, one error line
expect_load_error() {
    d=$1 pat=$2 name=$3 np=$4
    shift 4
    run "$name" "$np" "$@"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(errors "$TMP/$name.err")" -eq 1 ] &&
        grep '^shardtrain: error:' "$TMP/$name.err" | grep -q -- "$pat"; then ok "$d"
    else not_ok "$d (exit $rc)"; diag "$(cat "$TMP/$name.err")"; fi
}
cp -r "$TMP/A/ckpt" "$TMP/flip"
"$PY" - "$TMP/flip/step_00000006/shard_00002-of-00004.bin" <<'EOF2'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-1000, 2)   # in the second checksum block
    b = f.read(1)
    f.seek(-1000, 2)
    f.write(bytes([b[0] ^ 0x10]))
EOF2
expect_load_error "flipped byte: exit 2, one error naming the file" \
    "shard_00002-of-00004.bin: checksum mismatch" E1 4 -s checkpoint.resume="$TMP/flip/step_00000006"
cp -r "$TMP/A/ckpt" "$TMP/trunc"
truncate -s 100000 "$TMP/trunc/step_00000006/shard_00001-of-00004.bin"
expect_load_error "truncated file: exit 2, one error naming the file" \
    "shard_00001-of-00004.bin: .*truncated" E2 2 -s checkpoint.resume="$TMP/trunc/step_00000006"
expect_load_error "manifest of another model shape: exit 2, one error naming it" \
    "manifest.json: .*n_layer" E3 4 -s model.n_layer=3 -s checkpoint.resume="$TMP/A/ckpt/step_00000004"
cp -r "$TMP/A/ckpt" "$TMP/badman"
printf '{"format": "shardtrain-checkpoint", "format_version": 2, "step": ' \
    >"$TMP/badman/step_00000004/manifest.json"
expect_load_error "a damaged manifest: exit 2, one error naming it" \
    "step_00000004/manifest.json: not a valid manifest" E7 2 -s checkpoint.resume="$TMP/badman/step_00000004"
expect_load_error "checkpoint.resume names nothing: exit 2, one line" \
    "no such checkpoint" E4 1 -s checkpoint.resume="$TMP/nowhere"
expect_load_error "checkpoint.resume names a file: exit 2, one line" \
    "not a checkpoint" E5 1 -s checkpoint.resume="$TMP/base.ini"
expect_load_error "checkpoint.resume names a directory without a checkpoint: exit 2, one line" \
    "not a checkpoint" E6 1 -s checkpoint.resume="$TMP/data"
# auto: latest (step 6) is corrupt, step 4 is good
run F 4 -s checkpoint.dir="$TMP/flip" -s checkpoint.every=0
check "auto with a corrupt latest: warns naming the file and falls back" \
    sh -c "grep -q 'warning: .*shard_00002-of-00004.bin: checksum mismatch.*falling back' '$TMP/F.err' &&
           grep -q 'resumed from .*step_00000004 at step 4' '$TMP/F.out'"
check "the fallback run continues exactly" same_metrics F A --resumed-at 4
run G 2 -s checkpoint.dir="$TMP/trunc" -s checkpoint.every=0
check "auto with a truncated latest falls back too" \
    sh -c "grep -q 'warning: .*shard_00001-of-00004.bin: .*truncated' '$TMP/G.err' &&
           grep -q 'resumed from .*step_00000004 at step 4' '$TMP/G.out'"

# ---- 4. keep ----------------------------------------------------------------
run K 2 -s checkpoint.keep=2
check "keep = 2: exactly the newest two step directories, no temporaries" \
    test "$(ls -A "$TMP/K/ckpt" | tr '\n' ' ')" = "final latest step_00000004 step_00000006 "
check "keep = 2: latest names the newest" test "$(cat "$TMP/K/ckpt/latest")" = step_00000006

# ---- 5. SIGUSR1 -------------------------------------------------------------
# Enough steps that the signal lands mid-run; the marker in the config name
# lets pkill find exactly the rank processes (not mpirun, not other tests).
cp "$TMP/base.ini" "$TMP/sigmark.ini"
CFG="$TMP/sigmark.ini"
run U 4 -s train.steps=40 -s checkpoint.every=0
# The reference must really be uninterrupted (a hang guard's SIGTERM would
# make it a preempted run too, and the comparison below meaningless).
check "SIGUSR1: the uninterrupted reference completes ($?)" test -s "$TMP/U/ckpt/final/model.safetensors"
( run P 4 -s train.steps=40 -s checkpoint.every=0; echo $? >"$TMP/P.rc" ) &
wait_logged_step "$TMP/P/logs" 2
pkill -USR1 -f "^$SHARDTRAIN train .*sigmark\.ini" || diag "pkill found no rank"
wait
check "SIGUSR1: mpirun exits 3" test "$(cat "$TMP/P.rc")" = 3
check "SIGUSR1: every rank (4) exits through the checkpoint" \
    test "$(grep -c 'rank [0-3]: SIGUSR1 received; checkpoint of step [0-9]* written, exiting with status 3' "$TMP/P.err")" -eq 4
psteps=$(ls "$TMP/P/ckpt" | grep -c '^step_')
pstep=$(sed 's/^step_0*//' "$TMP/P/ckpt/latest")
check "SIGUSR1: one checkpoint, of a mid-run step ($pstep)" \
    test "$psteps" -eq 1 -a "$pstep" -ge 2 -a "$pstep" -lt 40 -a ! -e "$TMP/P/ckpt/final"
run P 4 -s train.steps=40 -s checkpoint.every=0
CFG=
check "resume after SIGUSR1 completes" grep -q "resumed from .*step_0*$pstep at step $pstep" "$TMP/P.out"
check "preempted + resumed metrics equal the uninterrupted run's" same_metrics P U
check "preempted + resumed final weights equal" \
    cmp -s "$TMP/U/ckpt/final/model.safetensors" "$TMP/P/ckpt/final/model.safetensors"

# SIGTERM on one rank without a launcher, under a pretend Slurm job with
# requeue: a stand-in scontrol on PATH records how it was called.
mkdir -p "$TMP/bin"
printf '#!/bin/sh\necho "$@" >"%s/scontrol.args"\n' "$TMP" >"$TMP/bin/scontrol"
chmod +x "$TMP/bin/scontrol"
CFG="$TMP/sigmark.ini"
( export PATH="$TMP/bin:$PATH" SLURM_JOB_ID=4242
  run T 1 -s train.steps=400 -s checkpoint.every=0 -s checkpoint.requeue=true
  echo $? >"$TMP/T.rc" ) &
wait_logged_step "$TMP/T/logs" 2
pkill -TERM -f "^$SHARDTRAIN train .*checkpoint.requeue=true .*sigmark\.ini" || diag "pkill found no rank"
wait
CFG=
check "SIGTERM: exit 3 with a checkpoint" \
    sh -c "test \"\$(cat '$TMP/T.rc')\" = 3 && grep -q 'rank 0: SIGTERM received' '$TMP/T.err' && test -s '$TMP/T/ckpt/latest'"
check "checkpoint.requeue: rank 0 ran scontrol requeue \$SLURM_JOB_ID" \
    test "$(cat "$TMP/scontrol.args" 2>/dev/null)" = "requeue 4242"

# ---- 6. a crash between file writes -----------------------------------------
export SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT=4
run X 4
xrc=$?
unset SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT
check "the injected crash stops the run (exit $xrc)" test "$xrc" -ne 0
check "crash: latest still names step 2, no step 4, the partial write left aside" \
    test "$(cat "$TMP/X/ckpt/latest")" = step_00000002 -a ! -e "$TMP/X/ckpt/step_00000004" \
    -a -d "$TMP/X/ckpt/.tmp-step_00000004"
run X 4
check "crash: auto resumes from step 2" grep -q "resumed from .*step_00000002 at step 2" "$TMP/X.out"
# X's log holds the crashed run's lines, then the resumed run's: the last of each step
if same_metrics X A --after 2 --last --steps 3-6 &&
    cmp -s "$TMP/A/ckpt/final/model.safetensors" "$TMP/X/ckpt/final/model.safetensors"
then ok "crash: the resumed run equals the uninterrupted one"
else not_ok "crash: the resumed run equals the uninterrupted one"; fi
check "crash: the leftover temporary directory is removed by the next save" \
    test ! -e "$TMP/X/ckpt/.tmp-step_00000004"

# ---- 6b. a full disk part-way through a shard file --------------------------
# The last rank's file of step 4 gets ENOSPC: one error line naming it, every
# rank stops with 1, and nothing of step 4 is left to hold the space.
SHARDTRAIN_TEST_CHECKPOINT_FULL_AT=4 run Y 4
yrc=$?
check "full disk: the run stops with exit status 1 (got $yrc)" test "$yrc" = 1
check "full disk: one error line, naming the last shard's file and ENOSPC" \
    sh -c "test \"\$(grep -c '^shardtrain: error:' '$TMP/Y.err')\" = 1 &&
        grep -q '^shardtrain: error: .*/\.tmp-step_00000004/shard_00003-of-00004\.bin: cannot write checkpoint file: No space left on device' '$TMP/Y.err'"
check "full disk: latest still names step 2, and no step 4 or partial directory is left" \
    test "$(cat "$TMP/Y/ckpt/latest")" = step_00000002 -a ! -e "$TMP/Y/ckpt/step_00000004" \
    -a "$(ls -A "$TMP/Y/ckpt" | tr '\n' ' ')" = "latest step_00000002 "
run Y 4
check "full disk: auto resumes from step 2" grep -q "resumed from .*step_00000002 at step 2" "$TMP/Y.out"
check "full disk: the resumed run's final weights equal the uninterrupted run's" \
    cmp -s "$TMP/A/ckpt/final/model.safetensors" "$TMP/Y/ckpt/final/model.safetensors"

# A run repeated over a checkpoint directory replaces its step directories;
# when the rename into place fails, the old step_00000004 is put back.
mkdir -p "$TMP/Z" && cp -r "$TMP/A/ckpt" "$TMP/Z/ckpt"
SHARDTRAIN_TEST_CHECKPOINT_FULL_AT=4:rename run Z 4 \
    -s checkpoint.resume="$TMP/Z/ckpt/step_00000002"
zrc=$?
check "full disk at the rename: exit status 1 (got $zrc), one error line" \
    sh -c "test $zrc = 1 && test \"\$(grep -c '^shardtrain: error:' '$TMP/Z.err')\" = 1 &&
        grep -q 'step_00000004: cannot rename checkpoint into place: No space left on device' '$TMP/Z.err'"
check "full disk at the rename: the step directory it replaced is back, as it was, and nothing else" \
    sh -c "cmp -s '$TMP/A/ckpt/step_00000004/manifest.json' '$TMP/Z/ckpt/step_00000004/manifest.json' &&
        test \"\$(cat '$TMP/Z/ckpt/latest')\" = step_00000006 &&
        test \"\$(ls -A '$TMP/Z/ckpt' | tr '\n' ' ')\" = 'final latest step_00000002 step_00000004 step_00000006 '"

# ---- 7. export --------------------------------------------------------------
"$SHARDTRAIN" check $gpt2 "$TMP/base.ini" >"$TMP/gpt2.check"
# The export's llama: the base at the defaults of seed, lr, warmup and log.every
llama="-s model.arch=llama -s train.micro_batch=2 -s train.global_batch=4 -s train.steps=2 \
    -s train.seed=1337 -s optim.lr=3e-4 -s optim.warmup_steps=0 -s log.every=10 -s checkpoint.every=2"
"$SHARDTRAIN" check $llama "$TMP/base.ini" >"$TMP/llama.check"
sets=$llama
run L 2
sets=$gpt2
# compare_export CKPT_RUN OUT CHECK_FILE: every tensor equal, config.json right
compare_export() {
    "$PY" - "$TMP/$1/ckpt/final/model.safetensors" "$2" "$3" <<'EOF2'
import json, struct, sys
import numpy as np
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__", None)
    out = {}
    for k, v in hdr.items():
        assert v["dtype"] == "F32", k
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4").reshape(v["shape"])
    return out
ref, got = load(sys.argv[1]), load(sys.argv[2] + "/model.safetensors")
assert ref.keys() == got.keys(), (sorted(ref), sorted(got))
for k in ref:
    assert ref[k].shape == got[k].shape and np.array_equal(ref[k], got[k]), k
# the resolved config, as `shardtrain check` prints it
cfg = {}
for line in open(sys.argv[3]):
    if "=" in line and not line.startswith("["):
        k, v = line.split(";")[0].split("=", 1)
        cfg.setdefault(k.strip(), v.strip())
c = json.load(open(sys.argv[2] + "/config.json"))
I = lambda k: int(cfg[k])
tied = cfg["tie_embeddings"] == "true"
if cfg["arch"] == "gpt2":
    want = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": I("d_model"),
            "n_layer": I("n_layer"), "n_head": I("n_head"), "n_positions": I("seq_len"),
            "vocab_size": I("vocab_size"), "tie_word_embeddings": tied}
    eps = "layer_norm_epsilon"
else:
    want = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "hidden_size": I("d_model"), "intermediate_size": I("d_ff"),
            "num_hidden_layers": I("n_layer"), "num_attention_heads": I("n_head"),
            "num_key_value_heads": I("n_kv_head"), "max_position_embeddings": I("seq_len"),
            "vocab_size": I("vocab_size"), "tie_word_embeddings": tied,
            "torch_dtype": "float32"}
    eps = "rms_norm_eps"
    assert abs(c["rope_theta"] - float(cfg["rope_theta"])) <= 1e-9 * float(cfg["rope_theta"])
for k, v in want.items():
    assert c.get(k) == v, (k, c.get(k), v)
assert abs(c[eps] - float(cfg["norm_eps"])) <= 1e-12, (c[eps], cfg["norm_eps"])
print("# %d tensors equal; config.json checked" % len(ref))
EOF2
}
"$SHARDTRAIN" export "$TMP/A/ckpt" "$TMP/exA" >"$TMP/exA.out" 2>&1
check "export of checkpoint.dir (its latest, step 6) succeeds" grep -q "step 6" "$TMP/exA.out"
check "export gpt2: every tensor equals the final weights; config.json" \
    compare_export A "$TMP/exA" "$TMP/gpt2.check"
"$SHARDTRAIN" export "$TMP/R8/ckpt/step_00000006" "$TMP/ex8" >/dev/null 2>&1
check "export of a hybrid 2x4 checkpoint" compare_export R8 "$TMP/ex8" "$TMP/gpt2.check"
"$SHARDTRAIN" export "$TMP/L/ckpt/step_00000002" "$TMP/exL" >/dev/null 2>&1
check "export llama: every tensor equals the final weights; config.json" \
    compare_export L "$TMP/exL" "$TMP/llama.check"
expect_export_error() { # DESC PATTERN ARGS...
    d=$1 pat=$2
    shift 2
    "$SHARDTRAIN" export "$@" >/dev/null 2>"$TMP/exerr"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/exerr")" -eq 1 ] && grep -q -- "$pat" "$TMP/exerr"; then ok "$d"
    else not_ok "$d (exit $rc)"; diag "$(cat "$TMP/exerr")"; fi
}
expect_export_error "export of a corrupt checkpoint: exit 2 naming the file" \
    "shard_00002-of-00004.bin: checksum mismatch" "$TMP/flip/step_00000006" "$TMP/exF"
expect_export_error "export of nothing: exit 2" "no such checkpoint" "$TMP/nowhere" "$TMP/exN"
expect_export_error "export without OUT_DIR: exit 2" "missing arguments" "$TMP/A/ckpt"
