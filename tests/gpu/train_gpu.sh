#!/bin/sh
# Training on a GPU against the CPU backend, the numerical reference (the
# acceptance checks of the CUDA backend): run by `make check-gpu` and by
# bench/gpu.sh, on a machine with one CUDA GPU.  TAP output.
#
#   fp32: CUDA and CPU losses within 1e-4 relative at every step, and the
#         first step's gradient norm (every gradient in one number) too;
#   bf16: within 2e-2;
#   a 200-step run of the tiny model: loss curves within 1% at every
#         logged step;
#   two ranks sharing the one GPU with parallel.backend = mpi (collectives
#         staged through the host) give the one-rank result;
#   compute-sanitizer memcheck, racecheck, synccheck and initcheck on a
#         short run report no error (last: the slowest).
#
# The CUDA attention kernels take head widths 64 and 128, so the models
# here have 64-wide heads (see base below).  Needs SHARDTRAIN (the binary, or a wrapper that sets up
# its environment), python3, and for the two-rank check an mpirun on PATH;
# COMPUTE_SANITIZER names compute-sanitizer when it is not on PATH.
. "$top_srcdir/tests/lib.sh"
require command -v python3
OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export OMP_NUM_THREADS

if ! nvidia-smi -L >/dev/null 2>&1; then
    not_ok "no GPU: nvidia-smi -L failed (these checks need one CUDA GPU)"
    exit 1
fi
ok "a GPU is visible: $(nvidia-smi -L 2>/dev/null | head -n 1)"

prepare_test_data

# base ARCH MODEL_LINES: a 20-step config of ARCH with the given shape
base() {
    cat >"$TMP/$1.ini" <<EOF
[model]
arch = $1
$2
seq_len = 64
[data]
train = $TMP/data/sh_train_*.bin
[train]
micro_batch = 4
global_batch = 4
steps = 20
seed = 5
[log]
every = 1
EOF
}
# GPT-2: the tiny preset with one 64-wide head; Llama: two 64-wide query
# heads sharing one key/value head (grouped-query attention).
base gpt2 "preset = tiny
n_head = 1"
base llama "n_layer = 2
d_model = 128
n_head = 2
n_kv_head = 1"

# run NAME NP DEVICE ARGS...: train into $TMP/NAME; the exit status
run() {
    _n=$1 _np=$2 _dev=$3
    shift 3
    ranks "$_np" 900 "$SHARDTRAIN" train -s train.device="$_dev" -s log.dir="$TMP/$_n/logs" \
        -s checkpoint.dir="$TMP/$_n/ckpt" "$@" >"$TMP/$_n.out" 2>"$TMP/$_n.err"
}

# close NAME_A NAME_B KEY TOL [LAST]: KEY (loss, grad_norm) of every step
# logged by both runs (or only step 1 when LAST is "first") agrees within
# TOL relative; prints the worst difference.
close() {
    python3 - "$TMP/$1/logs/metrics.jsonl" "$TMP/$2/logs/metrics.jsonl" "$3" "$4" "${5:-all}" <<'EOF'
import json, sys
def rows(p):
    out = {}
    for line in open(p):
        r = json.loads(line)
        if sys.argv[3] in r and "step" in r:
            out[r["step"]] = r[sys.argv[3]]
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
steps = sorted(set(a) & set(b))
if sys.argv[5] == "first":
    steps = steps[:1]
assert steps, "no common steps"
worst = max(abs(a[s] - b[s]) / max(abs(b[s]), 1e-30) for s in steps)
print("%d steps, worst relative difference %.3g" % (len(steps), worst))
sys.exit(0 if worst <= float(sys.argv[4]) else 1)
EOF
}

# on_gpu NAME: the run's identity line says it computed on cuda:N
on_gpu() { grep -q "device cuda:[0-9]" "$TMP/$1.err"; }

for arch in gpt2 llama; do
    for prec in fp32 bf16; do
        tol=1e-4
        [ "$prec" = bf16 ] && tol=2e-2
        run "cpu-$arch-$prec" 1 cpu -s train.precision="$prec" "$TMP/$arch.ini"
        check "$arch $prec: CPU run completes" test $? -eq 0
        run "gpu-$arch-$prec" 1 cuda -s train.precision="$prec" "$TMP/$arch.ini"
        st=$?
        check "$arch $prec: CUDA run completes ($st)" test "$st" -eq 0
        [ "$st" -eq 0 ] || diag "$(tail -n 5 "$TMP/gpu-$arch-$prec.err")"
        check "$arch $prec: it computed on the GPU" on_gpu "gpu-$arch-$prec"
        if r=$(close "gpu-$arch-$prec" "cpu-$arch-$prec" loss "$tol"); then
            ok "$arch $prec: losses match the CPU within $tol ($r)"
        else
            not_ok "$arch $prec: losses match the CPU within $tol ($r)"
        fi
        if r=$(close "gpu-$arch-$prec" "cpu-$arch-$prec" grad_norm "$tol" first); then
            ok "$arch $prec: first gradient norm matches the CPU within $tol ($r)"
        else
            not_ok "$arch $prec: first gradient norm matches the CPU within $tol ($r)"
        fi
    done
done

# The 200-step curves, bf16 on both sides (the CPU emulates bf16 storage).
run cpu-long 1 cpu -s train.precision=bf16 -s train.steps=200 -s log.every=10 "$TMP/gpt2.ini"
check "200 steps on the CPU complete" test $? -eq 0
run gpu-long 1 cuda -s train.precision=bf16 -s train.steps=200 -s log.every=10 "$TMP/gpt2.ini"
check "200 steps on the GPU complete" test $? -eq 0
if r=$(close gpu-long cpu-long loss 0.01); then
    ok "200 steps: loss curves within 1% at every logged step ($r)"
else
    not_ok "200 steps: loss curves within 1% at every logged step ($r)"
fi

# Two ranks on the one GPU, host-staged collectives.
if command -v mpirun >/dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    run gpu-1rank 1 cuda -s parallel.backend=mpi -s train.global_batch=8 "$TMP/gpt2.ini"
    check "one rank, backend mpi: completes" test $? -eq 0
    run gpu-2ranks 2 cuda -s parallel.backend=mpi -s train.global_batch=8 \
        -s parallel.strategy=full_shard "$TMP/gpt2.ini"
    st=$?
    check "two ranks sharing the GPU, backend mpi, full_shard: completes ($st)" test "$st" -eq 0
    [ "$st" -eq 0 ] || diag "$(tail -n 5 "$TMP/gpu-2ranks.err")"
    if r=$(close gpu-2ranks gpu-1rank loss 1e-5); then
        ok "two ranks match one rank within 1e-5 ($r)"
    else
        not_ok "two ranks match one rank within 1e-5 ($r)"
    fi
else
    not_ok "no mpirun on PATH for the two-rank check (bench/bundle.sh carries one)"
fi

# compute-sanitizer: a short run must report no error under each tool.
# Last, because they are the slowest: when bench/gpu.sh's time limit
# stops this script, the cheaper checks above have already reported.
# memcheck (out-of-bounds and misaligned accesses, 3 steps); racecheck
# (shared-memory hazards between a block's threads: what the emulation's
# reversed thread order only samples), synccheck (barriers used wrongly)
# and initcheck (a read of device memory never written: the allocations
# are no longer zeroed), each one step, as they are 10 to 100 times slower.
# The race check of streams (tests/gpu/emu/races.c) has no tool here: none
# of these follows ordering between streams.
cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
for tool in memcheck racecheck synccheck initcheck; do
    if [ ! -x "$cs" ]; then
        not_ok "compute-sanitizer $tool: not found (set COMPUTE_SANITIZER)"
        continue
    fi
    steps=1
    [ "$tool" = memcheck ] && steps=3
    "$cs" --tool "$tool" --error-exitcode 9 "$SHARDTRAIN" train -s train.device=cuda \
        -s train.steps=$steps -s log.dir="$TMP/cs-$tool/logs" \
        -s checkpoint.dir="$TMP/cs-$tool/ckpt" -s train.precision=bf16 "$TMP/llama.ini" \
        >"$TMP/cs-$tool.out" 2>&1
    st=$?
    # racecheck sums up in hazards, the others in errors.
    if [ "$st" -eq 0 ] && grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" \
        "$TMP/cs-$tool.out"; then
        ok "compute-sanitizer $tool: 0 errors"
    else
        not_ok "compute-sanitizer $tool: 0 errors (exit $st)"
        diag "$(grep -m 20 -E 'ERROR|Invalid|error|hazard|Race|Uninitialized' "$TMP/cs-$tool.out")"
    fi
done
