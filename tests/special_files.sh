#!/bin/sh
# Inputs that are not regular files, or that change under a run (issue 17,
# class 4): a FIFO where the configuration, a token shard, prepare's text,
# `latest` or the run's metrics.jsonl is expected is one error line and
# exit status 2, never a hang; a FIFO or a device where a file is written
# by renaming over its name (plot -o, prepare's shards at any number, the
# run's summary.json and plot.svg) or where a checkpoint's step directory
# goes is refused the same way and left in place, never replaced by a
# file, moved aside or pruned; /dev/zero as the configuration is refused at its first line with
# bounded memory; a token shard truncated while a run reads it ends that
# run with one error line naming the file (exit status 1), never SIGBUS.
# Every run has a hang guard that SIGKILLs (lib.sh's ranks).
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt"

mkfifo "$TMP/fifo.ini"
refused "a FIFO as the configuration: exit 2, not a hang" "fifo.ini: not a regular file" \
    "$SHARDTRAIN" check "$TMP/fifo.ini"
mkdir -p "$TMP/fdata"
cp "$TMP/data/sh_train_000000.bin" "$TMP/fdata/a_000000.bin"
mkfifo "$TMP/fdata/a_000001.bin"
refused "a FIFO matched by data.train: exit 2, not a hang" "a_000001.bin: not a regular file" \
    "$SHARDTRAIN" train -s "data.train=$TMP/fdata/a_*.bin" "$TMP/base.ini"
mkfifo "$TMP/text.fifo"
refused "a FIFO as prepare's text: exit 2, not a hang" "text.fifo: input is a pipe" \
    "$SHARDTRAIN" prepare "$TMP/text.fifo" "$TMP/out/x"
# A FIFO (or a device) where metrics.jsonl goes: the run log is opened
# without waiting for a reader and refused before any step (the engine
# before it blocked in fopen for ever, waiting for a reader).
mkdir -p "$TMP/flogs"
mkfifo "$TMP/flogs/metrics.jsonl"
refused "a FIFO as log.dir's metrics.jsonl: exit 2, not a hang" "metrics.jsonl: not a regular file" \
    "$SHARDTRAIN" train -s log.dir="$TMP/flogs" "$TMP/base.ini"
# 512 MiB resident: room for a CUDA build's libraries and AddressSanitizer's
# shadow, a third of what reading /dev/zero as one line took (1.7 GB before
# the line-length check).  Resident, not address space: ASan cannot run
# under ulimit -v (tests/rss_bound.py).
refused "/dev/zero as the configuration: refused at line 1 in bounded memory" \
    "/dev/zero:1: line longer than" python3 "$top_srcdir/tests/rss_bound.py" 512 \
    "$SHARDTRAIN" check /dev/zero
"$SHARDTRAIN" check /dev/null >/dev/null 2>&1
check "/dev/null is still an empty configuration" test $? -eq 0

# A shard truncated while it is read: a long run on a private copy.
mkdir -p "$TMP/tdata"
cp "$TMP/data/sh_train_000000.bin" "$TMP/tdata/t_000000.bin"
( ranks 1 120 "$SHARDTRAIN" train -s "data.train=$TMP/tdata/t_*.bin" -s train.steps=100000 \
      -s log.dir="$TMP/tlogs" "$TMP/base.ini" >"$TMP/trunc.out" 2>"$TMP/trunc.err"
  echo $? >"$TMP/trunc.rc" ) &
wait_logged_step "$TMP/tlogs" 2 || diag "the run never logged step 2"
truncate -s 2000 "$TMP/tdata/t_000000.bin"
wait
check "a shard truncated under the run: exit 1 with one error line naming it, no SIGBUS" \
    sh -c "test \"\$(cat '$TMP/trunc.rc')\" = 1 &&
           test \"\$(grep -c '^shardtrain: error:' '$TMP/trunc.err')\" -eq 1 &&
           grep -q '^shardtrain: error: $TMP/tdata/t_000000.bin: the token file shrank while this run was reading it' '$TMP/trunc.err' &&
           ! grep -qi 'bus error\|backtrace\|Signal:' '$TMP/trunc.err'"

# Outputs written by renaming a temporary over their name: a FIFO or a
# device there is refused before any work and left as it is (`plot -o
# /dev/null` as root once replaced /dev/null with a regular file).  The
# device is made here, never a real /dev node; without the right to make
# one (not root), the FIFO cases stand for it.
mkfifo "$TMP/plot.fifo"
refused "plot -o onto a FIFO: exit 2, one line naming it" "plot.fifo: is a special file" \
    "$SHARDTRAIN" plot "$TMP/tlogs" -o "$TMP/plot.fifo"
check "... and the FIFO is left in place" test -p "$TMP/plot.fifo"
if mknod -m 666 "$TMP/devnull" c 1 3 2>/dev/null; then
    refused "plot -o onto a character device: exit 2, one line naming it" \
        "devnull: is a special file" "$SHARDTRAIN" plot "$TMP/tlogs" -o "$TMP/devnull"
    check "... and the device is left in place" test -c "$TMP/devnull"
else
    diag "mknod is not allowed here (not root): the device case rests on the FIFO's"
fi
mkdir -p "$TMP/pout"
mkfifo "$TMP/pout/x_train_000000.bin"
printf 'some text to prepare\n' >"$TMP/small.txt"
refused "prepare onto a FIFO's shard name: exit 2, one line naming it" \
    "x_train_000000.bin: is a special file" \
    "$SHARDTRAIN" prepare --val-fraction 0 "$TMP/small.txt" "$TMP/pout/x"
check "... and the FIFO is left in place" test -p "$TMP/pout/x_train_000000.bin"
# Past a gap in the shard numbers: the 21 bytes make shards 0 to 6 of 3
# tokens, so shard 5 is written, but only shard 0 is there.  Every name
# prepare may write is checked at the start, whatever its number (probing
# from 0 stopped at the first gap: the FIFO was refused only when shard 5
# was due, after shards 0 to 4, whose removal then deleted it too).  Each
# case in a directory of its own, so that none sees another's shards.
# gap_dir NAME: $TMP/NAME holding an empty x_train_000000.bin alone.
gap_dir() { mkdir -p "$TMP/$1" && : >"$TMP/$1/x_train_000000.bin"; }
gap_dir gap1
mkfifo "$TMP/gap1/x_train_000005.bin"
refused "prepare onto a FIFO's shard name past a gap: exit 2" \
    "x_train_000005.bin: is a special file" "$SHARDTRAIN" prepare --val-fraction 0 \
    --shard-tokens 3 "$TMP/small.txt" "$TMP/gap1/x"
check "... before any work: the FIFO is left in place, no shard written" \
    sh -c "test -p '$TMP/gap1/x_train_000005.bin' && test ! -s '$TMP/gap1/x_train_000000.bin' &&
           test -z \"\$(ls '$TMP/gap1' | grep -v '^x_train_00000[05].bin\$')\""
gap_dir gap2
mkfifo "$TMP/gap2/x_val_000003.mask.tmp"
refused "prepare onto a FIFO at a val loss mask's temporary past a gap: exit 2" \
    "x_val_000003.mask.tmp: is a special file" "$SHARDTRAIN" prepare --shard-tokens 3 \
    "$TMP/small.txt" "$TMP/gap2/x"
check "... and the FIFO is left in place, no shard written" \
    sh -c "test -p '$TMP/gap2/x_val_000003.mask.tmp' && test ! -s '$TMP/gap2/x_train_000000.bin'"
gap_dir gap3
if mknod -m 666 "$TMP/gap3/x_train_000004.mask" c 1 3 2>/dev/null; then
    refused "prepare onto a character device at a loss mask's name past a gap: exit 2" \
        "x_train_000004.mask: is a special file" "$SHARDTRAIN" prepare --val-fraction 0 \
        --shard-tokens 3 "$TMP/small.txt" "$TMP/gap3/x"
    check "... and the device is left in place, no shard written" \
        sh -c "test -c '$TMP/gap3/x_train_000004.mask' && test ! -s '$TMP/gap3/x_train_000000.bin'"
fi
# Names prepare never writes (a seventh digit after a zero, another
# ending) are not its business: it runs, and leaves them.
gap_dir gap4
mkfifo "$TMP/gap4/x_train_0000005.bin" "$TMP/gap4/x_train_000005.bin.old"
"$SHARDTRAIN" prepare --val-fraction 0 --shard-tokens 3 "$TMP/small.txt" "$TMP/gap4/x" \
    >"$TMP/gap4.out" 2>&1
check "prepare beside FIFOs at names it does not write: exit 0, shard 6 written, the FIFOs kept" \
    sh -c "[ $? -eq 0 ] && test -s '$TMP/gap4/x_train_000006.bin' &&
           test -p '$TMP/gap4/x_train_0000005.bin' && test -p '$TMP/gap4/x_train_000005.bin.old'"
mkdir -p "$TMP/slogs"
mkfifo "$TMP/slogs/summary.json"
refused "a FIFO as log.dir's summary.json: exit 2 before any step" \
    "summary.json: is a special file" \
    "$SHARDTRAIN" train -s log.dir="$TMP/slogs" "$TMP/base.ini"
check "... and the FIFO is left in place, no step logged" \
    sh -c "test -p '$TMP/slogs/summary.json' && test ! -s '$TMP/slogs/metrics.jsonl'"
mkdir -p "$TMP/plogs"
mkfifo "$TMP/plogs/plot.svg"
refused "a FIFO as log.dir's plot.svg: exit 2 before any step" "plot.svg: is a special file" \
    "$SHARDTRAIN" train -s log.dir="$TMP/plogs" "$TMP/base.ini"
check "... and the FIFO is left in place" test -p "$TMP/plogs/plot.svg"

# A FIFO or a device at checkpoint.dir/step_N, the name the checkpoint of
# step N takes: a save moved it aside and pruning then deleted it.  A run
# may save at any step (a preemption signal), so one at any step's name is
# refused at start, before the resume and any step; one that appears
# during the run is refused by the save of its step before anything is
# written; pruning neither counts nor removes one at an older step's name.
mkdir -p "$TMP/fckpt"
mkfifo "$TMP/fckpt/step_00000002"
refused "a FIFO at checkpoint.dir/step_00000002: exit 2 before any step" \
    "fckpt/step_00000002: is a special file" \
    "$SHARDTRAIN" train -s checkpoint.dir="$TMP/fckpt" -s log.dir="$TMP/fclogs" \
    -s checkpoint.every=2 "$TMP/base.ini"
check "... and the FIFO is left in place, no step logged" \
    sh -c "test -p '$TMP/fckpt/step_00000002' && test ! -s '$TMP/fclogs/metrics.jsonl'"
refused "... the same with checkpoint.resume = never" "fckpt/step_00000002: is a special file" \
    "$SHARDTRAIN" train -s checkpoint.dir="$TMP/fckpt" -s log.dir="$TMP/fclogs" \
    -s checkpoint.every=2 -s checkpoint.resume=never "$TMP/base.ini"
check "... and the FIFO is left in place" test -p "$TMP/fckpt/step_00000002"
mkdir -p "$TMP/dckpt"
if mknod -m 666 "$TMP/dckpt/step_00000003" c 1 3 2>/dev/null; then
    refused "a character device at checkpoint.dir/step_00000003: exit 2 before any step" \
        "dckpt/step_00000003: is a special file" \
        "$SHARDTRAIN" train -s checkpoint.dir="$TMP/dckpt" -s log.dir="$TMP/dclogs" \
        -s checkpoint.every=1 -s checkpoint.resume=never "$TMP/base.ini"
    check "... and the device is left in place" test -c "$TMP/dckpt/step_00000003"
else
    diag "mknod is not allowed here (not root): the device case rests on the FIFO's"
fi

# run_stopped NAME STEP SETUP [-s ...]: a run with its checkpoints in
# $TMP/NAME/ckpt that stops itself (SIGSTOP, base/test_faults.h) at the
# start of step STEP; SETUP (a shell command) is then run and the run
# continued.  Its status in $TMP/NAME.rc, stderr in $TMP/NAME.err.
run_stopped() {
    _n=$1 _step=$2 _setup=$3
    shift 3
    ( export SHARDTRAIN_TEST_FAULT=0:step:stop:$_step
      ranks 1 120 "$SHARDTRAIN" train \
          -s checkpoint.dir="$TMP/$_n/ckpt" -s log.dir="$TMP/$_n/logs" "$@" "$TMP/base.ini" \
          >"$TMP/$_n.out" 2>"$TMP/$_n.err"
      echo $? >"$TMP/$_n.rc" ) &
    _stopped=$(stopped_pid "^$SHARDTRAIN train -s checkpoint.dir=$TMP/$_n/ckpt ")
    [ -n "$_stopped" ] || diag "$_n: the run never stopped itself at step $_step"
    sh -c "$_setup"
    [ -z "$_stopped" ] || kill -CONT "$_stopped"
    wait
}
# The checkpoint of step 2 is written; then, during step 3, a FIFO takes
# step 4's name.  The save of step 4 refuses it: exit 2, one error line,
# the FIFO, step 2's checkpoint and `latest` as they were.
run_stopped mid 3 "mkfifo '$TMP/mid/ckpt/step_00000004'" -s checkpoint.every=2
check "a FIFO at step_00000004 made during the run: its save refuses it, exit 2, one error line" \
    sh -c "test \"\$(cat '$TMP/mid.rc')\" = 2 &&
           test \"\$(grep -c '^shardtrain: error:' '$TMP/mid.err')\" -eq 1 &&
           grep -q '^shardtrain: error: $TMP/mid/ckpt/step_00000004: is a special file' '$TMP/mid.err'"
check "... the FIFO is left in place, step 2's checkpoint and latest are untouched" \
    sh -c "test -p '$TMP/mid/ckpt/step_00000004' &&
           test -s '$TMP/mid/ckpt/step_00000002/manifest.json' &&
           test \"\$(cat '$TMP/mid/ckpt/latest')\" = step_00000002 &&
           test -z \"\$(ls -A '$TMP/mid/ckpt' | grep -v '^step_0000000[24]\$\\|^latest\$')\""
# Special files at an older step's name and at the names of a crashed
# save's leftovers, made during step 3: the save of step 4 succeeds, and
# pruning to checkpoint.keep = 1 removes step 2's checkpoint but none of
# them.
setup="mkfifo '$TMP/pr/ckpt/step_00000001' '$TMP/pr/ckpt/.old-step_00000001'"
if mknod -m 666 "$TMP/probe-dev" c 1 3 2>/dev/null; then
    setup="$setup && mknod -m 666 '$TMP/pr/ckpt/.tmp-step_00000001' c 1 3"
else
    setup="$setup && mkfifo '$TMP/pr/ckpt/.tmp-step_00000001'"
fi
run_stopped pr 3 "$setup" -s checkpoint.every=2 -s checkpoint.keep=1
check "special files at step_00000001, .old-step_ and .tmp-step_: the run completes, pruning leaves them" \
    sh -c "test \"\$(cat '$TMP/pr.rc')\" = 0 && test -p '$TMP/pr/ckpt/step_00000001' &&
           test -p '$TMP/pr/ckpt/.old-step_00000001' &&
           { test -c '$TMP/pr/ckpt/.tmp-step_00000001' || test -p '$TMP/pr/ckpt/.tmp-step_00000001'; } &&
           test ! -e '$TMP/pr/ckpt/step_00000002' &&
           test -s '$TMP/pr/ckpt/step_00000004/manifest.json' &&
           test \"\$(cat '$TMP/pr/ckpt/latest')\" = step_00000004"
