#!/bin/sh
# Inputs that are not regular files, or that change under a run (issue 17,
# class 4): a FIFO where the configuration, a token shard, prepare's text,
# `latest` or the run's metrics.jsonl is expected is one error line and
# exit status 2, never a hang; a FIFO or a device where a file is written
# by renaming over its name (plot -o, prepare's shards, the run's
# summary.json and plot.svg) is refused the same way and left in place,
# never replaced by a file; /dev/zero as the configuration is refused at its first line with
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
