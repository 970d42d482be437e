#!/bin/sh
# The FSDP engine on real MPI ranks (mpirun --oversubscribe, tiny models,
# up to 8 ranks on 2 cores): every strategy at several world sizes, with and
# without accumulation and no_sync, reproduces the one-rank run's losses and
# final weights; sharding really divides the state; bad layouts stop before
# any work.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1   # 8 ranks on 2 cores: no thread oversubscription on top

prepare_test_data

write_base_ini "$TMP/base.ini"
# The base with 24 sequences a step (1 to 8 ranks split them), seed 11.
sets="-s train.micro_batch=1 -s train.global_batch=24 -s train.seed=11"

# run NAME NP ARCH [-s ...]: train the base (ARCH gpt2, llama, or gpt2u:
# gpt2 with untied embeddings) on NP ranks (1 = no launcher) into $TMP/NAME
run() {
    name=$1 np=$2 arch=$3
    shift 3
    case $arch in
    llama) set -- -s model.arch=llama "$@" ;;
    gpt2u) set -- -s model.tie_embeddings=false "$@" ;;
    esac
    set -- train $sets -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        "$TMP/base.ini"
    ranks "$np" 300 "$SHARDTRAIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# compare A B TOL: losses (4 steps) and final weights of two runs within
# TOL relative
compare() { compare_runs "$TMP/$1" "$TMP/$2" "$3" 4; }

# equiv NAME NP ARCH [-s ...]: run and compare with the one-rank reference
equiv() {
    name=$1 np=$2 arch=$3
    shift 3
    if run "$name" "$np" "$arch" "$@"; then
        if compare "$name" "ref_$arch" "${TOL:-1e-5}"; then ok "$name: matches 1 rank (np $np $*)"
        else not_ok "$name: matches 1 rank (np $np $*)"; fi
    else
        not_ok "$name: runs (np $np $*)"
        diag "$(tail -n 5 "$TMP/$name.err")"
    fi
}

run ref_gpt2 1 gpt2 -s train.micro_batch=4 -s parallel.strategy=no_shard
check "one-rank gpt2 reference" test -s "$TMP/ref_gpt2/ckpt/final/model.safetensors"
run ref_llama 1 llama -s train.micro_batch=4
check "one-rank llama reference" test -s "$TMP/ref_llama/ckpt/final/model.safetensors"
run ref_gpt2u 1 gpt2u -s train.micro_batch=4
check "one-rank untied gpt2 reference" test -s "$TMP/ref_gpt2u/ckpt/final/model.safetensors"

fs="-s parallel.strategy=full_shard"
for np in 2 3 4 6 8; do
    equiv "full_np$np" $np gpt2 $fs -s train.micro_batch=$((24 / np))
done
equiv full_np2_accum 2 gpt2 $fs -s train.micro_batch=3
equiv full_np4_accum 4 gpt2 $fs -s train.micro_batch=1
equiv full_np4_nosync 4 gpt2 $fs -s train.micro_batch=1 -s parallel.no_sync=true
equiv full_np4_prefetch0 4 gpt2 $fs -s parallel.prefetch=0 -s train.micro_batch=2
equiv full_np4_prefetch3 4 gpt2 $fs -s parallel.prefetch=3 -s train.micro_batch=2
equiv full_np3_untied 3 gpt2u $fs -s train.micro_batch=2
# Collectives polled during compute (runtime/progress.h): on one node only
# when SHARDTRAIN_TEST_MPI_POLL=1 forces it.  Polling may move when a
# collective completes, never what it computes: the same bits.
if SHARDTRAIN_TEST_MPI_POLL=1 run full_np4_poll 4 gpt2 $fs -s train.micro_batch=2 -s parallel.prefetch=3; then
    check "full_shard np 4 with collectives polled during compute: the same losses and weights, bit for bit" \
        compare_runs --exact "$TMP/full_np4_poll" "$TMP/full_np4_prefetch3" 4
else
    not_ok "full_shard np 4 with collectives polled during compute: runs"
    diag "$(tail -n 5 "$TMP/full_np4_poll.err")"
fi
sg="-s parallel.strategy=shard_grad_op"
for np in 2 3 4 6 8; do
    equiv "zero2_np$np" $np gpt2 $sg -s train.micro_batch=$((24 / np))
done
equiv zero2_np3_accum 3 gpt2 $sg -s train.micro_batch=2
equiv zero2_np4_nosync 4 gpt2 $sg -s train.micro_batch=2 -s parallel.no_sync=true
ns="-s parallel.strategy=no_shard"
for np in 2 3 4 6 8; do
    equiv "ddp_np$np" $np gpt2 $ns -s train.micro_batch=$((24 / np))
done
equiv ddp_np3_accum 3 gpt2 $ns -s train.micro_batch=2
equiv ddp_np2_nosync 2 gpt2 $ns -s train.micro_batch=2 -s parallel.no_sync=true
hy="-s parallel.strategy=hybrid_shard"
equiv hybrid_2x2 4 gpt2 $hy -s parallel.shard_size=2 -s train.micro_batch=2
equiv hybrid_2x4 8 gpt2 $hy -s parallel.shard_size=4 -s train.micro_batch=3
equiv hybrid_4x2 8 gpt2 $hy -s parallel.shard_size=2 -s train.micro_batch=1
equiv hybrid_3x2 6 gpt2 $hy -s parallel.shard_size=2 -s train.micro_batch=2
equiv hybrid_2x3 6 gpt2 $hy -s parallel.shard_size=3 -s train.micro_batch=4
equiv hybrid_2x2_nosync 4 gpt2 $hy -s parallel.shard_size=2 -s train.micro_batch=1 -s parallel.no_sync=true
equiv llama_full_np3 3 llama $fs -s train.micro_batch=2
equiv llama_hybrid_2x2 4 llama $hy -s parallel.shard_size=2 -s train.micro_batch=3
equiv llama_ddp_np2 2 llama $ns -s train.micro_batch=4

# Mixed precision.  bf16 compute: every rank rounds the same gathered
# values, but fp32 gradient sums in another order can flip a bf16 rounding
# of the updated parameters, so the tolerance is 1e-3.  bf16 gradient
# reduction rounds every partial sum: 2e-2.
run ref_bf16 1 gpt2 -s train.micro_batch=4 -s train.precision=bf16
if run full_bf16 4 gpt2 $fs -s train.micro_batch=2 -s train.precision=bf16 &&
   compare full_bf16 ref_bf16 1e-3; then ok "bf16 full_shard np 4 matches 1-rank bf16 within 1e-3"
else not_ok "bf16 full_shard np 4 matches 1-rank bf16 within 1e-3"; fi
if run full_rbf16 4 gpt2 $fs -s train.micro_batch=2 -s parallel.reduce_dtype=bf16 &&
   compare full_rbf16 ref_gpt2 2e-2; then ok "reduce_dtype = bf16 np 4 matches fp32 1-rank within 2e-2"
else not_ok "reduce_dtype = bf16 np 4 matches fp32 1-rank within 2e-2"; fi
if compare full_rbf16 ref_gpt2 1e-6 >/dev/null; then not_ok "reduce_dtype = bf16 really reduces in bf16 (differs from fp32 beyond 1e-6)"
else ok "reduce_dtype = bf16 really reduces in bf16 (differs from fp32 beyond 1e-6)"; fi

# Sharding is real.  field NAME KEY: last logged value of KEY on rank 0.
field() {
    python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "\"loss\"" in l]
print(rows[-1][sys.argv[2]])' "$TMP/$1/logs/metrics.jsonl" "$2"
}
state_ddp=$(field ddp_np4 state_bytes 2>/dev/null || echo 0)
[ "$state_ddp" != 0 ] || { run ddp_np4 4 gpt2 $ns -s train.micro_batch=6; state_ddp=$(field ddp_np4 state_bytes); }
state_fs=$(field full_np4_accum state_bytes)
# padding: each of the 4 units rounds up by < 4 elements, x 16 bytes per element
check "full_shard np 4: state_bytes $state_fs <= no_shard $state_ddp / 4 + padding" \
    test $((state_fs * 4)) -le $((state_ddp + 4 * 4 * 16 * 4))
# peak: state + activations of one micro-batch + gathered units in flight.
# Largest unit of tiny gpt2 is a block: 4C + 3C^2 + 3C + C^2 + C + 2CF + F + C
# floats with C = 64, F = 256.
unit_bytes=$(( 4 * (4*64 + 3*64*64 + 3*64 + 64*64 + 64 + 2*64*256 + 256 + 64) ))
run ref_mb1 1 gpt2 $ns -s train.micro_batch=1
acts=$(( $(field ref_mb1 peak_bytes) - $(field ref_mb1 state_bytes) ))
peak_fs=$(field full_np4_accum peak_bytes)
bound=$(( state_fs + acts + (1 + 1 + 3) * unit_bytes ))
check "full_shard np 4 (prefetch 1): peak $peak_fs <= state + activations + 5 units = $bound" test "$peak_fs" -le "$bound"
check "full_shard np 4: peak $peak_fs < no_shard np 4 peak" test "$peak_fs" -lt "$(field ddp_np4 peak_bytes)"

# Activation checkpointing on a deeper model lowers peak_bytes.
run deep 2 gpt2 $fs -s model.n_layer=8 -s train.micro_batch=4 -s train.steps=1 2>/dev/null
run deep_ck 2 gpt2 $fs -s model.n_layer=8 -s train.micro_batch=4 -s train.steps=1 -s train.activation_checkpointing=full
check "activation checkpointing lowers peak_bytes on 8 layers ($(field deep peak_bytes) -> $(field deep_ck peak_bytes))" \
    test "$(field deep_ck peak_bytes)" -lt "$(field deep peak_bytes)"
check "activation checkpointing keeps the losses" compare_runs --exact --only metrics "$TMP/deep" "$TMP/deep_ck"

# The final weights stream out one unit at a time: rank 0 makes each unit
# in one buffer as the file reaches it (a full run gathers it from the
# shards, the other ranks keeping nothing; a LoRA run reads its base again
# from model.init and merges its adapters, all gathered to rank 0 first),
# so no rank ever holds the whole model.  The summary's peak_bytes_per_rank
# is each rank's high-water mark of tracked memory over the whole run, the
# final weights included.  32 small blocks (C = 128, F = 512: about 6.3
# million parameters, 25 MB in fp32) on 4 ranks with activation
# checkpointing: training holds each rank's state (16 bytes a parameter /
# 4, or for LoRA the base in the compute dtype / 4), a few 0.8 MB units
# and one block's activations, so rank 0's peak may pass the others' by
# one unit's buffer (the largest unit, summed from the file's own header)
# and the adapters at most, where a rank keeping the whole model would
# stand 25 MB above them (each check fails with the engine that did).
final_peaks() { # NAME [-s ...]
    _n=$1
    shift
    run "$_n" 4 gpt2 $fs -s model.n_layer=32 -s model.d_model=128 -s model.d_ff=512 \
        -s model.n_head=2 -s train.activation_checkpointing=full -s train.micro_batch=1 \
        -s train.global_batch=4 -s train.steps=1 -s checkpoint.every=1 "$@"
    _d=$TMP/$_n/ckpt/final
    if [ -s "$_d/model.safetensors" ] &&
            python3 - "$TMP/$_n/logs/summary.json" "$TMP/$_n.out" "$TMP/$_n.err" \
            "$_d/model.safetensors" "$_d/adapter/adapter_model.safetensors" \
            >"$TMP/$_n.why" 2>&1 <<'EOP'
import json, os, re, struct, sys
def header(path):
    with open(path, "rb") as f:
        return json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
def nbytes(t):
    return t["data_offsets"][1] - t["data_offsets"][0]
peaks = json.load(open(sys.argv[1]))["peak_bytes_per_rank"]
n = int(re.search(r"gpt2, (\d+) parameters", open(sys.argv[2]).read() + open(sys.argv[3]).read())[1])
units = {}
for name, t in header(sys.argv[4]).items():
    if name != "__metadata__":
        b = re.match(r"transformer\.h\.(\d+)\.", name)
        key = int(b[1]) if b else ("head" if "ln_f" in name else "embed")
        units[key] = units.get(key, 0) + nbytes(t)
adapters = 0
if os.path.exists(sys.argv[5]):
    adapters = sum(nbytes(t) for k, t in header(sys.argv[5]).items() if k != "__metadata__")
full, largest = 4 * n, max(units.values())
print(f"rank 0 {peaks[0]}, others at most {max(peaks[1:])}, largest unit {largest} bytes, "
      f"adapters {adapters}, {len(units)} units, the fp32 model {full} bytes")
sys.exit(0 if len(peaks) == 4 and len(units) == 34 and sum(units.values()) >= full * 0.99 and
         full > 20e6 and peaks[0] - max(peaks[1:]) <= largest + adapters else 1)
EOP
    then ok "final weights on 4 ranks${*:+ ($*)}: no rank holds more than one unit ($(cat "$TMP/$_n.why"))"
    else
        not_ok "final weights on 4 ranks${*:+ ($*)}: no rank holds more than one unit"
        diag "$(cat "$TMP/$_n.why"; tail -n 3 "$TMP/$_n.err")"
    fi
}
final_peaks final_peaks
final_peaks final_peaks_lora -s lora.rank=4

# `shardtrain export` streams the same way: one unit read from the shards
# (or, LoRA, one unit's base with its adapters merged) at a time.  Its
# peak resident memory exporting the 32-block model must stay within half
# the fp32 model (12.5 MB) of exporting the same width with 2 blocks (an
# export holding the whole model adds all 25 MB); ASan's quarantine, which
# keeps freed buffers resident, is off for the measurement.  The export of
# the step-1 checkpoint equals the run's final weights byte for byte.
run exp_small 1 gpt2 -s model.n_layer=2 -s model.d_model=128 -s model.d_ff=512 \
    -s model.n_head=2 -s train.micro_batch=4 -s train.global_batch=4 -s train.steps=1 \
    -s checkpoint.every=1
export_rss() { # NAME: the export's peak resident KiB, or -1 when it failed
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=0" python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r == 0 else -1)' \
        "$SHARDTRAIN" export "$TMP/$1/ckpt" "$TMP/$1-hf"
}
small_kib=$(export_rss exp_small)
model_kib=$(( $(wc -c <"$TMP/final_peaks/ckpt/final/model.safetensors") / 1024 ))
for n in final_peaks final_peaks_lora; do
    kib=$(export_rss $n)
    if [ "$small_kib" -gt 0 ] && [ "$kib" -gt 0 ] && [ $((kib - small_kib)) -lt $((model_kib / 2)) ] &&
            cmp -s "$TMP/$n-hf/model.safetensors" "$TMP/$n/ckpt/final/model.safetensors"; then
        ok "$n: export streams (peak $kib KiB against $small_kib KiB for 2 blocks; model $model_kib KiB) and equals the final weights"
    else
        not_ok "$n: export streams (peak $kib KiB against $small_kib KiB for 2 blocks; model $model_kib KiB) and equals the final weights"
    fi
done

# Only rank 0 writes the final weights, so only it sees that write fail
# (here as on a full disk, moving model.safetensors into checkpoint.dir/final:
# SHARDTRAIN_TEST_STAGE_FULL_AT; a file in final's place is now refused at
# start).  Every rank still takes part in each unit's gather, and the ranks
# agree on the status before the teardown's collectives: all 4 end with
# exit status 1 and one error line, instead of ranks 1-3 waiting for rank 0
# until the hang guard (which is what the engine did).
export SHARDTRAIN_TEST_STAGE_FULL_AT=model.safetensors
run final_fails 4 gpt2 $fs -s train.micro_batch=1 -s train.global_batch=4 -s train.steps=1
st=$?
unset SHARDTRAIN_TEST_STAGE_FULL_AT
if [ $st -eq 1 ] && [ "$(grep -c '^shardtrain: error:' "$TMP/final_fails.err")" -eq 1 ] &&
        grep -q '^shardtrain: error: .*/ckpt/final/model.safetensors: cannot move the new file into place: No space left on device' "$TMP/final_fails.err"; then
    ok "final weights' write failing on rank 0: every rank exits 1, one error line"
else
    not_ok "final weights' write failing on rank 0: every rank exits 1, one error line (exit $st)"
    diag "$(grep -v '^shardtrain: rank' "$TMP/final_fails.err" | head -n 5)"
fi

# Bad layouts: exit 2 with a clear message on every rank, before any work.
bad() { # DESC PATTERN NP ARGS...
    d=$1 pat=$2 np=$3
    shift 3
    timeout 120 mpirun --oversubscribe -np "$np" "$SHARDTRAIN" train $sets "$@" "$TMP/base.ini" >"$TMP/bad.out" 2>"$TMP/bad.err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "$pat" "$TMP/bad.err" && ! grep -q '^step ' "$TMP/bad.out"; then ok "$d"
    else not_ok "$d (exit $rc)"; diag "$(head -n 5 "$TMP/bad.err")"; fi
}
bad "shard_size 3 does not divide 4 ranks" "shard_size" 4 $hy -s parallel.shard_size=3
bad "shard_size 8 larger than 4 ranks" "shard_size" 4 $hy -s parallel.shard_size=8
bad "global_batch 24 not divisible by micro_batch 1 x 5 ranks" "global_batch" 5 -s train.micro_batch=1
bad "backend = nccl without a GPU" "nccl" 2 -s parallel.backend=nccl
