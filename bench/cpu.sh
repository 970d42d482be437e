#!/bin/sh
# CPU benchmark: shardtrain's CPU backend against PyTorch and llm.c.
#
#   sh bench/cpu.sh                          # from the repository root
#   LLMC_DIR=$HOME/llm.c sh bench/cpu.sh     # with llm.c's train_gpt2.c too
#
# Trains the same GPT-2 with every program: fp32, AdamW (lr LR held
# constant, betas 0.9/0.95, eps 1e-8, weight decay 0.1), the same thread
# count, and the same tokens (every byte of the Shakespeare text as a token
# id, in a 50,257-token vocabulary, written once by bench/llmc_inputs.py in
# llm.c's token format, which all three read).  Shapes: small (4 layers,
# d_model 256, 4 heads) and gpt2-124m (12 layers, d_model 768, 12 heads),
# both at T = 256, batch 4.  The programs:
#
#   shardtrain  ./shardtrain train (or $SHARDTRAIN), explicit [model] keys,
#               train.device = cpu, precision fp32, optim.schedule =
#               constant; step times from log.dir/metrics.jsonl (time_ms)
#   PyTorch     bench/torch_train.py --device cpu --precision fp32
#               --no-compile --threads N --tokens FILE --log-steps (eager;
#               torch.set_num_threads(N))
#   llm.c       train_gpt2.c of the checkout LLMC_DIR names, built by its
#               own Makefile (make train_gpt2) from a copy in a scratch
#               folder outside the repository, the copy edited: B and T set
#               to the shape's, the loop run for STEPS steps, its periodic
#               validation and sampling switched off (they would run between
#               timed steps), gpt2_update given the same AdamW settings.  The
#               edits are saved as OUT/llmc-SHAPE.diff.  It starts from a
#               random GPT-2 checkpoint that bench/llmc_inputs.py writes in
#               llm.c's format.  Without LLMC_DIR its cells say
#               "not run (set LLMC_DIR)".
#
# The programs alternate in rounds (shardtrain, PyTorch, llm.c, shardtrain,
# ...), at each THREADS setting: 1 is one thread pinned to one CPU (taskset,
# OMP_NUM_THREADS=1), all is every CPU this process may use.  A program's
# tokens/s is the median over rounds of each run's median over its steps
# after the first SKIP (B x T / step time); a ratio is the median over
# rounds of the ratio of the two runs of the same round, with its range.
# Every run must start within LOSS_TOL of ln(50257) and end at least
# LOSS_DROP lower than it started, so that none is silently doing less work;
# a program that fails this gets "failed: loss" in its cells, never a number.
#
# MPI: the same shapes as MPI_RANKS ranks of full_shard (mpirun, one thread
# each, micro-batch BATCH / MPI_RANKS) against one rank with MPI_RANKS
# threads, alternated the same way.
#
# Writes OUT/results.md (the tables, with date, machine, commit and command),
# OUT/results.json (every run's numbers) and one log per run in OUT/runs/;
# with BENCH_CPU_WRITE_DOCS=1 it also puts results.md in docs/benchmarks.md
# as the section "## CPU backend against PyTorch and llm.c", replacing that
# section when it is there, keeping the rest of the file.
#
# Long: a gpt2-124m step takes from half a minute to two on two cores,
# depending on the program (llm.c took 56 s on a 2-core EPYC), longer on
# one, so the default run takes hours; SHAPES=small STEPS=4 ROUNDS=1
# THREADS=1 TABLES=cpu checks the setup in a minute or two.
#
# Environment (all optional):
#   OUT            output directory (default bench/out/cpu); this and the
#                  other paths are relative to the repository root
#   SHAPES         shapes to run ("small gpt2-124m")
#   ROUNDS         rounds of alternation (3)
#   STEPS          training steps per run (10); the first SKIP (2) are
#                  warm-up and not timed
#   THREADS        thread settings ("1 all"): 1 = one thread pinned,
#                  N = N threads pinned to the first N CPUs, all = every CPU
#   BATCH, SEQ     sequences per step and their length (4, 256)
#   LR             learning rate of every program (3e-4)
#   LOSS_TOL       largest distance of the first loss from ln(50257) (0.5)
#   LOSS_DROP      least fall of the loss from the first step to the last
#                  (0.3)
#   LLMC_DIR       a checkout of karpathy/llm.c (train_gpt2.c, llmc/,
#                  Makefile); unset: llm.c is not run
#   TORCH_PYTHON   Python with torch (default /usr/bin/python3 when it
#                  imports torch, else python3)
#   SHARDTRAIN     the shardtrain binary (./shardtrain)
#   TABLES         which tables to measure ("cpu mpi")
#   MPI_RANKS      ranks of the MPI table (2); 0 skips the MPI table
#   MPIRUN         the launcher and its options ("mpirun --oversubscribe
#                  --report-bindings": Open MPI binds 2 ranks to a core each);
#                  as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) are set
#   RUN_TIMEOUT    seconds one run may take (3600)
#   TEXT           the text whose bytes are the tokens (default
#                  ../shared/data/tinyshakespeare.txt beside the checkout,
#                  else etc/data/tinyshakespeare.txt)
#   BENCH_CPU_WRITE_DOCS=1  write the section into docs/benchmarks.md
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
OUTDIR=${OUT:-$ROOT/bench/out/cpu}
mkdir -p "$OUTDIR/runs" || exit 1
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cpu-bench.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
SHAPES=${SHAPES:-small gpt2-124m}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
SKIP=${SKIP:-2}
THREADS=${THREADS:-1 all}
BATCH=${BATCH:-4}
SEQ=${SEQ:-256}
LR=${LR:-3e-4}
LOSS_TOL=${LOSS_TOL:-0.5}
LOSS_DROP=${LOSS_DROP:-0.3}
LLMC_DIR=${LLMC_DIR:-}
MPI_RANKS=${MPI_RANKS:-2}
TABLES=${TABLES:-cpu mpi}
MPIRUN=${MPIRUN:-mpirun --oversubscribe --report-bindings}
RUN_TIMEOUT=${RUN_TIMEOUT:-3600}
ST=${SHARDTRAIN:-./shardtrain}
VOCAB=50257
RUNS=$OUTDIR/runs.tsv
: >"$RUNS"
rm -f "$OUTDIR"/runs/*

PY=${TORCH_PYTHON:-}
if [ -z "$PY" ]; then
    for p in /usr/bin/python3 python3; do
        "$p" -c 'import torch' >/dev/null 2>&1 && { PY=$p; break; }
    done
    PY=${PY:-python3}
fi
PY_ANY=
for p in "$PY" python3 /usr/bin/python3; do
    "$p" -c 'import json, statistics' >/dev/null 2>&1 && { PY_ANY=$p; break; }
done
# The Python that writes llm.c's checkpoints needs numpy.
NP_PY=
for p in "$PY" python3 /usr/bin/python3; do
    "$p" -c 'import numpy' >/dev/null 2>&1 && { NP_PY=$p; break; }
done
if [ -z "$PY_ANY" ]; then
    echo "bench/cpu.sh: no python3: nothing can be measured" >&2
    exit 1
fi
if [ -z "${TEXT:-}" ]; then
    for f in "$ROOT/../shared/data/tinyshakespeare.txt" "$ROOT/etc/data/tinyshakespeare.txt"; do
        [ -f "$f" ] && { TEXT=$f; break; }
    done
fi
case $SKIP in *[!0-9]*|'') echo "SKIP must be a number" >&2; exit 2 ;; esac
case $STEPS in *[!0-9]*|'') echo "STEPS must be a number" >&2; exit 2 ;; esac
if [ "$STEPS" -le "$SKIP" ]; then
    echo "bench/cpu.sh: STEPS ($STEPS) must exceed SKIP ($SKIP)" >&2
    exit 2
fi

# shape NAME: sets L H C F (layers, heads, width, MLP width) or fails.
shape() {
    case $1 in
        small) L=4 H=4 C=256 F=1024 ;;
        gpt2-124m) L=12 H=12 C=768 F=3072 ;;
        *) return 1 ;;
    esac
}
for s in $SHAPES; do
    shape "$s" || { echo "bench/cpu.sh: unknown shape '$s' (small, gpt2-124m)" >&2; exit 2; }
done
NCPU=$("$PY_ANY" -c 'import os; print(len(os.sched_getaffinity(0)))' 2>/dev/null || nproc)
# nthreads SETTING: the thread count of a THREADS entry
nthreads() {
    case $1 in
        all) echo "$NCPU" ;;
        *[!0-9]*|'') return 1 ;;
        *) echo "$1" ;;
    esac
}
for t in $THREADS; do
    if ! n=$(nthreads "$t") || [ "$n" -lt 1 ]; then
        echo "bench/cpu.sh: THREADS entry '$t' is not a number or 'all'" >&2
        exit 2
    fi
    [ "$n" -le "$NCPU" ] || echo "bench/cpu.sh: warning: $n threads on $NCPU CPUs" >&2
done
# cpus N: the first N CPUs this process may run on, as taskset wants them
cpus() {
    "$PY_ANY" -c 'import os, sys; print(",".join(map(str, sorted(os.sched_getaffinity(0))[:int(sys.argv[1])])))' "$1"
}
PIN=taskset
command -v taskset >/dev/null 2>&1 || PIN=
# pinned N COMMAND...: COMMAND with OMP_NUM_THREADS=N on the first N CPUs,
# under the run time limit
pinned() {
    n=$1; shift
    if [ -n "$PIN" ]; then
        env OMP_NUM_THREADS="$n" timeout -k 10 "$RUN_TIMEOUT" taskset -c "$(cpus "$n")" "$@"
    else
        env OMP_NUM_THREADS="$n" timeout -k 10 "$RUN_TIMEOUT" "$@"
    fi
}
# record TABLE SHAPE THREADS ROUND PROGRAM KIND RC FILE: one run, for the report
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RUNS"
    if [ "$7" = 0 ]; then
        echo "   $5: done (${8#"$OUTDIR"/})"
    else
        echo "   $5: exit $7: $(first_error "$8") (${8#"$OUTDIR"/})"
    fi
}
# first_error LOG: the line that says why a run failed
first_error() {
    line=$(grep -m1 -i -E 'error|fatal|not found|cannot|refused|failed|killed' "$1" 2>/dev/null)
    [ -n "$line" ] || line=$(tail -n 1 "$1" 2>/dev/null)
    # shellcheck disable=SC1003 # a backslash among the characters deleted
    printf '%s' "$line" | sed -e 's/^shardtrain: error: [^ ]*: //' -e 's/; hint: .*//' |
        tr -d '\r"\\' | tr '\t|' '  ' | cut -c1-160
}

# ---- environment -------------------------------------------------------------
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l | tr -d ' ')
MODEL_NAME=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
CPU_FLAGS=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -x -E 'avx2|avx512f|fma' | tr '\n' ' ')
MEM_GIB=$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
ST_VERSION=$("$ST" --version 2>/dev/null | head -n 1)
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "not importable by $PY")
CC_VERSION=$(${CC:-cc} --version 2>/dev/null | head -n 1)
LLMC_COMMIT=
[ -n "$LLMC_DIR" ] && LLMC_COMMIT=$(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || echo "no git")
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
# The command that reproduces this run: the knobs that differ from the defaults.
CMDLINE=
for v in TABLES SHAPES ROUNDS STEPS SKIP THREADS BATCH SEQ LR MPI_RANKS; do
    eval "val=\$$v"
    case $v in
        TABLES) d="cpu mpi" ;; SHAPES) d="small gpt2-124m" ;; ROUNDS) d=3 ;; STEPS) d=10 ;; SKIP) d=2 ;;
        THREADS) d="1 all" ;; BATCH) d=4 ;; SEQ) d=256 ;; LR) d=3e-4 ;; MPI_RANKS) d=2 ;;
    esac
    # shellcheck disable=SC2154 # val is set by the eval above
    [ "$val" = "$d" ] || CMDLINE="$CMDLINE$v='$val' "
done
[ -n "$LLMC_DIR" ] && CMDLINE="${CMDLINE}LLMC_DIR=<llm.c checkout> "
CMDLINE="${CMDLINE}sh bench/cpu.sh"
{
    echo "date: $DATE"
    echo "machine: ${MODEL_NAME:-unknown CPU}, $NCPU CPUs usable, ${MEM_GIB:-?} GiB; $(uname -sr)"
    echo "cpu flags: ${CPU_FLAGS:-none of avx2 avx512f fma}"
    echo "commit: $COMMIT ($DIRTY changed tracked files)"
    echo "shardtrain: ${ST_VERSION:-not runnable} ($ST)"
    echo "torch: $TORCH_VERSION ($PY)"
    echo "cc: ${CC_VERSION:-not found}"
    echo "llm.c: ${LLMC_DIR:-not set}"
    echo "llm.c commit: ${LLMC_COMMIT:--}"
    echo "text: ${TEXT:-not found}"
    echo "command: $CMDLINE"
} | tee "$OUTDIR/environment.txt"

# ---- inputs --------------------------------------------------------------------
TOK=$WORK/tokens.bin
DATA_STATUS=ok
if [ -z "${TEXT:-}" ] || [ ! -f "$TEXT" ]; then
    DATA_STATUS="failed: no text (set TEXT)"
elif ! "$PY_ANY" bench/llmc_inputs.py tokens "$TEXT" "$TOK" >"$OUTDIR/tokens.log" 2>&1; then
    DATA_STATUS="failed: tokens: $(first_error "$OUTDIR/tokens.log")"
fi
echo "tokens: $DATA_STATUS ($(cat "$OUTDIR/tokens.log" 2>/dev/null))"
[ -x "$ST" ] || echo "shardtrain: $ST is not an executable: its cells will say so"

# llm.c: one build per shape (B and T are compiled in), from a copy of the
# checkout; a checkpoint per shape; a run folder laid out as train_gpt2
# expects (gpt2_124M.bin and dev/data/tinyshakespeare/*.bin, here links).
LLMC_STATUS="not run (set LLMC_DIR)"
if [ -n "$LLMC_DIR" ]; then
    if [ ! -f "$LLMC_DIR/train_gpt2.c" ] || [ ! -d "$LLMC_DIR/llmc" ] || [ ! -f "$LLMC_DIR/Makefile" ]; then
        LLMC_STATUS="failed: $LLMC_DIR has no train_gpt2.c, llmc/ and Makefile"
    else
        LLMC_STATUS=ok
    fi
fi
# llmc_build SHAPE: prints ok, or the reason it failed
llmc_build() {
    s=$1 b=$WORK/llmc-$1
    shape "$s"
    mkdir -p "$b/run/dev/data/tinyshakespeare" || { echo "failed: mkdir"; return; }
    if ! cp "$LLMC_DIR/train_gpt2.c" "$LLMC_DIR/Makefile" "$b/" || ! cp -R "$LLMC_DIR/llmc" "$b/"; then
        echo "failed: copying $LLMC_DIR"; return
    fi
    # The edits, each of which must apply exactly once.
    sed -e "s|^\([[:space:]]*int B = \)[0-9][0-9]*;.*|\1$BATCH; // bench: BATCH|" \
        -e "s|^\([[:space:]]*int T = \)[0-9][0-9]*;.*|\1$SEQ; // bench: SEQ|" \
        -e "s/for (int step = 0; step <= [0-9][0-9]*; step++)/for (int step = 0; step < $STEPS; step++)/" \
        -e 's|if (step % 10 == 0) {|if (0) { /* bench: no validation between steps */|' \
        -e 's|if (step > 0 \&\& step % 20 == 0) {|if (0) { /* bench: no sampling between steps */|' \
        -e "s/gpt2_update(&model, [^;]*);/gpt2_update(\\&model, ${LR}f, 0.9f, 0.95f, 1e-8f, 0.1f, step+1);/" \
        "$LLMC_DIR/train_gpt2.c" >"$b/train_gpt2.c"
    diff -u "$LLMC_DIR/train_gpt2.c" "$b/train_gpt2.c" >"$OUTDIR/llmc-$s.diff"
    for want in "int B = $BATCH;" "int T = $SEQ;" "step < $STEPS; step++" \
                "no validation between steps" "no sampling between steps" \
                "gpt2_update(&model, ${LR}f, 0.9f, 0.95f"; do
        [ "$(grep -c -F "$want" "$b/train_gpt2.c")" -eq 1 ] ||
            { echo "failed: train_gpt2.c is not the expected layout (edit '$want' did not apply once)"; return; }
    done
    if ! make -C "$b" train_gpt2 >"$OUTDIR/llmc-$s-build.log" 2>&1; then
        echo "failed: make train_gpt2: $(first_error "$OUTDIR/llmc-$s-build.log")"; return
    fi
    if ! "${NP_PY:-$PY_ANY}" bench/llmc_inputs.py checkpoint "$b/run/gpt2_124M.bin" --n-layer "$L" --n-head "$H" \
            --d-model "$C" --seq "$SEQ" --vocab "$VOCAB" >"$OUTDIR/llmc-$s-checkpoint.log" 2>&1; then
        echo "failed: checkpoint: $(first_error "$OUTDIR/llmc-$s-checkpoint.log")"; return
    fi
    ln -sf "$TOK" "$b/run/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
    ln -sf "$TOK" "$b/run/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
    echo ok
}

# ---- runs ------------------------------------------------------------------------
# st_ini SHAPE FILE: the shardtrain configuration of a shape
st_ini() {
    shape "$1"
    cat >"$2" <<EOF
[model]
arch = gpt2
n_layer = $L
n_head = $H
d_model = $C
d_ff = $F
vocab_size = $VOCAB
seq_len = $SEQ
[data]
train = $TOK
[train]
device = cpu
precision = fp32
micro_batch = $BATCH
global_batch = $BATCH
steps = $STEPS
seed = 1337
[optim]
lr = $LR
schedule = constant
warmup_steps = 0
[log]
every = 1
tensorboard = false
plot = false
[checkpoint]
resume = never
EOF
}

# run_st TABLE SHAPE NTHREADS ROUND [RANKS]: shardtrain, alone or as RANKS
# ranks of full_shard with one thread each
run_st() {
    tab=$1 s=$2 n=$3 r=$4 np=${5:-1}
    prog=shardtrain
    [ "$tab" = mpi ] && prog="$np-ranks"
    id=$tab-$s-t$n-r$r-$prog
    log=$OUTDIR/runs/$id.log
    if [ "$DATA_STATUS" != ok ]; then
        echo "$DATA_STATUS" >"$log"; record "$tab" "$s" "$n" "$r" "$prog" st 2 "$log"; return
    fi
    d=$WORK/run/$id
    rm -rf "$d"
    set -- train -s log.dir="$d/logs" -s checkpoint.dir="$d/ckpt" -s parallel.strategy=full_shard
    if [ "$np" -gt 1 ]; then
        # shellcheck disable=SC2086 # MPIRUN is a command and its options
        env OMP_NUM_THREADS=1 timeout -k 10 "$RUN_TIMEOUT" $MPIRUN -np "$np" -x OMP_NUM_THREADS \
            "$ST" "$@" -s train.micro_batch=$((BATCH / np)) "$WORK/$s.ini" >"$log" 2>&1
    else
        pinned "$n" "$ST" "$@" "$WORK/$s.ini" >"$log" 2>&1
    fi
    rc=$?
    cp "$d/logs/metrics.jsonl" "$OUTDIR/runs/$id.metrics.jsonl" 2>/dev/null
    rm -rf "$d"
    record "$tab" "$s" "$n" "$r" "$prog" st "$rc" "$log"
}
# run_torch SHAPE NTHREADS ROUND
run_torch() {
    s=$1 n=$2 r=$3
    shape "$s"
    id=cpu-$s-t$n-r$r-pytorch
    log=$OUTDIR/runs/$id.log
    if [ "$DATA_STATUS" != ok ]; then
        echo "$DATA_STATUS" >"$log"; record cpu "$s" "$n" "$r" pytorch torch 2 "$log"; return
    fi
    pinned "$n" "$PY" bench/torch_train.py --model gpt2-124m --n-layer "$L" --n-head "$H" \
        --d-model "$C" --d-ff "$F" --vocab "$VOCAB" --seq "$SEQ" --device cpu --precision fp32 \
        --no-compile --threads "$n" --tokens "$TOK" --micro-batch "$BATCH" --warmup 0 \
        --steps "$STEPS" --lr "$LR" --log-steps >"$log" 2>&1
    record cpu "$s" "$n" "$r" pytorch torch "$?" "$log"
}
# run_llmc SHAPE NTHREADS ROUND
run_llmc() {
    s=$1 n=$2 r=$3
    id=cpu-$s-t$n-r$r-llmc
    log=$OUTDIR/runs/$id.log
    eval "st=\${LLMC_BUILD_$(echo "$s" | tr -c 'a-z0-9\n' '_')}"
    # shellcheck disable=SC2154 # st is set by the eval above
    if [ "$st" != ok ]; then
        echo "$st" >"$log"; record cpu "$s" "$n" "$r" llmc llmc 2 "$log"; return
    fi
    (cd "$WORK/llmc-$s/run" && pinned "$n" ../train_gpt2) >"$log" 2>&1
    record cpu "$s" "$n" "$r" llmc llmc "$?" "$log"
}

for s in $SHAPES; do
    st_ini "$s" "$WORK/$s.ini"
    v=LLMC_BUILD_$(echo "$s" | tr -c 'a-z0-9\n' '_')
    if [ "$LLMC_STATUS" = ok ]; then
        res=$(llmc_build "$s")
        echo "llm.c build for $s: $res"
    else
        res=$LLMC_STATUS
    fi
    eval "$v=\$res"
done

case " $TABLES " in *" cpu "*) ;; *) THREADS= ;; esac
for t in $THREADS; do
    n=$(nthreads "$t")
    for s in $SHAPES; do
        r=1
        while [ "$r" -le "$ROUNDS" ]; do
            echo "== $s, $n thread(s), round $r/$ROUNDS: shardtrain, PyTorch, llm.c ($(date -u +%H:%M:%S))"
            run_st cpu "$s" "$n" "$r"
            run_torch "$s" "$n" "$r"
            run_llmc "$s" "$n" "$r"
            r=$((r + 1))
        done
    done
done

MPI_STATUS=ok
case " $TABLES " in *" mpi "*) ;; *) MPI_RANKS=0 ;; esac
if [ "$MPI_RANKS" -gt 1 ] 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
    fi
    if ! command -v "${MPIRUN%% *}" >/dev/null 2>&1; then
        MPI_STATUS="failed: ${MPIRUN%% *} not found"
    elif [ $((BATCH % MPI_RANKS)) -ne 0 ]; then
        MPI_STATUS="failed: BATCH $BATCH is not a multiple of MPI_RANKS $MPI_RANKS"
    fi
    for s in $SHAPES; do
        [ "$MPI_STATUS" = ok ] || break
        r=1
        while [ "$r" -le "$ROUNDS" ]; do
            echo "== MPI $s, round $r/$ROUNDS: 1 rank x $MPI_RANKS threads, $MPI_RANKS ranks x 1 thread ($(date -u +%H:%M:%S))"
            run_st mpi "$s" "$MPI_RANKS" "$r" 1
            run_st mpi "$s" 1 "$r" "$MPI_RANKS"
            r=$((r + 1))
        done
    done
else
    MPI_STATUS="not run (MPI_RANKS=$MPI_RANKS)"
fi

# ---- report ------------------------------------------------------------------------
"$PY_ANY" - "$OUTDIR" "$RUNS" "$SHAPES" "$THREADS" "$NCPU" "$BATCH" "$SEQ" "$SKIP" "$VOCAB" \
    "$LOSS_TOL" "$LOSS_DROP" "$MPI_RANKS" "$MPI_STATUS" "$LLMC_STATUS" "${BENCH_CPU_WRITE_DOCS:-0}" \
    "$ROOT/docs/benchmarks.md" <<'EOF'
import json, math, os, re, statistics, sys, textwrap
(out, runs_tsv, shapes, threads, ncpu, B, T, skip, V, tol, drop, mpi_ranks, mpi_status,
 llmc_status, write_docs, docs) = sys.argv[1:]
shapes, threads = shapes.split(), threads.split()
B, T, skip, V, ncpu, mpi_ranks = int(B), int(T), int(skip), int(V), int(ncpu), int(mpi_ranks)
tol, drop = float(tol), float(drop)
env = dict(l.rstrip("\n").split(": ", 1) for l in open(os.path.join(out, "environment.txt")) if ": " in l)
ln_v = math.log(V)
STEP = re.compile(r"^step (\d+): (?:train )?loss (\S+) \(took ([0-9.]+) ms\)")

def steps_of(kind, log):
    """[(loss, ms)] of every step, in order."""
    if kind == "st":
        path = log[:-len(".log")] + ".metrics.jsonl"
        rows = []
        if os.path.exists(path):
            for line in open(path):
                d = json.loads(line)
                if "loss" in d and "time_ms" in d:
                    rows.append((d["loss"] if d["loss"] is not None else float("nan"), d["time_ms"]))
        return rows
    rows = []
    for line in open(log, errors="replace"):
        m = STEP.match(line)
        if m:
            rows.append((float(m.group(2)), float(m.group(3))))
    return rows

def why(log):
    try:
        lines = open(log, errors="replace").read().splitlines()
    except OSError:
        return "no log"
    lines = [l for l in lines if l.strip(" -") and " MCW rank " not in l]
    pat = re.compile(r"error|fatal|not found|cannot|refused|failed|killed|Traceback|Assertion", re.I)
    hit = [l for l in lines if pat.search(l)] or lines[-1:] or ["no output"]
    s = re.sub(r"^shardtrain: error: \S+: ", "", hit[0]).split("; hint:")[0]
    return s.replace("|", "/").strip()[:140]

runs = []
for line in open(runs_tsv):
    tab, shape, n, rnd, prog, kind, rc, log = line.rstrip("\n").split("\t")
    rc = int(rc)
    st = steps_of(kind, log) if rc == 0 else []
    r = dict(table=tab, shape=shape, threads=int(n), round=int(rnd), program=prog, rc=rc,
             log=os.path.relpath(log, out), steps=[list(x) for x in st])
    if rc != 0:
        reason = why(log)
        if kind == "llmc" and rc == 2 and (reason.startswith("failed") or reason.startswith("not run")):
            r["status"] = reason
        elif rc in (124, 137):
            r["status"] = "failed: timed out"
        else:
            r["status"] = f"failed: exit {rc}: {reason}"
    elif len(st) <= skip:
        r["status"] = f"failed: {len(st)} steps logged, need more than {skip}"
    else:
        first, last = st[0][0], st[-1][0]
        r["loss_first"], r["loss_last"] = first, last
        ok = (all(math.isfinite(x[0]) for x in st) and abs(first - ln_v) <= tol
              and last <= first - drop)
        r["tokens_per_s"] = statistics.median(B * T * 1000.0 / x[1] for x in st[skip:])
        r["status"] = "ok" if ok else "failed: loss"
    runs.append(r)

def group(tab, shape, n, prog):
    return sorted((r for r in runs if (r["table"], r["shape"], r["threads"], r["program"]) == (tab, shape, n, prog)),
                  key=lambda r: r["round"])

def status(rs):
    if not rs:
        return "failed: no runs"
    bad = [r["status"] for r in rs if r["status"] != "ok"]
    if not bad:
        return "ok"
    if "failed: loss" in bad:
        return "failed: loss"
    return bad[0]

def cell(rs):
    s = status(rs)
    return f"{statistics.median(r['tokens_per_s'] for r in rs):,.0f}" if s == "ok" else s

def ratio(a, b):
    if status(a) != "ok" or status(b) != "ok":
        return "n/a"
    by = {r["round"]: r for r in b}
    q = [r["tokens_per_s"] / by[r["round"]]["tokens_per_s"] for r in a if r["round"] in by]
    if not q:
        return "n/a"
    if len(q) == 1:
        return f"{q[0]:.2f}"
    return f"{statistics.median(q):.2f} ({min(q):.2f}-{max(q):.2f})"

def losses(rs):
    if not rs or any("loss_first" not in r for r in rs):
        return "-", "-"
    return (f"{statistics.median(r['loss_first'] for r in rs):.3f}",
            f"{statistics.median(r['loss_last'] for r in rs):.3f}")

def params(shape):
    for r in runs:
        if r["shape"] == shape and r["program"] in ("shardtrain", "1-ranks"):
            try:
                m = re.search(r"(\d+) parameters", open(os.path.join(out, r["log"])).read())
            except OSError:
                m = None
            if m:
                return f"{int(m.group(1)):,} parameters"
    return "parameters: see the logs"

def torch_attention():
    for r in runs:
        if r["program"] == "pytorch":
            try:
                lines = [l for l in open(os.path.join(out, r["log"])) if l.startswith("{")]
                return json.loads(lines[-1]).get("attention", "?")
            except (OSError, ValueError, IndexError):
                pass
    return "?"

SHAPE_TEXT = {"small": "small: 4 layers, d_model 256, 4 heads, d_ff 1024",
              "gpt2-124m": "gpt2-124m: 12 layers, d_model 768, 12 heads, d_ff 3072"}
nrounds = max([r["round"] for r in runs] or [0])
steps_n = max([len(r["steps"]) for r in runs] or [0])
md = ["## CPU backend against PyTorch and llm.c", "",
      f"- Date: {env.get('date', '?')}",
      f"- Machine: {env.get('machine', '?')}; {env.get('cpu flags', '').strip() or 'no avx2/avx512f/fma flags'}",
      f"- Commit: {env.get('commit', '?')}",
      f"- Programs: {env.get('shardtrain', '?')}; PyTorch {env.get('torch', '?')}, eager fp32, "
      f"{torch_attention()} attention; "
      + (f"llm.c {env.get('llm.c commit', '?')} (train_gpt2.c built by its Makefile; {env.get('cc', '?')})"
         if llmc_status == "ok" else f"llm.c {llmc_status}"),
      f"- Command: `{env.get('command', '?')}`",
      f"- Work: GPT-2 (vocab {V}, tied head), fp32, AdamW, batch {B} x {T} tokens; "
      f"{steps_n} steps a run, the first {skip} untimed; {nrounds} round(s), the programs alternating",
      "- Shapes: " + "; ".join(f"{SHAPE_TEXT[s]} ({params(s)})" for s in shapes)]
if any(r["table"] == "cpu" for r in runs):
    md += ["", "| shape | threads | shardtrain tok/s | PyTorch tok/s | llm.c tok/s | shardtrain / PyTorch | shardtrain / llm.c |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
loss_rows = []
for shape in shapes:
    for t in threads:
        n = ncpu if t == "all" else int(t)
        label = f"{n} (pinned)" if t != "all" and n < ncpu else f"{n} (all cores)"
        st, pt, lc = (group("cpu", shape, n, p) for p in ("shardtrain", "pytorch", "llmc"))
        if not st and not pt and not lc:
            continue
        lc_cell = cell(lc)
        if lc_cell.startswith("not run"):
            lc_cell = "not run (set LLMC_DIR)"
        md.append(f"| {shape} | {label} | {cell(st)} | {cell(pt)} | {lc_cell} | {ratio(st, pt)} | {ratio(st, lc)} |")
        for name, rs in (("shardtrain", st), ("PyTorch", pt), ("llm.c", lc)):
            if rs and status(rs) in ("ok", "failed: loss"):
                f, l = losses(rs)
                loss_rows.append(f"| {shape} | {n} | {name} | {f} | {l} | {status(rs)} |")
if mpi_ranks > 1:
    md += ["", f"MPI: {mpi_ranks} ranks of full_shard under mpirun, one thread each, each bound to a core "
           f"(micro-batch {B // max(mpi_ranks, 1)} a rank), against one rank with {mpi_ranks} threads "
           f"on {mpi_ranks} pinned CPUs; same global batch, steps and rounds, alternated.", ""]
    if mpi_status != "ok":
        md.append(f"MPI table: {mpi_status}")
    else:
        md += [f"| shape | 1 rank x {mpi_ranks} threads tok/s | {mpi_ranks} ranks x 1 thread tok/s | {mpi_ranks} ranks / 1 rank |",
               "| --- | --- | --- | --- |"]
        for shape in shapes:
            one, many = group("mpi", shape, mpi_ranks, "1-ranks"), group("mpi", shape, 1, f"{mpi_ranks}-ranks")
            md.append(f"| {shape} | {cell(one)} | {cell(many)} | {ratio(many, one)} |")
            for name, nt, rs in (("shardtrain, 1 rank", mpi_ranks, one),
                                 (f"shardtrain, {mpi_ranks} ranks full_shard", "1 a rank", many)):
                if rs and status(rs) in ("ok", "failed: loss"):
                    f, l = losses(rs)
                    loss_rows.append(f"| {shape} | {nt} | {name} | {f} | {l} | {status(rs)} |")
md += ["", f"Loss check (median over rounds; every run must start within {tol} of ln({V}) = {ln_v:.3f} "
       f"and end at least {drop} lower):", "",
       "| shape | threads | program | first loss | last loss | check |", "| --- | --- | --- | --- | --- | --- |",
       *loss_rows, "",
       "tok/s: tokens per second, batch x seq / step time, the median over a run's timed steps, "
       "then the median over rounds.  Step times: shardtrain's metrics.jsonl (time_ms), "
       "torch_train.py's and llm.c's own per-step lines (wall clock around one optimizer step).  "
       "A ratio is the median over rounds of the two programs' tok/s in the same round "
       "(range over rounds in brackets).  Differences in the work: llm.c computes the output head "
       "over its padded vocabulary (50,304), applies weight decay to every parameter and does not "
       "clip gradients; shardtrain and PyTorch clip to a global norm of 1.0 and decay only matrices "
       "and embeddings.  All three read the same token file (the text's bytes as ids below 256); "
       "each draws its own batches from it."]
def wrap(line):
    # Bullets and prose wrapped at 76 columns as the rest of docs/benchmarks.md; tables,
    # headings and the command line kept whole.
    if line.startswith(("|", "#", "- Command:")) or len(line) <= 76:
        return line
    bullet = line.startswith("- ")
    return textwrap.fill(line, 76, subsequent_indent="  " if bullet else "",
                         break_long_words=False, break_on_hyphens=False)

text = "\n".join(wrap(l) for l in md) + "\n"
open(os.path.join(out, "results.md"), "w").write(text)
json.dump({"environment": env, "runs": runs, "llmc": llmc_status, "mpi": mpi_status},
          open(os.path.join(out, "results.json"), "w"), indent=1)
print(text)
if write_docs == "1":
    old = open(docs).read() if os.path.exists(docs) else "# Benchmarks\n"
    head = "## CPU backend against PyTorch and llm.c"
    lines, keep, i = old.splitlines(), [], 0
    start = next((k for k, l in enumerate(lines) if l.strip() == head), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), len(lines))
        new = "\n".join(lines[:start]) + "\n" + text + ("\n" + "\n".join(lines[end:]) + "\n" if end < len(lines) else "")
    open(docs, "w").write(new)
    print(f"wrote the section into {docs}")
EOF
echo "results in $OUTDIR (results.md, results.json, runs/)"
