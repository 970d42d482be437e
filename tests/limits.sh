#!/bin/sh
# Limits that used to truncate silently (issue 17, class 6): every limit is
# enforced before use with one clear error line and exit status 2, and
# nothing is cut: a ${VAR} name longer than 127 bytes, a path key longer
# than 3072 bytes (a 4,084-byte log.dir once wrote to "metrics.js"), an
# error line longer than 2,048 bytes keeps its hint, an empty
# checkpoint.dir or log.dir names its line, and an output directory that
# cannot be written is found at start, before any training step.
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt"

long_var=$(printf 'V%.0s' $(seq 1 200))
refused "a \${VAR} name of 200 bytes is refused, not cut" \
    "command line:3: log.dir: environment variable name 'VVVV.*is 200 bytes, longer than 127" \
    "$SHARDTRAIN" check -s "log.dir=\${$long_var:-x}" /dev/null

long_dir=$TMP/$(printf 'd%.0s' $(seq 1 4084))
refused "a 4,084-byte log.dir is refused naming the key" \
    "log.dir is [0-9]* bytes long, over the 3072 this build accepts for a path; hint:" \
    "$SHARDTRAIN" train -s "log.dir=$long_dir" "$TMP/base.ini"
check "... and nothing was written under a cut name" test ! -e "$TMP/dddd"

# An error line over 2,048 bytes: a data glob of 3,000 bytes that matches
# nothing; the line must end with its hint, after the glob.
long_glob=$TMP/$(printf 'g%.0s' $(seq 1 3000))_*.bin
ranks 1 60 "$SHARDTRAIN" train -s "data.train=$long_glob" "$TMP/base.ini" >/dev/null 2>"$TMP/glob.err"
st=$?
len=$(grep '^shardtrain: error:' "$TMP/glob.err" | head -n 1 | wc -c)
check "an error line of $len bytes (> 2048) is whole, hint included (exit $st)" \
    sh -c "test $st -eq 2 && test $len -gt 2048 && grep '^shardtrain: error:' '$TMP/glob.err' | grep -q '_\\*\\.bin.; check the path (relative paths are relative to the working directory)\$'"

printf '[model]\npreset = tiny\n[checkpoint]\ndir =\n' >"$TMP/emptyck.ini"
refused "an empty checkpoint.dir names its line" "emptyck.ini:4: checkpoint.dir is empty; hint:" \
    "$SHARDTRAIN" check "$TMP/emptyck.ini"

# A checkpoint.dir under a regular file cannot be made: found at start,
# before any step (no metrics line), naming the key.
: >"$TMP/afile"
refused "an unwritable checkpoint.dir is found at start" \
    "checkpoint.dir = $TMP/afile/ck: cannot create or write to this directory" \
    "$SHARDTRAIN" train -s checkpoint.dir="$TMP/afile/ck" "$TMP/base.ini"
check "... before any training step" test ! -s "$TMP/logs/metrics.jsonl"

# Names inih would cut to 49 bytes are refused at their line.
printf '[log]\n%s = x\n' "dir$(printf 'x%.0s' $(seq 1 60))" >"$TMP/key.ini"
refused "a 63-byte key name: refused at its line, not cut" "key.ini:2: key name 'dirxxx" \
    "$SHARDTRAIN" check "$TMP/key.ini"
printf '[%s]\n' "log$(printf 'x%.0s' $(seq 1 150))" >"$TMP/sect.ini"
refused "a 153-byte section name: refused at its line as unknown" "sect.ini:1: unknown section \[logxxx" \
    "$SHARDTRAIN" check "$TMP/sect.ini"

# A path key over the limit after ${VAR} expansion is refused at its line;
# a long one under it is used whole (the files in it keep their names).
# Directory names of 200 bytes: a component may not exceed 255.
seg=$(printf 'd%.0s' $(seq 1 200))
deep=$TMP/logs
while [ $((${#deep} + 201)) -le 3072 ]; do deep=$deep/$seg; done
printf '[log]\ndir = ${OVER}\n' >"$TMP/over.ini"
OVER=$deep/$seg$seg refused "a log.dir over the limit after \${VAR} expansion: refused at its line" \
    "over.ini:2: log.dir is [0-9]* bytes long" "$SHARDTRAIN" check "$TMP/over.ini"
ranks 1 120 "$SHARDTRAIN" train -s log.dir="$deep" -s train.steps=1 "$TMP/base.ini" \
    >"$TMP/deep.out" 2>"$TMP/deep.err"
check "a $(printf %s "$deep" | wc -c)-byte log.dir: trains and writes metrics.jsonl whole" \
    test -s "$deep/metrics.jsonl"

refused "a log.dir that cannot be made: exit 2 naming it" \
    "log.dir = $TMP/afile/logs: cannot create or write to this directory" \
    "$SHARDTRAIN" train -s "log.dir=$TMP/afile/logs" "$TMP/base.ini"
