#!/bin/sh
# One-GPU benchmark: shardtrain against a PyTorch reference (docs/gpu.md).
#
#   sh bench/gpu.sh            # from the repository root
#
# Prints the environment, builds shardtrain with CUDA, runs the GPU kernel
# tests (make check-gpu-kernels) and tests/gpu/train_gpu.sh,
# times `shardtrain train` (train.device = cuda, bf16) for gpt2-124m and
# llama-1b at the largest micro-batch that fits, runs bench/torch_train.py
# for the same models, and writes results.md (the table), results.json (all
# raw numbers) and one log per step to $OUT, else bench/out/.  Every step has
# a time limit and the whole run stays inside GPU_BENCH_BUDGET_S (default
# 560 s, under a 10-minute command limit).  A step that fails puts
# "failed: <reason>" in its cells, never a number.
#
# Environment (all optional):
#   OUT                    output directory (default bench/out)
#   GPU_BENCH_BUDGET_S     total seconds for the whole run (560)
#   GPU_BENCH_MODELS       models to time ("gpt2-124m llama-1b")
#   GPU_BENCH_STEPS        shardtrain steps per run; the first
#                          GPU_BENCH_SKIP are warm-up and not counted (30, 5)
#   GPU_BENCH_TORCH_STEPS  torch timed steps and warm-up steps (20, 5)
#   GPU_BENCH_MAX_MB       largest micro-batch tried (64)
#   PEAK_TFLOPS            dense bf16 peak for MFU (default by GPU name:
#                          989 for H100 SXM and H200)
#   MPI_HOME               Open MPI unpacked in a user folder (bin/, lib/):
#                          added to PATH and LD_LIBRARY_PATH, OPAL_PREFIX set
#                          (default: shared/openmpi when it exists and no
#                          mpicc is on PATH)
#   TORCH_PYTHON           Python for torch_train.py (python3)
#   CONFIGURE_FLAGS        extra ./configure arguments
#   GPU_BENCH_COMMIT       the commit to report when the copy has no .git
#   GPU_BENCH_TRAIN_CHECK=0  skip tests/gpu/train_gpu.sh (training on the GPU
#                          against the CPU backend; 240 s at most)
#   GPU_BENCH_NO_BUILD=1   use the shardtrain already built here, or the
#                          binary SHARDTRAIN names
#   GPU_BENCH_DEVICE=cpu   run both trainers on the CPU (checks this script
#                          on a machine without a GPU; with GPU_BENCH_MODELS=tiny)
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
OUTDIR=${OUT:-$ROOT/bench/out}
mkdir -p "$OUTDIR" || exit 1
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bench.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
START=$(date +%s)
BUDGET=${GPU_BENCH_BUDGET_S:-560}
MODELS=${GPU_BENCH_MODELS:-gpt2-124m llama-1b}
ST_STEPS=${GPU_BENCH_STEPS:-30}
ST_SKIP=${GPU_BENCH_SKIP:-5}
TORCH_STEPS=${GPU_BENCH_TORCH_STEPS:-20}
TORCH_WARMUP=${GPU_BENCH_TORCH_WARMUP:-5}
MAX_MB=${GPU_BENCH_MAX_MB:-64}
# The first Python that imports torch, else python3 (torch_train.py then
# reports that torch is missing).
PY=${TORCH_PYTHON:-}
if [ -z "$PY" ]; then
    for p in python3 /usr/bin/python3; do
        "$p" -c 'import torch' >/dev/null 2>&1 && { PY=$p; break; }
    done
    PY=${PY:-python3}
fi
SUMMARY=$OUTDIR/summary.log
: >"$SUMMARY"

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# limit WANT RESERVE: seconds a step may take: WANT, less when the budget
# minus what later steps need (RESERVE) is smaller; 0 when nothing is left.
limit() {
    l=$(($(left) - $2))
    [ "$l" -gt "$1" ] && l=$1
    [ "$l" -lt 10 ] && l=0
    echo "$l"
}
# record FILE KEY=VALUE...: one flat JSON object of strings and numbers
# (values that look numeric are written as numbers).
record() {
    f=$1; shift
    "$PY_ANY" - "$f" "$@" <<'EOF'
import json, sys
out = {}
for kv in sys.argv[2:]:
    k, _, v = kv.partition("=")
    try:
        out[k] = int(v) if v.lstrip("-").isdigit() else float(v) if v not in ("nan", "inf", "-inf") else v
    except ValueError:
        out[k] = v
json.dump(out, open(sys.argv[1], "w"), sort_keys=True)
EOF
}
# first_error LOG: the line that says why a step failed.
first_error() {
    line=$(grep -m1 -i -E 'error|fatal|out of memory|not found|cannot|refused|failed' "$1" 2>/dev/null)
    [ -n "$line" ] || line=$(tail -n 1 "$1" 2>/dev/null)
    # shellcheck disable=SC1003
    # Drop the "shardtrain: error: FILE:LINE: " prefix and the hint.
    printf '%s' "$line" | sed -e 's/^shardtrain: error: [^ ]*: //' -e 's/; hint: .*//' |
        tr -d '\r"\\' | tr '\t|' '  ' | cut -c1-160
}

DEV=${GPU_BENCH_DEVICE:-cuda}
ST=./shardtrain
[ "${GPU_BENCH_NO_BUILD:-0}" = 1 ] && ST=${SHARDTRAIN:-./shardtrain}
# On a host without Open MPI (the lent GPU machine) nothing can be built:
# a bundle made here by bench/bundle.sh and carried along stands in for the
# build (GPU_BENCH_BUNDLE, or bundle/ when there is no mpicc).  Its programs
# run through a wrapper that sources env.sh, so the bundle's libraries never
# reach PyTorch's process.
BUNDLE=${GPU_BENCH_BUNDLE:-}
if [ -z "$BUNDLE" ] && ! command -v mpicc >/dev/null 2>&1 && [ -f "$ROOT/bundle/env.sh" ]; then
    BUNDLE=$ROOT/bundle
fi
if [ -n "$BUNDLE" ]; then
    BUNDLE=$(cd "$BUNDLE" && pwd) || exit 1
    # bundled PROGRAM ARGS...: run one of the bundle's programs
    # shellcheck disable=SC2016 # expanded by the wrapper, not here
    printf '#!/bin/sh\nST_BUNDLE=%s; export ST_BUNDLE\n. "$ST_BUNDLE/env.sh"\nexec "$ST_BUNDLE/usr/bin/${0##*/}" "$@"\n' \
        "$BUNDLE" >"$WORK/bundled"
    # The bundle's GPU test programs: every one bench/bundle.sh carried.
    GPU_TEST_PROGRAMS=
    for p in "$BUNDLE"/usr/bin/test_*; do
        [ -f "$p" ] && GPU_TEST_PROGRAMS="$GPU_TEST_PROGRAMS ${p##*/}"
    done
    for p in shardtrain mpirun $GPU_TEST_PROGRAMS; do
        ln -sf bundled "$WORK/$p"
    done
    chmod +x "$WORK/bundled"
    ST=$WORK/shardtrain
    GPU_BENCH_NO_BUILD=1
fi
PY_ANY=
for p in "$PY" python3; do
    "$p" -c 'import json, statistics' >/dev/null 2>&1 && { PY_ANY=$p; break; }
done

# ---- environment --------------------------------------------------------
# An Open MPI unpacked beside the checkout (shared/openmpi) is used when
# MPI_HOME is not set and no mpicc is on PATH.
if [ -z "${MPI_HOME:-}" ] && ! command -v mpicc >/dev/null 2>&1 && [ -x shared/openmpi/bin/mpicc ]; then
    MPI_HOME=$ROOT/shared/openmpi
fi
if [ -n "${MPI_HOME:-}" ]; then
    PATH=$MPI_HOME/bin:$PATH
    LD_LIBRARY_PATH=$MPI_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    OPAL_PREFIX=$MPI_HOME
    export PATH LD_LIBRARY_PATH OPAL_PREFIX
fi
ENVF=$OUTDIR/environment.txt
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -n) $(uname -sr)"
    if c=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null); then
        echo "commit: $c"
        echo "tree: $(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l | tr -d ' ') changed file(s)"
    else
        echo "commit: ${GPU_BENCH_COMMIT:-unknown (no git here; pass GPU_BENCH_COMMIT)}"
        echo "tree: no git here (commit as given by GPU_BENCH_COMMIT)"
    fi
    echo "cpus: $(nproc 2>/dev/null)"
    echo "nvcc: $( (nvcc --version || "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version) 2>/dev/null | grep -m1 release || echo 'not found')"
    echo "mpicc: $(command -v mpicc || echo 'not found')"
    echo "python: $( [ -n "$PY_ANY" ] && "$PY_ANY" --version 2>&1 || echo 'not found')"
    echo "torch: $("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -n 1)"
    echo "--- nvidia-smi"
    nvidia-smi 2>&1 || echo "nvidia-smi failed"
    echo "--- nvidia-smi --query-gpu"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
} >"$ENVF" 2>&1
cat "$ENVF"
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
CUDA_VER=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
MEM_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 1)
if [ -n "${PEAK_TFLOPS:-}" ]; then
    PEAK=$PEAK_TFLOPS PEAK_SRC="PEAK_TFLOPS"
else
    case $GPU_NAME in
        *H200*) PEAK=989 PEAK_SRC="H200: dense bf16, same as H100 SXM" ;;
        *"H100 PCIe"*) PEAK=756 PEAK_SRC="H100 PCIe: dense bf16" ;;
        *"H100 NVL"*) PEAK=835 PEAK_SRC="H100 NVL: dense bf16" ;;
        *H100*) PEAK=989 PEAK_SRC="H100 SXM: dense bf16" ;;
        *) PEAK=989 PEAK_SRC="unknown GPU '${GPU_NAME:-none}': H100 SXM's 989 assumed" ;;
    esac
fi
say "gpu: ${GPU_NAME:-none}; driver ${DRIVER:-?}; CUDA ${CUDA_VER:-?}; peak $PEAK TFLOP/s ($PEAK_SRC)"

# ---- build ---------------------------------------------------------------
# Later steps' minimum needs: the torch runs (about 150 s each).
TORCH_RESERVE=300
BUILD_STATUS=ok
if [ "${GPU_BENCH_NO_BUILD:-0}" = 1 ]; then
    [ -x "$ST" ] || BUILD_STATUS="failed: GPU_BENCH_NO_BUILD=1 but no $ST"
else
    t=$(limit 200 "$TORCH_RESERVE")
    # shellcheck disable=SC2016 # the sh -c script expands its own variables
    if [ "$t" -eq 0 ]; then
        BUILD_STATUS="failed: no time left"
    elif ! command -v mpicc >/dev/null 2>&1; then
        BUILD_STATUS="failed: mpicc not found (no Open MPI; set MPI_HOME, see docs/gpu.md)"
    elif [ ! -x ./configure ] && ! command -v autoreconf >/dev/null 2>&1; then
        BUILD_STATUS="failed: no ./configure and no autoreconf"
    elif ! CONFIGURE_FLAGS=${CONFIGURE_FLAGS:-} timeout -k 10 "$t" sh -c '
            { [ -x ./configure ] || autoreconf -fi; } &&
            ./configure $CONFIGURE_FLAGS && make -j"$(nproc)"' >"$OUTDIR/build.log" 2>&1; then
        BUILD_STATUS="failed: build: $(first_error "$OUTDIR/build.log")"
    fi
    sed -n '/configuration$/,$p' "$OUTDIR/build.log" 2>/dev/null | tee -a "$SUMMARY"
fi
say "build: $BUILD_STATUS"
if grep -q '^#define HAVE_CUDA 1' st_build.h 2>/dev/null; then CUDA_BUILT=yes; else CUDA_BUILT=no; fi
# A bundle's binary was built elsewhere: it has CUDA if it links the runtime.
if [ -n "$BUNDLE" ]; then
    # (the dynamic section names it; grep -a where there is no objdump)
    if { objdump -p "$BUNDLE/usr/bin/shardtrain" 2>/dev/null || grep -a -o 'libcudart\.so[.0-9]*' \
            "$BUNDLE/usr/bin/shardtrain" | sed 's/^/NEEDED /'; } | grep -q 'NEEDED *libcudart'; then
        CUDA_BUILT=yes
    else
        CUDA_BUILT=no
    fi
fi

CHECK_GPU_STATUS="failed: not run (build $BUILD_STATUS)"
if [ "$BUILD_STATUS" = ok ]; then
    t=$(limit 90 "$TORCH_RESERVE")
    if [ "$t" -eq 0 ]; then
        CHECK_GPU_STATUS="failed: no time left"
    elif [ -n "$BUNDLE" ]; then
        # The bundle's copies of the GPU test programs (make check-gpu's).
        # Each program's output in its own log too, so that the status
        # names every program that failed and the first one's first error.
        CHECK_GPU_STATUS=ok
        n=0 bad='' why=''
        for p in $GPU_TEST_PROGRAMS; do
            [ -x "$BUNDLE/usr/bin/$p" ] || continue
            n=$((n + 1))
            timeout -k 10 "$t" "$WORK/$p" >"$WORK/$p.log" 2>&1 || {
                [ -n "$why" ] || why=$(first_error "$WORK/$p.log")
                bad="${bad:+$bad, }$p"
            }
            { echo "== $p"; cat "$WORK/$p.log"; } >>"$OUTDIR/check-gpu.log"
        done
        [ -z "$bad" ] || CHECK_GPU_STATUS="failed: $bad: $why"
        [ "$n" -gt 0 ] || CHECK_GPU_STATUS="failed: the bundle has no GPU test programs (build them with make check before bench/bundle.sh)"
    elif ! make -n check-gpu-kernels >/dev/null 2>&1; then
        CHECK_GPU_STATUS="failed: no check-gpu-kernels target in this build"
    elif timeout -k 10 "$t" make check-gpu-kernels >"$OUTDIR/check-gpu.log" 2>&1; then
        CHECK_GPU_STATUS=ok
    else
        CHECK_GPU_STATUS="failed: make check-gpu-kernels: $(first_error "$OUTDIR/check-gpu.log")"
    fi
fi
say "check-gpu: $CHECK_GPU_STATUS"

# Training on the GPU against the CPU backend (tests/gpu/train_gpu.sh): its
# TAP lines go to train-gpu.log; the status says how many failed.
TRAIN_GPU_STATUS="failed: not run (build $BUILD_STATUS)"
[ "${GPU_BENCH_TRAIN_CHECK:-1}" = 1 ] || TRAIN_GPU_STATUS="not run (GPU_BENCH_TRAIN_CHECK=0)"
if [ "$BUILD_STATUS" = ok ] && [ "${GPU_BENCH_TRAIN_CHECK:-1}" = 1 ]; then
    t=$(limit 240 "$TORCH_RESERVE")
    if [ "$t" -eq 0 ]; then
        TRAIN_GPU_STATUS="failed: no time left"
    else
        PATH=${BUNDLE:+$WORK:}$PATH top_srcdir=$ROOT SHARDTRAIN=$ST timeout -k 10 "$t" \
            sh tests/gpu/train_gpu.sh >"$OUTDIR/train-gpu.log" 2>&1
        nok=$(grep -c '^ok' "$OUTDIR/train-gpu.log")
        nbad=$(grep -c '^not ok' "$OUTDIR/train-gpu.log")
        if [ "$nbad" -eq 0 ] && grep -q "^1\.\.$nok\$" "$OUTDIR/train-gpu.log"; then
            TRAIN_GPU_STATUS="ok ($nok checks)"
        else
            TRAIN_GPU_STATUS="failed: $nbad of $((nok + nbad)) checks failed or it stopped early (train-gpu.log)"
        fi
    fi
fi
say "train on GPU vs CPU: $TRAIN_GPU_STATUS"

# ---- shardtrain -----------------------------------------------------------
# st_train MODEL: micro-batch from a start value (estimate's largest for
# this GPU's memory, rounded down to a power of two, at most MAX_MB) halved
# on out-of-memory; tokens/s, MFU and step time are medians over the steps
# after ST_SKIP, from log.dir/metrics.jsonl.
DATA_READY=
st_train() {
    m=$1 rec=$OUTDIR/shardtrain-$m.json
    if [ "$BUILD_STATUS" != ok ]; then
        record "$rec" model="$m" status="failed: build did not succeed" detail="$BUILD_STATUS"
        return
    fi
    if [ -z "$DATA_READY" ]; then
        if "$ST" prepare etc/data/tinyshakespeare.txt "$WORK/data/sh" >"$OUTDIR/prepare.log" 2>&1; then
            DATA_READY=ok
        else
            DATA_READY="failed: prepare: $(first_error "$OUTDIR/prepare.log")"
        fi
    fi
    if [ "$DATA_READY" != ok ]; then
        record "$rec" model="$m" status="$DATA_READY"
        return
    fi
    cfg=$WORK/$m.ini
    cat >"$cfg" <<EOF
[model]
preset = $m
[data]
train = $WORK/data/sh_train_*.bin
[train]
device = $DEV
precision = bf16
steps = $ST_STEPS
[optim]
warmup_steps = 2
[log]
every = 1
peak_tflops = $PEAK
EOF
    start_mb=${MAX_MB}
    est=$("$ST" estimate --nodes 1 --tasks-per-node 1 --device-mem "$(( ${MEM_MIB:-81559} / 1024 ))" \
            --json "$cfg" 2>/dev/null |
          "$PY_ANY" -c 'import json,sys; print(json.load(sys.stdin)["no_shard"]["none"]["max_micro_batch"])' 2>/dev/null)
    if [ -n "$est" ] && [ "$est" -ge 1 ] 2>/dev/null; then
        p=1
        while [ $((p * 2)) -le "$est" ]; do p=$((p * 2)); done
        [ "$p" -lt "$start_mb" ] && start_mb=$p
    fi
    mb=$start_mb status='' tries=''
    while :; do
        t=$(limit 150 "$TORCH_RESERVE")
        if [ "$t" -eq 0 ]; then status="failed: no time left (micro-batch $mb)"; break; fi
        run=$WORK/run-$m-$mb
        log=$OUTDIR/shardtrain-$m-mb$mb.log
        tries="$tries $mb"
        timeout -k 10 "$t" "$ST" train -s train.micro_batch="$mb" -s train.global_batch="$mb" \
            -s log.dir="$run/logs" -s checkpoint.dir="$run/ckpt" "$cfg" >"$log" 2>&1
        rc=$?
        [ -f "$run/logs/metrics.jsonl" ] && cp "$run/logs/metrics.jsonl" "$OUTDIR/shardtrain-$m-mb$mb.metrics.jsonl"
        rm -rf "$run/ckpt"
        if [ "$rc" -eq 0 ]; then status=ok; break; fi
        if grep -q -i -E 'out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY' "$log" && [ "$mb" -gt 1 ]; then
            mb=$((mb / 2)); continue
        fi
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            status="failed: timed out after ${t}s at micro-batch $mb"
        else
            status="failed: exit $rc: $(first_error "$log")"
        fi
        break
    done
    if [ "$status" != ok ]; then
        record "$rec" model="$m" status="$status" micro_batches_tried="${tries# }"
        return
    fi
    "$PY_ANY" - "$OUTDIR/shardtrain-$m-mb$mb.metrics.jsonl" "$ST_SKIP" "$rec" "$m" "$mb" "$log" <<'EOF'
import json, re, statistics, sys
path, skip, rec, model, mb, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
rows = [json.loads(l) for l in open(path) if '"tokens_per_s"' in l]
rows = [r for r in rows if r["step"] > skip]
out = {"model": model, "micro_batch": mb, "steps_counted": len(rows)}
params = re.search(r"(\d+) parameters", open(log).read())
if params:
    out["params"] = int(params.group(1))
if not rows:
    out["status"] = "failed: no metrics after the warm-up steps"
else:
    med = lambda k: statistics.median(r[k] for r in rows)
    out.update(status="ok", tokens_per_s=med("tokens_per_s"), step_time_ms=med("time_ms"),
               peak_bytes=max(r["peak_bytes"] for r in rows))
    mfus = [r["mfu"] for r in rows if r.get("mfu") is not None]
    out["mfu"] = statistics.median(mfus) if mfus else None
json.dump(out, open(rec, "w"), sort_keys=True)
EOF
}

# ---- PyTorch ----------------------------------------------------------------
torch_train() {
    m=$1 rec=$OUTDIR/torch-$m.json log=$OUTDIR/torch-$m.log
    t=$(limit 200 0)
    if [ "$t" -eq 0 ]; then
        record "$rec" model="$m" status="failed: no time left"
        return
    fi
    mbarg=auto
    [ "$DEV" = cuda ] || mbarg=$MAX_MB
    timeout -k 10 "$t" "$PY" bench/torch_train.py --model "$m" --device "$DEV" --micro-batch "$mbarg" \
        --max-micro-batch "$MAX_MB" --steps "$TORCH_STEPS" --warmup "$TORCH_WARMUP" \
        --peak-tflops "$PEAK" >"$log" 2>&1
    rc=$?
    line=$(grep '^{' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        printf '%s\n' "$line" >"$rec"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        record "$rec" model="$m" status="failed: timed out after ${t}s"
    else
        record "$rec" model="$m" status="failed: exit $rc: $(first_error "$log")"
    fi
}

if [ -z "$PY_ANY" ]; then
    say "python3 not found: no results can be parsed"
    printf '%s\n' "# GPU benchmark" "" "failed: python3 not found on this host" >"$OUTDIR/results.md"
    exit 1
fi
for m in $MODELS; do
    st_train "$m"
    say "shardtrain $m: $(cat "$OUTDIR/shardtrain-$m.json")"
done
for m in $MODELS; do
    torch_train "$m"
    say "torch $m: $(cat "$OUTDIR/torch-$m.json")"
done

# ---- report -------------------------------------------------------------------
"$PY_ANY" - "$OUTDIR" "$MODELS" "$ENVF" "$GPU_NAME" "$DRIVER" "$CUDA_VER" "$PEAK" "$PEAK_SRC" \
    "$BUILD_STATUS" "$CHECK_GPU_STATUS" "${CUDA_BUILT:-unknown}" "$(( $(date +%s) - START ))" <<'EOF'
import json, os, sys
(out, models, envf, gpu, driver, cuda, peak, peak_src, build, check_gpu, cuda_built,
 elapsed) = sys.argv[1:]
models = models.split()
env = dict(l.split(": ", 1) for l in open(envf).read().splitlines()
           if ": " in l and not l.startswith(("-", " ", "|", "+")) and l.split(": ", 1)[0].isidentifier())

def load(kind, m):
    try:
        return json.load(open(os.path.join(out, f"{kind}-{m}.json")))
    except Exception as e:  # noqa: BLE001
        return {"status": f"failed: no result ({type(e).__name__})"}

def cell(r, key, fmt):
    if r.get("status") != "ok":
        s = str(r.get("status", "failed: unknown"))
        if s == "failed":
            s = "failed: " + str(r.get("reason", "unknown"))
        return s.replace("|", "/")
    v = r.get(key)
    if v is None:
        return "n/a (no peak)" if key == "mfu" else "n/a"
    return fmt(v)

rows, raw = [], {}
for m in models:
    st, tr = load("shardtrain", m), load("torch", m)
    raw[m] = {"shardtrain": st, "torch": tr}
    ok = st.get("status") == "ok" and tr.get("status") == "ok"
    ratio = f"{st['tokens_per_s'] / tr['tokens_per_s']:.2f}" if ok else "n/a (a side failed)"
    mb = f"{st.get('micro_batch', '-')} / {tr.get('micro_batch', '-')}"
    rows.append(f"| {m} | {mb} | {cell(st, 'tokens_per_s', lambda v: f'{v:,.0f}')} | "
                f"{cell(st, 'mfu', lambda v: f'{100 * v:.1f}%')} | "
                f"{cell(tr, 'tokens_per_s', lambda v: f'{v:,.0f}')} | "
                f"{cell(tr, 'mfu', lambda v: f'{100 * v:.1f}%')} | {ratio} |")
md = [
    "# GPU benchmark: shardtrain vs PyTorch, one GPU",
    "",
    f"- Date: {env.get('date', '?')}",
    f"- GPU: {gpu or 'none found'}; driver {driver or '?'}; CUDA (driver) {cuda or '?'}; nvcc {env.get('nvcc', '?')}",
    f"- Commit: {env.get('commit', '?')} ({env.get('tree', '?')})",
    f"- torch: {env.get('torch', '?')}",
    f"- Peak for MFU: {peak} TFLOP/s ({peak_src})",
    f"- Build: {build}; CUDA toolkit found by configure: {cuda_built}",
    f"- make check-gpu: {check_gpu}",
    f"- Whole run: {elapsed} s",
    "",
    "| model | micro-batch (shardtrain / torch) | shardtrain tok/s | shardtrain MFU | torch tok/s | torch MFU | ratio (shardtrain / torch tok/s) |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    *rows,
    "",
    "tok/s: tokens per second per GPU, median over the timed steps (shardtrain: steps after "
    "the warm-up, from metrics.jsonl; torch: CUDA events over the timed steps).  "
    "MFU = tok/s x FLOPs per token / peak; FLOPs per token = 6 x matrix parameters "
    "(head once) + 12 x n_layer x d_model x seq_len, as shardtrain counts them.",
]
open(os.path.join(out, "results.md"), "w").write("\n".join(md) + "\n")
json.dump({"environment": env, "gpu": gpu, "driver": driver, "cuda": cuda, "peak_tflops": float(peak),
           "peak_source": peak_src, "build": build, "check_gpu": check_gpu, "elapsed_s": int(elapsed),
           "results": raw}, open(os.path.join(out, "results.json"), "w"), indent=1, sort_keys=True)
print("\n".join(md))
EOF
echo "results in $OUTDIR (results.md, results.json, logs)"
