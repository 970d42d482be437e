#!/bin/sh
# TensorBoard event files, read back with PyPI's tensorboard (the reader
# users run, from the virtual environment make check builds) by
# tests/tensorboard_read.py.  The writer alone: CRC-32C against Debian's
# python3-crc32c, every record of tests/test_tensorboard's two sessions as
# written, the second session's SessionLog START purging the first one's
# later steps, and a damaged file noticed.  Training runs: every tag and
# value against metrics.jsonl and the configuration text; a run preempted
# by SIGUSR1 and resumed, and one killed by SIGKILL after a checkpoint and
# resumed (it logs again the steps after its checkpoint), each equal in
# tensorboard to the uninterrupted run, steps strictly increasing, and the
# dashboard's own HTTP API (a tensorboard server on a free loopback port)
# serving the same.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
TB_PYTHON=${TB_PYTHON:-${top_builddir:-.}/_venv/bin/python}
if ! "$TB_PYTHON" -c "from tensorboard.backend.event_processing import event_accumulator" \
    >"$TMP/venv.err" 2>&1; then
    not_ok "$TB_PYTHON cannot import tensorboard: the tests' virtual environment is" \
        "missing or broken; make check builds it (make _venv/.stamp)"
    diag "$(cat "$TMP/venv.err")"
    exit 1
fi
# Debian's Python with Debian's python3-crc32c, the reference CRC
require /usr/bin/python3 -c "import crc32c"
UNIT="${top_builddir:-.}/tests/test_tensorboard"
require test -x "$UNIT"
export OMP_NUM_THREADS=1

# read_tb CHECK ARGS...: tests/tensorboard_read.py; what it found is shown
# (tensorboard's own log lines go to $TMP/read.err)
read_tb() {
    "$TB_PYTHON" "$top_srcdir/tests/tensorboard_read.py" "$@" 2>"$TMP/read.err" >"$TMP/read.out"
    _rc=$?
    [ -s "$TMP/read.out" ] && diag "$(sed 's/^# //' "$TMP/read.out")"
    [ $_rc -eq 0 ] || diag "$(tail -n 5 "$TMP/read.err")"
    return $_rc
}
n_event_files() {
    set -- "$1"/events.out.tfevents.*
    if [ -e "$1" ]; then echo $#; else echo 0; fi
}

# ---- 1. the writer alone -----------------------------------------------------
mkdir -p "$TMP/crc"
/usr/bin/python3 - "$TMP/crc" <<'EOF_PY'
import os, random, sys
r = random.Random(16)
for i, n in enumerate([0, 1, 3, 8, 9, 63, 64, 65, 1000, 4095, 4096, 4097] +
                      [r.randrange(1, 200000) for _ in range(8)]):
    open(os.path.join(sys.argv[1], "buf%02d" % i), "wb").write(r.randbytes(n))
EOF_PY
"$UNIT" crc "$TMP"/crc/buf* >"$TMP/crc.c"
check "CRC-32C of 20 random buffers (0 to 200000 bytes) equals python3-crc32c's" \
    /usr/bin/python3 -c '
import crc32c, sys
lines = open(sys.argv[1]).read().split("\n")[:-1]
assert len(lines) == 20, len(lines)
for l in lines:
    crc, path = l.split(" ", 1)
    assert int(crc, 16) == crc32c.crc32c(open(path, "rb").read()), path
' "$TMP/crc.c"

mkdir -p "$TMP/unit"
"$UNIT" write "$TMP/unit"
check "two sessions write two event files" test "$(n_event_files "$TMP/unit")" -eq 2
check "every record reads back as written (file_version, START, scalars, texts)" \
    read_tb records "$TMP/unit"
check "EventAccumulator: the second session's START purges the first one's steps 4 and 5" \
    read_tb purged "$TMP/unit"
cp -r "$TMP/unit" "$TMP/damaged"
set -- "$TMP"/damaged/events.out.tfevents.*
f=$1
printf '\125' | dd of="$f" bs=1 seek=300 conv=notrunc 2>/dev/null
if read_tb records "$TMP/damaged" >/dev/null; then not_ok "a flipped byte is noticed (CRC)"
else ok "a flipped byte is noticed (CRC)"; fi

# ---- 2. training runs ---------------------------------------------------------
prepare_test_data
write_base_ini "$TMP/base.ini" data.val="$TMP/data/sh_val_*.bin"

# train NAME NP [-s ...]: train on NP ranks (1 = no launcher) into
# $TMP/NAME/{logs,ckpt}; the configuration file is ${CFG:-base.ini}; the
# exit status in $st
train() {
    name=$1 np=$2
    shift 2
    set -- train -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        "${CFG:-$TMP/base.ini}"
    ranks "$np" 600 "$SHARDTRAIN" "$@" >>"$TMP/$name.out" 2>>"$TMP/$name.err"
    st=$?
}
# config_of NAME [-s ...]: the resolved configuration as `shardtrain check`
# prints it, which the run's config text summary must be
config_of() {
    name=$1
    shift
    "$SHARDTRAIN" check -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" \
        "${CFG:-$TMP/base.ini}" >"$TMP/$name.config"
}

# Every kind of record: logged every 2nd step and at the last, an
# evaluation every 3, MFU known, a skipped non-finite step (5).
a="-s train.steps=9 -s log.every=2 -s train.eval_every=3 -s train.eval_batches=1 \
    -s log.peak_tflops=0.5"
export SHARDTRAIN_TEST_NONFINITE_STEPS=5
train A 1 $a
unset SHARDTRAIN_TEST_NONFINITE_STEPS
config_of A $a
check "a run with evaluations and a skipped step completes ($st)" test "$st" -eq 0
check "it writes one event file" test "$(n_event_files "$TMP/A/logs")" -eq 1
check "every tag and value equals metrics.jsonl; train/mfu; the config text" \
    read_tb run "$TMP/A/logs" --config "$TMP/A.config" --mfu
check "metrics.jsonl marks step 5 skipped; tensorboard has all 10 tags, the skip's two too" \
    sh -c "grep -q '^{\"step\":5,\"skipped\":\"nonfinite\"' '$TMP/A/logs/metrics.jsonl' &&
           grep -q '^# [1-9][0-9]* scalars of 10 tags checked' '$TMP/read.out'"
train B 1 -s train.steps=2 -s log.tensorboard=false
check "log.tensorboard = false: metrics.jsonl, no event file" \
    test "$st" -eq 0 -a -s "$TMP/B/logs/metrics.jsonl" -a "$(n_event_files "$TMP/B/logs")" -eq 0

# ---- 3. preempted by SIGUSR1 and resumed, on 2 ranks ----------------------------
# The marker in the configuration's name lets pkill find exactly these ranks.
cp "$TMP/base.ini" "$TMP/tbmark.ini"
CFG="$TMP/tbmark.ini"
p="-s train.steps=30 -s checkpoint.every=0 -s train.eval_every=4 -s train.eval_batches=1"
train U 2 $p
check "SIGUSR1: the uninterrupted reference completes ($st)" test "$st" -eq 0
# Rank 0 stops itself at the start of step 7 (the test fault hook,
# base/test_faults.h), rank 1 waits for it in the step's collectives, and
# only then do both get SIGUSR1 and rank 0 its SIGCONT: the signal lands
# mid-run whatever the machine's speed.  (Signalling once step 6 was
# logged raced the run's end on an idle machine.)
export SHARDTRAIN_TEST_FAULT=0:step:stop:7
( train P 2 $p; echo "$st" >"$TMP/P.rc" ) &
unset SHARDTRAIN_TEST_FAULT
pat="^$SHARDTRAIN train .*$TMP/tbmark\.ini"
stopped=$(stopped_pid "$pat")
[ -n "$stopped" ] || diag "no rank stopped itself at step 7"
pkill -USR1 -f "$pat" || diag "pkill found no rank"
[ -z "$stopped" ] || kill -CONT "$stopped"
wait
check "SIGUSR1: exit status 3, a checkpoint" \
    test "$(cat "$TMP/P.rc")" = 3 -a -s "$TMP/P/ckpt/latest"
train P 2 $p
config_of P $p
CFG=
check "the resumed run completes ($st)" sh -c "test $st -eq 0 && grep -q 'resumed from' '$TMP/P.out'"
check "preempted + resumed: one event file per session (2), from rank 0 only" \
    test "$(n_event_files "$TMP/P/logs")" -eq 2
check "preempted + resumed: every tag and value equals metrics.jsonl, two config texts" \
    read_tb run "$TMP/P/logs" --config "$TMP/P.config"
check "preempted + resumed: same steps and values as the uninterrupted run" \
    read_tb same "$TMP/P/logs" "$TMP/U/logs"

# ---- 4. killed (SIGKILL) after a checkpoint and resumed: steps logged twice -----
cp "$TMP/base.ini" "$TMP/tbkill.ini"
CFG="$TMP/tbkill.ini"
k="-s train.steps=40 -s checkpoint.every=4"
train V 1 $k
check "SIGKILL: the uninterrupted reference completes ($st)" test "$st" -eq 0
# Killed by the test fault hook (base/test_faults.h) at the start of step
# 7: steps 1 to 6 are in metrics.jsonl and the latest checkpoint is step
# 4's, so the resumed run logs steps 5 and 6 again.  (This used to stop and
# kill the rank from outside once its metrics passed its checkpoint; on a
# loaded machine the run could finish first, and the check failed.)
export SHARDTRAIN_TEST_FAULT=0:step:kill:7
train K 1 $k
unset SHARDTRAIN_TEST_FAULT
c=$(sed 's/^step_0*//' "$TMP/K/ckpt/latest" 2>/dev/null)
last=$(tail -n 1 "$TMP/K/logs/metrics.jsonl" 2>/dev/null | sed 's/^{"step":\([0-9]*\),.*/\1/')
killed=
if [ "$st" -eq 137 ] && [ -n "$c" ] && [ -n "$last" ] && [ "$last" -gt "$c" ]; then
    killed="$c $last"
fi
set -- $killed
check "SIGKILL after the checkpoint of step ${1:-?}, at step ${2:-?} (exit $st)" test -n "$killed"
train K 1 $k
config_of K $k
CFG=
check "the resumed run completes from step ${1:-?} ($st)" \
    sh -c "test $st -eq 0 && grep -q 'resumed from .*at step ${1:-?}' '$TMP/K.out'"
check "metrics.jsonl holds step $((${1:-0} + 1)) twice (the killed run's and the resumed run's)" \
    test "$(grep "^{\"step\":$((${1:-0} + 1))," "$TMP/K/logs/metrics.jsonl" | grep -c '"loss":')" -eq 2
check "killed + resumed: every tag and value equals metrics.jsonl, two config texts" \
    read_tb run "$TMP/K/logs" --config "$TMP/K.config"
check "killed + resumed: no duplicate steps, same values as the uninterrupted run" \
    read_tb same "$TMP/K/logs" "$TMP/V/logs"
check "killed + resumed: the dashboard (tensorboard --logdir, both loaders) serves the same" \
    read_tb served "$TMP/K/logs"
