#!/bin/sh
# The loss plot (shardtrain plot, and LOG_DIR/plot.svg at the end of
# training).  Real runs are plotted alone and overlaid, rendered to PNG by
# rsvg-convert and checked by tests/plot_check.py: the picture is not blank
# and shows each run's colour, and every series has one point per logged
# value of its metrics.jsonl, read there independently (with the orphan
# rule of resumed logs), at heights that follow the values.  A run that
# crashed and resumed (re-logged steps) plots each step once; a hand-made
# log whose resume reaches further back than it re-logs, and without
# tokens, as logs before them were, plots too.  Bad input is one error
# line and exit status 2, and leaves no plot behind.
. "$top_srcdir/tests/lib.sh"
require command -v rsvg-convert
# Debian's python3-pil is importable from /usr/bin/python3.
PY=
for p in /usr/bin/python3 python3; do
    if "$p" -c "import PIL" >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || { not_ok "prerequisite missing: python3 with PIL (Debian: python3-pil)"; exit 1; }
export OMP_NUM_THREADS=1
unset SHARDTRAIN_TEST_NONFINITE_STEPS SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT

prepare_test_data
write_base_ini "$TMP/base.ini" "data.val=$TMP/data/sh_val_*.bin" train.eval_every=5

# train NAME [-s ...]: a run logging to $TMP/NAME, status in $st.
train() {
    name=$1
    shift
    timeout 300 "$SHARDTRAIN" train -s log.dir="$TMP/$name" -s checkpoint.dir="$TMP/$name.ckpt" \
        "$@" "$TMP/base.ini" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    [ "$st" -eq 0 ] || diag "$name: exit status $st" "$(tail -n 3 "$TMP/$name.err")"
}

# plot_check MODE ARGS...: tests/plot_check.py's lines as checks of ours.
plot_check() {
    "$PY" "$top_srcdir/tests/plot_check.py" "$@" >"$TMP/check.out" 2>&1
    pc=$?
    while IFS= read -r line; do
        case $line in
            "ok - "*) ok "${line#ok - }" ;;
            "not ok - "*) not_ok "${line#not ok - }" ;;
            *) diag "$line" ;;
        esac
    done <"$TMP/check.out"
    [ "$pc" -eq 0 ] || [ -s "$TMP/check.out" ] || not_ok "plot_check.py $1 printed nothing (status $pc)"
}

# render SVG NAME: the PNG, as a person would look at it.
render() {
    check "rsvg-convert renders $2" rsvg-convert "$1" -o "$TMP/$2.png"
}

# self_contained SVG: nothing in it reaches outside the file.
self_contained() {
    ! grep -q -i -e '<script' -e 'href' -e 'url(' -e '@import' "$1"
}

# ---- 1. one run: the plot at the end of training, then shardtrain plot ------
# A: every step logged, a skipped non-finite step, evaluations every 5.
SHARDTRAIN_TEST_NONFINITE_STEPS=7 train A -s train.steps=60
check "run A trains" test "$st" -eq 0
check "the end of training wrote A/plot.svg" test -s "$TMP/A/plot.svg"
check "... and said where" grep -q "plot.svg" "$TMP/A.out"
check "the log has cumulative tokens" grep -q '"tokens":' "$TMP/A/metrics.jsonl"
rm -f "$TMP/A/plot.svg"
"$SHARDTRAIN" plot "$TMP/A" >"$TMP/plotA.out" 2>"$TMP/plotA.err"
check "shardtrain plot A: exit 0, nothing on stderr" test "$?" -eq 0 -a ! -s "$TMP/plotA.err"
check "... writes A/plot.svg by default and says so" \
    sh -c "test -s '$TMP/A/plot.svg' && grep -q '$TMP/A/plot.svg' '$TMP/plotA.out'"
check "... self-contained: no scripts, links or outside files" self_contained "$TMP/A/plot.svg"
check "... a tokens scale above the loss" grep -q "tokens trained (256 per step)" "$TMP/A/plot.svg"
check "... the title names the run directory" grep -q "<text[^>]*>shardtrain run $TMP/A<" "$TMP/A/plot.svg"
plot_check svg "$TMP/A/plot.svg" "$TMP/A/metrics.jsonl"
render "$TMP/A/plot.svg" A
plot_check png "$TMP/A.png" 1

# ---- 2. two runs overlaid -----------------------------------------------------
# B: every 4th step logged, MFU known, another learning rate, no plot at the end.
train B -s train.steps=60 -s log.every=4 -s log.peak_tflops=0.001 -s optim.lr=1e-3 \
    -s log.plot=false
check "run B trains" test "$st" -eq 0
check "log.plot = false: no plot at the end of training" test ! -e "$TMP/B/plot.svg"
(cd "$TMP" && "$SHARDTRAIN" plot A B >"$TMP/plotAB.out" 2>"$TMP/plotAB.err")
check "shardtrain plot A B: exit 0, ./plot.svg" test "$?" -eq 0 -a -s "$TMP/plot.svg"
"$SHARDTRAIN" plot "$TMP/A" "$TMP/B" -o "$TMP/AB.svg" >/dev/null 2>"$TMP/plotAB.err"
check "shardtrain plot A B -o AB.svg: exit 0" test "$?" -eq 0 -a -s "$TMP/AB.svg"
check "... a legend naming each run" \
    sh -c "grep -q '>$TMP/A<' '$TMP/AB.svg' && grep -q '>$TMP/B<' '$TMP/AB.svg'"
plot_check svg "$TMP/AB.svg" "$TMP/A/metrics.jsonl" "$TMP/B/metrics.jsonl"
render "$TMP/AB.svg" AB
plot_check png "$TMP/AB.png" 2

# ---- 3. a crash and a resume: steps logged twice are plotted once --------------
# C crashes writing step 4's checkpoint and resumes from step 2's, logging
# step 3 (skipped again), step 4 and the evaluation at 4 a second time.
export SHARDTRAIN_TEST_NONFINITE_STEPS=3
SHARDTRAIN_TEST_CRASH_IN_CHECKPOINT=4 train C -s train.steps=8 -s train.eval_every=2 \
    -s checkpoint.every=2
check "run C crashes in step 4's checkpoint" test "$st" -ne 0
train C -s train.steps=8 -s train.eval_every=2 -s checkpoint.every=2
unset SHARDTRAIN_TEST_NONFINITE_STEPS
check "run C resumes and completes" test "$st" -eq 0
logged=$(grep -c '"loss"' "$TMP/C/metrics.jsonl")
distinct=$("$PY" -c 'import json, sys
print(len({r["step"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}))' \
    "$TMP/C/metrics.jsonl")
check "C's log holds re-logged steps ($logged step records, $distinct steps)" \
    test "$logged" -gt "$distinct"
check "C's log holds a re-logged skipped step and evaluation" \
    test "$(grep -c '"skipped"' "$TMP/C/metrics.jsonl")" -eq 2 \
    -a "$(grep -c '"step":4,"val_loss"' "$TMP/C/metrics.jsonl")" -eq 2
"$SHARDTRAIN" plot "$TMP/C" >/dev/null 2>"$TMP/plotC.err"
check "shardtrain plot C: exit 0" test "$?" -eq 0
points=$("$PY" -c 'import sys, xml.etree.ElementTree as E
for e in E.parse(sys.argv[1]).getroot().iter():
    if e.get("id") == "run0-loss": print(len(e.get("points").split()))' "$TMP/C/plot.svg")
check "C's loss is plotted once per step ($points points, $distinct steps)" \
    test "$points" = "$distinct"
plot_check svg "$TMP/C/plot.svg" "$TMP/C/metrics.jsonl"

# D, by hand: steps 1-10, then a resume from step 3 that stopped after 5, so
# 6-10 are orphans nobody re-logged; other values the second time, so a
# plot of the first ones shows; no "tokens" (logs before them) and a record
# of a kind the plot does not know.
mkdir -p "$TMP/D"
"$PY" - "$TMP/D/metrics.jsonl" <<'EOF_PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for s in range(1, 11):
        f.write(json.dumps({"step": s, "loss": 5.0 - 0.2 * s, "lr": 1e-3, "grad_norm": 1.0,
                            "tokens_per_s": 1000.0 + s, "mfu": None}) + "\n")
        if s % 4 == 0:
            f.write(json.dumps({"step": s, "val_loss": 5.1 - 0.2 * s}) + "\n")
    f.write(json.dumps({"event": "resumed", "from_step": 3}) + "\n")
    for s in range(4, 6):
        f.write(json.dumps({"step": s, "loss": 4.0 - 0.3 * s, "lr": 2e-3, "grad_norm": 1.0,
                            "tokens_per_s": 2000.0 - s, "mfu": None}) + "\n")
EOF_PY
"$SHARDTRAIN" plot "$TMP/D" >/dev/null 2>"$TMP/plotD.err"
check "shardtrain plot D (no tokens, orphans not re-logged): exit 0" test "$?" -eq 0
check "... no tokens scale without tokens" sh -c "! grep -q 'tokens trained' '$TMP/D/plot.svg'"
plot_check svg "$TMP/D/plot.svg" "$TMP/D/metrics.jsonl"

# ---- 4. bad input: one line, exit status 2, no plot -------------------------------
# refused NAME PATTERN ARGS...: shardtrain plot ARGS fails as described.
refused() {
    name=$1 pattern=$2
    shift 2
    rm -f "$TMP/refused.svg"
    "$SHARDTRAIN" plot "$@" -o "$TMP/refused.svg" >"$TMP/ref.out" 2>"$TMP/ref.err"
    rst=$?
    if [ "$rst" -eq 2 ] && [ ! -s "$TMP/ref.out" ] && [ "$(wc -l <"$TMP/ref.err")" -eq 1 ] &&
       grep -q -- "$pattern" "$TMP/ref.err" && [ ! -e "$TMP/refused.svg" ]; then
        ok "refused: $name"
    else
        not_ok "refused: $name"
        diag "exit status $rst (want 2), want one line like: $pattern" "got:" "$(cat "$TMP/ref.err")"
    fi
}
mkdir -p "$TMP/empty" "$TMP/bad1" "$TMP/bad2" "$TMP/bad3"
head -n 2 "$TMP/A/metrics.jsonl" >"$TMP/bad1/metrics.jsonl"
printf '{"step":3,"loss":\n' >>"$TMP/bad1/metrics.jsonl"
head -n 1 "$TMP/A/metrics.jsonl" >"$TMP/bad2/metrics.jsonl"
printf '{"step":2,"loss":"high","lr":1,"tokens_per_s":1}\n' >>"$TMP/bad2/metrics.jsonl"
printf '{"step":0,"val_loss":2.5}\n' >"$TMP/bad3/metrics.jsonl"
refused "a missing directory" "^shardtrain: error: $TMP/nowhere/metrics.jsonl: cannot open: " \
    "$TMP/nowhere"
refused "a directory without metrics.jsonl" "^shardtrain: error: $TMP/empty/metrics.jsonl: " \
    "$TMP/empty"
refused "a line that is not JSON" "^shardtrain: error: $TMP/bad1/metrics.jsonl:3: not JSON: " \
    "$TMP/bad1"
refused "a loss that is not a number" \
    "^shardtrain: error: $TMP/bad2/metrics.jsonl:2: \"loss\" is neither a number nor null; hint: " \
    "$TMP/bad2"
refused "a step that is not >= 1" "^shardtrain: error: $TMP/bad3/metrics.jsonl:1: \"step\" " \
    "$TMP/bad3"
refused "one bad directory among good ones" "^shardtrain: error: $TMP/bad1/metrics.jsonl:3: " \
    "$TMP/A" "$TMP/bad1"
refused "no LOG_DIR" "^shardtrain: error: command line:4: missing LOG_DIR; hint: "
# An output that cannot be written is a failure (exit 1), named as given.
"$SHARDTRAIN" plot "$TMP/A" -o "$TMP/nowhere/p.svg" >/dev/null 2>"$TMP/noout.err"
st=$?
check "plot -o into a missing directory: exit $st (1), one line naming the file given, with a hint" \
    sh -c "[ $st -eq 1 ] && [ \$(wc -l <'$TMP/noout.err') -eq 1 ] &&
        grep -q '^shardtrain: error: $TMP/nowhere/p.svg: cannot write the plot: No such file or directory; hint: ' '$TMP/noout.err'"
