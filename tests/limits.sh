#!/bin/sh
# Limits that must not silently cut (issue 17, class 6): ${VAR} names,
# section and key names, path values and the files made under them, error
# lines, and output directories that cannot be written.  Each limit is
# enforced before use with one error line at the value's FILE:LINE, or the
# thing is as long as it was written.
. "$top_srcdir/tests/lib.sh"
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt" train.steps=1

# long N CHAR: a string of N copies of CHAR.
long() { awk -v n="$1" -v c="$2" 'BEGIN { while (n-- > 0) printf "%s", c }'; }

# refused NAME PATTERN COMMAND...: exit 2 and exactly one error line, which
# matches PATTERN (a fixed string).
refused() {
    name=$1 pat=$2 err=$TMP/refused$tap_n.err
    shift 2
    "$@" >/dev/null 2>"$err"
    st=$?
    if [ "$st" -eq 2 ] && [ "$(grep -c '^shardtrain: error:' "$err")" -eq 1 ] &&
        grep '^shardtrain: error:' "$err" | grep -qF -- "$pat"; then
        ok "$name"
    else
        not_ok "$name (exit $st)"; diag "$(cut -c1-300 "$err")"
    fi
}

# ${VAR} names are looked up whole.  The name cut at 127 bytes is set to
# something else, so a cut lookup shows.  (180 bytes: a configuration line
# holds 199.)
n200=V$(long 179 A)
n127=$(printf '%s' "$n200" | cut -c1-127)
printf '[log]\ndir = ${%s}\n' "$n200" >"$TMP/var.ini"
env "$n200=whole" "$n127=cut" "$SHARDTRAIN" check "$TMP/var.ini" >"$TMP/var.out" 2>&1
check "a 180-byte \${VAR} name resolves to that variable, not to its first 127 bytes" \
    grep -q '^dir = whole ' "$TMP/var.out"
printf '[log]\ndir = ${%s}\n' "$n200" >"$TMP/unset.ini"
refused "an unset 180-byte \${VAR}: one error at its line, with the hint" \
    "unset.ini:2: log.dir: undefined environment variable 'VAAAA" \
    "$SHARDTRAIN" check "$TMP/unset.ini"
check "... and the hint is kept" grep -q 'hint: set it or write' "$TMP/refused$((tap_n - 1)).err"

# Names inih would cut to 49 bytes.
printf '[log]\n%s = x\n' "dir$(long 60 x)" >"$TMP/key.ini"
refused "a 63-byte key name: refused at its line, not cut" "key.ini:2: key name 'dirxxx" \
    "$SHARDTRAIN" check "$TMP/key.ini"
printf '[%s]\n' "log$(long 150 x)" >"$TMP/sect.ini"
refused "a 153-byte section name: refused at its line as unknown" "sect.ini:1: unknown section [logxxx" \
    "$SHARDTRAIN" check "$TMP/sect.ini"

# A path value over the limit is refused at its line; a long one under it
# is used whole (the files in it keep their names).  Directory names of 200
# bytes: a component may not exceed 255.
seg=$(long 200 d)
deep=$TMP/logs
while [ $((${#deep} + 201)) -le 3840 ]; do deep=$deep/$seg; done
over=$deep/$seg$seg
printf '[log]\ndir = ${OVER}\n' >"$TMP/over.ini"
OVER=$over refused "a $(printf %s "$over" | wc -c)-byte log.dir: refused at its line, naming the key and the limit" \
    "over.ini:2: log.dir is" "$SHARDTRAIN" check "$TMP/over.ini"
refused "... the same from the command line" "log.dir is" \
    "$SHARDTRAIN" check -s log.dir="$over" "$TMP/base.ini"
"$SHARDTRAIN" train -s log.dir="$deep" "$TMP/base.ini" >"$TMP/deep.out" 2>"$TMP/deep.err"
check "a $(printf %s "$deep" | wc -c)-byte log.dir: trains and writes metrics.jsonl whole" \
    test -s "$deep/metrics.jsonl" || diag "$(cut -c1-200 "$TMP/deep.err")"

# An error line longer than 2048 bytes keeps its end (the hint).
refused "an error about a 3000-byte data.train glob keeps its end" "$(long 3000 z)'" \
    "$SHARDTRAIN" train -s "data.train=$TMP/$(long 3000 z)" "$TMP/base.ini"
check "... which is the hint" grep -q "'; check the path (relative paths are relative to the working directory)\$" \
    "$TMP/refused$((tap_n - 1)).err"

# Output directories are made and written into before any work, and one
# that cannot be is an error at its config line.
: >"$TMP/afile"
write_base_ini "$TMP/ckdir.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/afile/ckpt" train.steps=1
rm -rf "$TMP/logs"
refused "a checkpoint.dir that cannot be made: exit 2 at its line" \
    "ckdir.ini:$(grep -n "^dir = $TMP/afile/ckpt" "$TMP/ckdir.ini" | cut -d: -f1): checkpoint.dir = $TMP/afile/ckpt: cannot create" \
    "$SHARDTRAIN" train "$TMP/ckdir.ini"
check "... before any training step (no metrics.jsonl)" test ! -e "$TMP/logs/metrics.jsonl"
write_base_ini "$TMP/empty.ini" log.dir="$TMP/logs" checkpoint.dir= train.steps=1
refused "an empty checkpoint.dir: exit 2 at its line" "empty.ini:" \
    "$SHARDTRAIN" train "$TMP/empty.ini"
check "... naming the key" grep -q "checkpoint.dir is empty" "$TMP/refused$((tap_n - 1)).err"
refused "a log.dir that cannot be made: exit 2 naming it" "log.dir = $TMP/afile/logs: cannot create" \
    "$SHARDTRAIN" train -s "log.dir=$TMP/afile/logs" "$TMP/base.ini"
