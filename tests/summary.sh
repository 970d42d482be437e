#!/bin/sh
# The run summary (LOG_DIR/summary.json and the closing lines) of a
# completed, a preempted-then-resumed, a crashed-then-resumed and a failed
# run, each checked against the same run's metrics.jsonl and checkpoint
# directory (the independent record of what happened), and the output
# locations printed at the start and the end of a run.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
PY=/usr/bin/python3
require "$PY" -c "import json"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" data.val="$TMP/data/sh_val_*.bin"
cp "$TMP/base.ini" "$TMP/summark.ini"

# run NAME NP [-s ...]: train on NP ranks into $TMP/NAME; status in NAME.rc
run() {
    name=$1 np=$2
    shift 2
    ranks "$np" 600 "$SHARDTRAIN" train -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" "$@" "$TMP/summark.ini" \
        >>"$TMP/$name.out" 2>>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

# summary_is NAME STATUS EXIT SEGMENTS: summary.json against metrics.jsonl
# and the checkpoints.  metrics.jsonl's orphans (steps a crashed segment
# logged after its checkpoint) are dropped as readers must.
summary_is() {
    "$PY" - "$TMP/$1" "$2" "$3" "$4" <<'EOF'
import json, math, os, sys
d, status, code, segments = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(d + "/logs/summary.json"))
kinds = {}
for line in open(d + "/logs/metrics.jsonl"):
    r = json.loads(line)
    k = "loss" if "loss" in r else "val_loss" if "val_loss" in r else "skipped"
    recs = [x for x in kinds.get(k, []) if x["step"] < r["step"]]
    kinds[k] = recs + [r]
steps = kinds["loss"]
bad = []
def want(what, got, exp, tol=0.0):
    if tol == 0.0 or exp is None:
        ok = got == exp
    else:
        ok = got is not None and abs(got - exp) <= tol * abs(exp)
    if not ok:
        bad.append("%s: %r, want %r" % (what, got, exp))
want("status", s["status"], status)
want("exit_status", s["exit_status"], code)
want("segments", s["segments"], segments)
want("restarts", s["restarts"], segments - 1)
last = max([steps[-1]["step"]] + [r["step"] for r in kinds.get("skipped", [])])
if status == "preempted" or status == "failed":
    # the run stopped at its checkpoint: the last step done
    last = int(open(d + "/ckpt/latest").read().strip().split("_")[1])
want("steps_done", s["steps_done"], last)
tok_step = steps[0]["tokens"] // steps[0]["step"]
want("tokens_done", s["tokens_done"], last * tok_step)
if status == "completed":
    want("final tokens/s", s["tokens_per_s"]["final"], steps[-1]["tokens_per_s"], 1e-5)
    want("final mfu", s["mfu"]["final"], steps[-1]["mfu"], 1e-5)
vals = kinds.get("val_loss", [])
if vals:
    best = min(vals, key=lambda r: r["val_loss"])
    want("best val_loss", s["val_loss"]["best"], best["val_loss"], 1e-7)
    want("best val step", s["val_loss"]["best_step"], best["step"])
    want("final val_loss", s["val_loss"]["final"], vals[-1]["val_loss"], 1e-7)
latest = open(d + "/ckpt/latest").read().strip() if os.path.exists(d + "/ckpt/latest") else None
want("last_checkpoint", s["last_checkpoint"] and os.path.basename(s["last_checkpoint"]), latest)
peaks = s["peak_bytes_per_rank"]
if status == "failed":
    want("peaks (rank 0 only)", len(peaks), 1)
else:
    want("peaks per rank", len(peaks), int(open(d + "/np").read()))
want("rank 0 peak >= the logged peak", peaks[0] >= max(r["peak_bytes"] for r in steps), True)
lost = s["time_lost_s"]
want("wall >= training + checkpoints + evaluation + restarts",
     s["wall_time_s"] + 1e-6 >= s["train_time_s"] + lost["checkpoints"] + lost["evaluation"] + lost["restarts"], True)
want("evaluation time > 0 when evaluated", lost["evaluation"] > 0, bool(vals))
want("restart time > 0 exactly when restarted", lost["restarts"] > 0, segments > 1)
want("mean tokens/s = train_tokens / train_time_s", s["tokens_per_s"]["mean"],
     s["train_tokens"] / s["train_time_s"], 1e-6)
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
EOF
}

# ---- completed, 2 ranks -----------------------------------------------------
echo 2 >"$TMP/np.tmp"; mkdir -p "$TMP/C"; cp "$TMP/np.tmp" "$TMP/C/np"
run C 2 -s train.steps=6 -s train.eval_every=2 -s checkpoint.every=3 -s log.peak_tflops=0.01
check "completed: exit 0" test "$(cat "$TMP/C.rc")" = 0
check "completed: summary.json agrees with metrics.jsonl and the checkpoints" \
    summary_is C completed 0 1
check "completed: the closing lines say how it ended" \
    grep -q '^shardtrain: summary: completed; 6/6 steps, 1536 tokens' "$TMP/C.out"
check "completed: ... and name the last checkpoint" \
    grep -q "^shardtrain: summary: last checkpoint: $TMP/C/ckpt/step_00000006\$" "$TMP/C.out"
check "completed: ... and every rank's peak memory" \
    grep -Eq '^shardtrain: summary: peak memory per rank: [0-9.]+ MiB, [0-9.]+ MiB$' "$TMP/C.out"
check "output locations printed at the start" \
    sh -c "head -n 1 '$TMP/C.out' | grep -q '^shardtrain: writing: metrics $TMP/C/logs/metrics.jsonl, summary $TMP/C/logs/summary.json, plot $TMP/C/logs/plot.svg, TensorBoard events $TMP/C/logs/events\.out\.tfevents\.[0-9]*\.[^;]*; checkpoints in $TMP/C/ckpt/ (every 3 steps'"
check "... and at the end" \
    sh -c "tail -n 1 '$TMP/C.out' | grep -q '^shardtrain: wrote: metrics $TMP/C/logs/metrics.jsonl'"
check "... the end naming the final weights it wrote" \
    sh -c "tail -n 1 '$TMP/C.out' | grep -q ', final weights $TMP/C/ckpt/final/model.safetensors\$'"

# ---- preempted by SIGUSR1, then resumed, 2 ranks -----------------------------
mkdir -p "$TMP/P"; cp "$TMP/np.tmp" "$TMP/P/np"
( run P 2 -s train.steps=300 -s train.eval_every=2 ) &
wait_logged_step "$TMP/P/logs" 4 || diag "P never logged step 4"
pkill -USR1 -f "^$SHARDTRAIN train .*/P/logs .*summark\.ini" || diag "pkill found no rank"
wait
check "preempted: exit 3" test "$(cat "$TMP/P.rc")" = 3
check "preempted: summary.json says preempted, exit 3, at the checkpoint" \
    summary_is P preempted 3 1
check "preempted: the closing lines say so" \
    grep -q '^shardtrain: summary: preempted (exit status 3); ' "$TMP/P.out"
check "preempted: the last line says no final weights were written" \
    sh -c "tail -n 1 '$TMP/P.out' | grep -q ', final weights not written\$'"
pstep=$(sed 's/^step_0*//' "$TMP/P/ckpt/latest")
run P 2 -s train.eval_every=2 -s train.steps=$((pstep + 4))
check "resumed: exit 0" test "$(cat "$TMP/P.rc")" = 0
check "resumed: summary.json covers both segments" summary_is P completed 0 2

# ---- crashed (SIGKILL after a checkpoint), then resumed, 1 rank --------------
# The kill lands at the worst moment for the summary: the third checkpoint
# (step 6) is committed and the run log has not heard of it.  A kill from
# outside at a random time found this only now and then (summary.json
# still said step 4, so the resume from step 6 took it for another run's).
mkdir -p "$TMP/K"; echo 1 >"$TMP/K/np"
export SHARDTRAIN_TEST_FAULT=0:ckpt_done:kill:3
run K 1 -s train.steps=400 -s checkpoint.every=2
unset SHARDTRAIN_TEST_FAULT
check "crashed: killed right after committing step 6" \
    sh -c "test \"\$(cat '$TMP/K.rc')\" != 0 && test \"\$(cat '$TMP/K/ckpt/latest')\" = step_00000006"
check "crashed: the summary left says running" \
    "$PY" -c "import json,sys; sys.exit(json.load(open('$TMP/K/logs/summary.json'))['status'] != 'running')"
kstep=$(sed 's/^step_0*//' "$TMP/K/ckpt/latest")
run K 1 -s checkpoint.every=2 -s train.steps=$((kstep + 4))
check "crash-resumed: exit 0" test "$(cat "$TMP/K.rc")" = 0
check "crash-resumed: summary.json counts the crashed segment as a restart" \
    summary_is K completed 0 2

# ---- failed: non-finite steps stop the run (exit 5), 2 ranks -----------------
mkdir -p "$TMP/F"; cp "$TMP/np.tmp" "$TMP/F/np"
SHARDTRAIN_TEST_NONFINITE_STEPS=4,5 run F 2 -s train.steps=8 -s train.nonfinite_limit=2
check "failed: exit 5" test "$(cat "$TMP/F.rc")" = 5
check "failed: summary.json says failed with exit status 5" summary_is F failed 5 1
check "failed: the closing lines say so" \
    grep -q '^shardtrain: summary: failed (exit status 5); 5/8 steps' "$TMP/F.out"


# ---- a full log.dir: metrics.jsonl stops taking records, 2 ranks -----------
# From step 4 on rank 0's records fail as on a full disk (half a record
# written, then ENOSPC: SHARDTRAIN_TEST_LOG_FULL_AT).  One error line; the
# file is cut back to step 3's record, so every line still parses; training
# goes on to the last step (the final weights are written) and the run
# ends with exit status 1.  (On a real full disk, a 24 KiB tmpfs as
# log.dir, the engine before it reported nothing until the end and left a
# torn last line that the plot then refused.)
SHARDTRAIN_TEST_LOG_FULL_AT=4 run L 2 -s train.steps=6 -s log.every=1 -s log.plot=false
check "full log.dir: exit 1" test "$(cat "$TMP/L.rc")" = 1
check "full log.dir: one error line, naming metrics.jsonl and the step" \
    sh -c "test \"\$(grep -c '^shardtrain: error:' '$TMP/L.err')\" -eq 1 &&
        grep -q '^shardtrain: error: $TMP/L/logs/metrics.jsonl: cannot write the record of step 4: No space left on device; ' '$TMP/L.err'"
check "full log.dir: metrics.jsonl keeps whole records, steps 1 to 3" \
    "$PY" -c "import json, sys; r = [json.loads(l) for l in open('$TMP/L/logs/metrics.jsonl')]; sys.exit([x['step'] for x in r] != [1, 2, 3])"
check "full log.dir: training went on to the end (final weights written, summary 6/6 steps)" \
    sh -c "test -s '$TMP/L/ckpt/final/model.safetensors' &&
        grep -q '^shardtrain: summary: failed (exit status 1); 6/6 steps' '$TMP/L.out'"
