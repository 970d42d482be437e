#!/bin/sh
# Writes that replace a directory's files all together or not at all
# (base/stage_dir.c).  `shardtrain export` into a directory that already
# holds an export: a failure part-way (a full disk at any file, a directory
# where a file goes, a checkpoint that cannot be read) leaves the directory
# byte for byte as it was, and an export that succeeds replaces every file
# it writes and keeps the user's own files.  A run's final weights
# (checkpoint.dir/final, with a LoRA run's final/adapter): a rerun that
# fails writing them leaves the earlier run's whole.
. "$top_srcdir/tests/lib.sh"

prepare_test_data
write_base_ini "$TMP/base.ini" checkpoint.every=2 checkpoint.keep=2
ranks 1 300 "$SHARDTRAIN" train -s checkpoint.dir="$TMP/ck" -s log.dir="$TMP/logs" \
    "$TMP/base.ini" >/dev/null 2>"$TMP/train.err"
check "a tiny run keeps the checkpoints of steps 2 and 4" \
    test -d "$TMP/ck/step_00000002" -a -d "$TMP/ck/step_00000004"

OUT=$TMP/out
ranks 1 60 "$SHARDTRAIN" export "$TMP/ck/step_00000002" "$OUT" >/dev/null 2>"$TMP/e2.err"
ranks 1 60 "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$TMP/ref4" >/dev/null 2>"$TMP/e4.err"
echo "the user's notes" >"$OUT/README.md"
# The files an export writes (gpt2 without a tokenizer), in the order the
# stage moves them: by name.
files="config.json generation_config.json model.safetensors"
check "exports of steps 2 and 4 have different weights" \
    sh -c "! cmp -s '$OUT/model.safetensors' '$TMP/ref4/model.safetensors'"
cp -a "$OUT" "$TMP/before"

# same_dir NAME: one check that $OUT holds exactly what it held before
# (the same names, each byte-equal), with no stage left in it.
same_dir() {
    _bad=""
    [ "$(cd "$OUT" && ls -A | sort)" = "$(cd "$TMP/before" && ls -A | sort)" ] ||
        _bad="names differ: $(cd "$OUT" && ls -A | tr '\n' ' ')"
    for _f in $files README.md; do
        cmp -s "$OUT/$_f" "$TMP/before/$_f" || _bad="$_bad $_f changed"
    done
    if [ -z "$_bad" ]; then ok "$1"; else not_ok "$1"; diag "$_bad"; fi
}

# stuck_line DESCRIPTION ERR STATUS: one check that a write whose put-back
# failed too exited (STATUS) 1 with one error line in ERR, from which the
# caller has read $kept (where the old copies are); the line is shown when
# not.
stuck_line() {
    if [ "$3" -eq 1 ] && [ "$(grep -c '^shardtrain: error:' "$2")" -eq 1 ] && [ -n "$kept" ]
    then
        ok "$1"
    else
        not_ok "$1 (exit $3)"; diag "$(cut -c1-500 "$2")"
    fi
}

# exit1_one_line NAME ERR STATUS PATTERN: one check that a command exited
# (STATUS) 1 with exactly one error line in ERR, matching PATTERN.
exit1_one_line() {
    if [ "$3" -eq 1 ] && [ "$(grep -c '^shardtrain: error:' "$2")" -eq 1 ] &&
        grep '^shardtrain: error:' "$2" | grep -q -- "$4"; then
        ok "$1"
    else
        not_ok "$1 (exit $3)"; diag "$(cut -c1-300 "$2")"
    fi
}

# failed_export NAME PATTERN [VAR=VALUE]: export step 4 into $OUT (with the
# environment assignment, if any) must exit 1 with exactly one error line
# matching PATTERN.
failed_export() {
    _name=$1 _pat=$2
    shift 2
    env "$@" timeout -k 10 60 "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$OUT" \
        >/dev/null 2>"$TMP/fail.err"
    exit1_one_line "$_name" "$TMP/fail.err" $? "$_pat"
}

# recovering_export DESCRIPTION PATTERN [DIR]: an export of step 4 into DIR
# (default $K) that fails at its first move (config.json) exits 1 with one
# error line, after one warning line matching PATTERN from finishing the
# interrupted write.
recovering_export() {
    SHARDTRAIN_TEST_STAGE_FULL_AT=config.json timeout -k 10 60 "$SHARDTRAIN" export \
        "$TMP/ck/step_00000004" "${3:-$K}" >/dev/null 2>"$TMP/recover.err"
    _st=$?
    if [ "$_st" -eq 1 ] && [ "$(grep -c '^shardtrain: error:' "$TMP/recover.err")" -eq 1 ] &&
        [ "$(grep -c '^shardtrain: warning:' "$TMP/recover.err")" -eq 1 ] &&
        grep '^shardtrain: warning:' "$TMP/recover.err" | grep -q -- "$2"; then
        ok "$1"
    else
        not_ok "$1 (exit $_st)"; diag "$(cut -c1-300 "$TMP/recover.err")"
    fi
}

# A full disk at each file's move into place: those before it in name
# order have replaced theirs by then and must be put back.
for f in $files; do
    failed_export "full disk moving $f into place: exit 1, one error line naming it" \
        "$OUT/$f: cannot move the new file into place: No space left on device; hint: .* is as it was" \
        SHARDTRAIN_TEST_STAGE_FULL_AT=$f
    same_dir "after the failure at $f the directory is as it was, with no stage left"
done

# Putting the replaced files back fails as well (:stuck): config.json and
# generation_config.json, replaced before model.safetensors failed, stay
# new.  The error line names them and where their old copies are kept: the
# stage's .old, kept with the journal saying back, so that readers refuse
# $OUT and the next export puts the old copies back first.  A kill once
# such a roll-back is over (:stuck-kill) must leave the same.
for mode in stuck stuck-kill; do
    SHARDTRAIN_TEST_STAGE_FULL_AT=model.safetensors:$mode timeout -k 10 60 "$SHARDTRAIN" \
        export "$TMP/ck/step_00000004" "$OUT" >/dev/null 2>"$TMP/stuck.err"
    st=$?
    if [ $mode = stuck ]; then
        kept=$(sed -n 's/.*; hint: 2 replaced files could not be put back (the old copies are in \([^ ]*\): config.json as 0, generation_config.json as 1); readers refuse .* until the next write into it, which first finishes putting it back$/\1/p' "$TMP/stuck.err")
        stuck_line "put-back failing too: exit 1, one error line naming the files and where their old copies are" \
            "$TMP/stuck.err" "$st"
    else
        kept=$OUT/.shardtrain-stage/.old
        check "killed once a put-back that failed is over: exit 137 (got $st)" test "$st" -eq 137
    fi
    bad=""
    for f in config.json generation_config.json; do cmp -s "$OUT/$f" "$TMP/ref4/$f" || bad="$bad $f"; done
    cmp -s "$OUT/model.safetensors" "$TMP/before/model.safetensors" || bad="$bad model.safetensors"
    check "... two files left new, model.safetensors old${bad:+ (not so:$bad)}; the old copies kept in the stage, the journal saying back" \
        sh -c "[ -z '$bad' ] && [ '$kept' = '$OUT/.shardtrain-stage/.old' ] &&
            cmp -s '$kept/0' '$TMP/before/config.json' &&
            cmp -s '$kept/1' '$TMP/before/generation_config.json' &&
            grep -qx back '$OUT/.shardtrain-stage/.commit'"
    refused "... and a model.init of it is refused (exit 2, one line)" \
        "$OUT: holds files half put back by a shardtrain that was killed, or could not put them back, after a failed write" \
        "$SHARDTRAIN" train -s model.init="$OUT" -s log.dir="$TMP/stuckinit" "$TMP/base.ini"
    # The next export puts the old copies back, then fails at its own first
    # move, which it undoes: the directory is then as before the stuck one.
    recovering_export "... the next export puts the 2 old files back first (one warning line), then fails at config.json (exit 1, one error line)" \
        "$OUT: a shardtrain left a failed write here half undone (it was killed, or could not put a file back); the undoing is now finished (2 old files put back, 0 new removed)" \
        "$OUT"
    same_dir "... leaving the directory as it was before the ($mode) export"
done
# ---- a write killed between its renames ------------------------------------
# K is an earlier export whose config.json and generation_config.json differ
# from step 4's (a user's edit), so that old and new can be told apart in
# every file.  An export of step 4 killed (SIGKILL) just before moving
# model.safetensors, the last by name, leaves the other two new and
# model.safetensors old, with the stage's journal naming them; readers
# refuse K; the next export into K finishes the killed one first (here it
# then fails itself at its first file, leaving what the recovery made).
K=$TMP/killed
cp -a "$TMP/before" "$K"
for f in config.json generation_config.json; do echo " " >>"$K/$f"; done
cp -a "$K" "$TMP/k_before"
# same_as DESCRIPTION REF: K holds exactly REF's files, byte for byte, and
# the user's README.md, with no stage left.
same_as() {
    _bad=""
    for _f in $files; do cmp -s "$K/$_f" "$2/$_f" || _bad="$_bad $_f"; done
    cmp -s "$K/README.md" "$TMP/before/README.md" || _bad="$_bad README.md"
    [ -e "$K/.shardtrain-stage" ] && _bad="$_bad (a stage is left)"
    if [ -z "$_bad" ]; then ok "$1"; else not_ok "$1"; diag "differ:$_bad"; fi
}
# killed_export MODE: export step 4 into K with the stage fault MODE,
# which kills it; sets st.
killed_export() {
    SHARDTRAIN_TEST_STAGE_FULL_AT=$1 timeout -k 10 60 "$SHARDTRAIN" export \
        "$TMP/ck/step_00000004" "$K" >/dev/null 2>"$TMP/killed.err"
    st=$?
}
killed_export model.safetensors:kill
bad=""
for f in config.json generation_config.json; do cmp -s "$K/$f" "$TMP/ref4/$f" || bad="$bad $f"; done
cmp -s "$K/model.safetensors" "$TMP/before/model.safetensors" || bad="$bad model.safetensors"
check "an export killed before moving model.safetensors (exit $st) leaves two files new, model.safetensors old${bad:+ (not so:$bad)}, and its journal" \
    sh -c "[ $st -eq 137 ] && [ -z '$bad' ] && test -s '$K/.shardtrain-stage/.commit'"
refused "a model.init of the half-written directory is refused (exit 2, one line naming the journal)" \
    "$K: holds files half moved in by a shardtrain that was killed while writing them ($K/.shardtrain-stage/.commit names them)" \
    "$SHARDTRAIN" train -s model.init="$K" -s log.dir="$TMP/kinit" "$TMP/base.ini"
refused "... so is its model.safetensors given as a file" "$K: holds files half moved in" \
    "$SHARDTRAIN" train -s model.init="$K/model.safetensors" -s log.dir="$TMP/kinit" "$TMP/base.ini"
printf 'some text\n' >"$TMP/k.txt"
refused "... so is the directory as a tokenizer" "$K: holds files half moved in" \
    "$SHARDTRAIN" prepare --tokenizer "$K" "$TMP/k.txt" "$TMP/k_data"
recovering_export "the next export finishes the killed one first (one warning line), then fails at config.json (exit 1, one error line)" \
    "$K: a shardtrain was killed while moving its files in here; its write is now finished (1 of its 3 files moved in now)"
same_as "... leaving the whole of the killed export of step 4" "$TMP/ref4"

# Killed while undoing: moving model.safetensors fails (ENOSPC) and the
# process is killed once generation_config.json is put back, config.json
# still step 4's.  The next export puts config.json back.
rm -rf "$K"
cp -a "$TMP/k_before" "$K"
killed_export model.safetensors:kill-back
bad=""
cmp -s "$K/config.json" "$TMP/ref4/config.json" || bad="$bad config.json"
for f in generation_config.json model.safetensors; do cmp -s "$K/$f" "$TMP/k_before/$f" || bad="$bad $f"; done
check "an export killed while undoing its failed write (exit $st) leaves config.json new, the others old${bad:+ (not so:$bad)}" \
    sh -c "[ $st -eq 137 ] && [ -z '$bad' ] && grep -qx back '$K/.shardtrain-stage/.commit'"
recovering_export "the next export finishes the undoing first (one warning line), then fails at config.json (exit 1, one error line)" \
    "$K: a shardtrain left a failed write here half undone (it was killed, or could not put a file back); the undoing is now finished (1 old file put back, 0 new removed)"
same_as "... leaving the directory as it was before the killed export" "$TMP/k_before"

# A roll-back that cannot be recorded is not begun: moving model.safetensors
# fails (ENOSPC) and so does rewriting the journal to "back".  The journal
# still says forward, which is what K then holds: two files new,
# model.safetensors old.  Readers refuse K, and the next export finishes
# the write forward.
rm -rf "$K"
cp -a "$TMP/k_before" "$K"
SHARDTRAIN_TEST_STAGE_FULL_AT=model.safetensors:no-back timeout -k 10 60 "$SHARDTRAIN" \
    export "$TMP/ck/step_00000004" "$K" >/dev/null 2>"$TMP/noback.err"
st=$?
exit1_one_line "an export whose undoing cannot be recorded fails (exit $st) with one error line saying what K holds" \
    "$TMP/noback.err" "$st" \
    "nor record the undoing (No space left on device), so $K is left with 2 of its 3 files new, which readers refuse"
bad=""
for f in config.json generation_config.json; do cmp -s "$K/$f" "$TMP/ref4/$f" || bad="$bad $f"; done
cmp -s "$K/model.safetensors" "$TMP/k_before/model.safetensors" || bad="$bad model.safetensors"
check "... and puts nothing back: two files new, model.safetensors old${bad:+ (not so:$bad)}, the journal saying forward" \
    sh -c "[ -z '$bad' ] && grep -qx forward '$K/.shardtrain-stage/.commit' &&
        test -f '$K/.shardtrain-stage/model.safetensors'"
refused "... and a model.init of K is refused (exit 2, one line)" "$K: holds files half moved in" \
    "$SHARDTRAIN" train -s model.init="$K" -s log.dir="$TMP/kinit" "$TMP/base.ini"
recovering_export "the next export finishes it forward first (one warning line), then fails at config.json (exit 1, one error line)" \
    "$K: a shardtrain was killed while moving its files in here; its write is now finished (1 of its 3 files moved in now)"
same_as "... leaving the whole of the export of step 4" "$TMP/ref4"

# taken_whole NAME: one check that a run with model.init K trains (exit 0,
# no error line), its files under $TMP/NAME*.
taken_whole() {
    ranks 1 300 "$SHARDTRAIN" train -s model.init="$K" -s checkpoint.every=0 \
        -s checkpoint.dir="$TMP/$1_ck" -s log.dir="$TMP/$1" "$TMP/base.ini" \
        >/dev/null 2>"$TMP/$1.err"
    _st=$?
    check "... and a model.init of K is taken as whole (exit $_st, no error line)" \
        sh -c "[ $_st -eq 0 ] && ! grep -q '^shardtrain: error:' '$TMP/$1.err'"
}
# Killed just after its last rename: every file is new, but the stage and
# its journal are left.  Readers take K as whole; the next export clears
# the journal, saying so.
rm -rf "$K"
cp -a "$TMP/k_before" "$K"
killed_export model.safetensors:kill-after
bad=""
for f in $files; do cmp -s "$K/$f" "$TMP/ref4/$f" || bad="$bad $f"; done
check "an export killed just after its last rename (exit $st) leaves every file new${bad:+ (not so:$bad)}, and its journal" \
    sh -c "[ $st -eq 137 ] && [ -z '$bad' ] && grep -qx forward '$K/.shardtrain-stage/.commit'"
taken_whole kafter
recovering_export "the next export clears the journal first (one warning line), then fails at config.json (exit 1, one error line)" \
    "$K: a shardtrain was killed just after moving its files in here; its record of them is now cleared (all 3 had moved in)"
same_as "... leaving the whole of the export of step 4" "$TMP/ref4"
# Killed once its roll-back is over: every file old again, the "back"
# journal left.  Readers take K as whole; the next export clears the
# journal (nothing left to put back).
rm -rf "$K"
cp -a "$TMP/k_before" "$K"
killed_export model.safetensors:kill-back-done
bad=""
for f in $files; do cmp -s "$K/$f" "$TMP/k_before/$f" || bad="$bad $f"; done
check "an export killed once its roll-back is over (exit $st) leaves every file old${bad:+ (not so:$bad)}, and its journal saying back" \
    sh -c "[ $st -eq 137 ] && [ -z '$bad' ] && grep -qx back '$K/.shardtrain-stage/.commit'"
taken_whole kback
recovering_export "the next export clears the journal first (one warning line), then fails at config.json (exit 1, one error line)" \
    "$K: a shardtrain left a failed write here half undone (it was killed, or could not put a file back); the undoing is now finished (0 old files put back, 0 new removed)"
same_as "... leaving the directory as it was before the killed export" "$TMP/k_before"
# A journal that is not one (cut short, edited): nothing is guessed, the
# export refuses and keeps the stage for the user to look at.
mkdir "$K/.shardtrain-stage"
printf 'shardtrain stage journal 1\nforward\no- ../escape\n' >"$K/.shardtrain-stage/.commit"
timeout -k 10 60 "$SHARDTRAIN" export "$TMP/ck/step_00000002" "$K" >/dev/null 2>"$TMP/badj.err"
st=$?
check "an unreadable journal: the export is refused (exit $st, one error line) and the stage kept" \
    sh -c "[ $st -eq 1 ] && [ \$(grep -c '^shardtrain: error:' '$TMP/badj.err') -eq 1 ] &&
        grep -q 'cannot read the record of a write that was interrupted here: Invalid argument' '$TMP/badj.err' &&
        test -f '$K/.shardtrain-stage/.commit'"
rm -rf "$K/.shardtrain-stage"
same_as "... and the directory is unchanged" "$TMP/k_before"
rm -rf "$K" "$TMP/k_before"

# Another shardtrain writing the same directory (its flock held here by
# flock(1) for the length of one export): refused, nothing changed.
flock "$OUT" sh -c "timeout -k 10 60 '$SHARDTRAIN' export '$TMP/ck/step_00000004' '$OUT' \
    >/dev/null 2>'$TMP/locked.err'; echo \$? >'$TMP/locked.rc'"
check "an export into a directory another one is writing is refused (exit $(cat "$TMP/locked.rc"), one line)" \
    sh -c "[ \$(cat '$TMP/locked.rc') -eq 1 ] && [ \$(grep -c '^shardtrain: error:' '$TMP/locked.err') -eq 1 ] &&
        grep -q 'another shardtrain is writing files into this directory' '$TMP/locked.err'"
same_dir "the refused export changed nothing"

# A directory where the export writes a file: refused before anything moves.
mkdir "$OUT/generation_config.json.d"
mv "$OUT/generation_config.json" "$OUT/generation_config.json.d/keep.json"
mv "$OUT/generation_config.json.d" "$OUT/generation_config.json"
cp -a "$OUT" "$TMP/before_dir"
refused "a directory named generation_config.json is refused (exit 2, one line)" \
    "$OUT/generation_config.json: is a directory, not a file" \
    "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$OUT"
check "the refused export left model.safetensors and config.json as they were" \
    sh -c "cmp -s '$OUT/model.safetensors' '$TMP/before/model.safetensors' &&
        cmp -s '$OUT/config.json' '$TMP/before/config.json'"
check "the directory in the way keeps what it held" \
    cmp -s "$OUT/generation_config.json/keep.json" "$TMP/before/generation_config.json"
check "the refused export left no stage" test ! -e "$OUT/.shardtrain-stage"
rm -rf "$OUT/generation_config.json"
cp "$TMP/before/generation_config.json" "$OUT/generation_config.json"

# A checkpoint that fails to read part-way: a byte of the shard's last
# block flipped, found when the stream reaches the last units.
cp -a "$TMP/ck/step_00000004" "$TMP/flip"
python3 -c '
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-5] ^= 0xFF
open(p, "wb").write(b)' "$TMP/flip/shard_00000-of-00001.bin"
timeout -k 10 60 "$SHARDTRAIN" export "$TMP/flip" "$OUT" >/dev/null 2>"$TMP/flip.err"
st=$?
check "exporting a checkpoint corrupt in its last block fails (exit $st, one error line)" \
    sh -c "[ $st -eq 2 ] && [ \$(grep -c '^shardtrain: error:' '$TMP/flip.err') -eq 1 ] &&
        grep -q 'checksum mismatch in block 1' '$TMP/flip.err'"
same_dir "after the unreadable checkpoint the directory is as it was, with no stage left"

timeout -k 10 60 "$SHARDTRAIN" export "$TMP/flip" "$TMP/new/out" >/dev/null 2>&1
check "the same failure into a new directory leaves no directory behind" test ! -e "$TMP/new/out"

# An output directory that is a file, or has one in its path: refused,
# the file untouched.
echo "not a directory" >"$TMP/afile"
cp "$TMP/afile" "$TMP/afile.before"
refused "export into a regular file is refused (exit 2, one line)" \
    "$TMP/afile: is a file, not a directory; hint: give a directory" \
    "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$TMP/afile"
refused "export below a regular file is refused (exit 2, one line)" \
    "$TMP/afile/out: has a file in its path, not a directory" \
    "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$TMP/afile/out"
check "the file is untouched" cmp -s "$TMP/afile" "$TMP/afile.before"

# A stage left by an export that was killed is cleared, and a good export
# then replaces every file it writes and keeps the user's README.md.
mkdir "$OUT/.shardtrain-stage"
echo junk >"$OUT/.shardtrain-stage/model.safetensors"
ranks 1 60 "$SHARDTRAIN" export "$TMP/ck/step_00000004" "$OUT" >/dev/null 2>"$TMP/ok.err"
st=$?
bad=""
for f in $files; do cmp -s "$OUT/$f" "$TMP/ref4/$f" || bad="$bad $f"; done
check "the export over the old one succeeds (exit $st) and equals a fresh export of step 4${bad:+ (differ:$bad)}" \
    test "$st" -eq 0 -a -z "$bad"
check "the user's README.md is kept" cmp -s "$OUT/README.md" "$TMP/before/README.md"
check "no stage is left after a good export" test ! -e "$OUT/.shardtrain-stage"
check "the directory holds the export's files and README.md alone" \
    test "$(cd "$OUT" && ls -A | tr '\n' ' ')" = "README.md config.json generation_config.json model.safetensors "

# ---- a directory this user may not write -----------------------------------
# Exports as an unprivileged user (nobody, by setpriv; the tests run as
# root, whom no permission stops).  Into a copy of the earlier export that
# root owns (mode 755), the stage cannot be made; into one whose directory
# is sticky (mode 1777, like /tmp), the stage is made but root's files can
# be neither linked aside nor replaced.  Either way: exit 1, one error line
# naming the permission, the directory unchanged.
chmod 711 "$TMP"   # nobody may pass through to the checkpoint and the copies
chmod -R a+rX "$TMP/ck" "$TMP/before"   # and read them, whatever the umask
mkdir "$TMP/bin" && cp "$SHARDTRAIN" "$TMP/bin/shardtrain" && chmod 755 "$TMP/bin" "$TMP/bin/shardtrain"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$TMP/bin/shardtrain" "$@"; }
# denied DESCRIPTION MODE PATTERN: the export of step 4 by nobody into a
# copy of $TMP/before with mode MODE.
denied() {
    _p=$TMP/perm$2
    cp -a "$TMP/before" "$_p" && chmod "$2" "$_p"
    as_nobody export "$TMP/ck/step_00000004" "$_p" >/dev/null 2>"$TMP/perm.err"
    exit1_one_line "$1: exit 1, one error line" "$TMP/perm.err" $? "$3"
    if diff -r "$TMP/before" "$_p" >"$TMP/diff.out" 2>&1; then
        ok "$1: the directory is as it was, with no stage left"
    else
        not_ok "$1: the directory is as it was, with no stage left"; diag "$(head -n 5 "$TMP/diff.out")"
    fi
}
denied "an export by nobody into root's directory" 755 \
    "$TMP/perm755/.shardtrain-stage: cannot create the staging directory: Permission denied; hint: check that $TMP/perm755 is writable"
denied "an export by nobody into a sticky directory of root's files" 1777 \
    "$TMP/perm1777/config.json: cannot move the new file into place: Operation not permitted; hint: $TMP/perm1777 is as it was"
chmod 700 "$TMP"

# ---- the final weights of a rerun ------------------------------------------

# fin NAME FAULT [-s ...]: a run of the base configuration whose final
# weights go to $TMP/fin/final (no step checkpoints), with
# SHARDTRAIN_TEST_STAGE_FULL_AT=FAULT (- for none), its stderr in
# $TMP/NAME.err; returns its exit status.
fin() {
    _n=$1 _f=$2
    shift 2
    [ "$_f" = - ] && _f=
    SHARDTRAIN_TEST_STAGE_FULL_AT=$_f timeout -k 10 300 "$SHARDTRAIN" train \
        -s checkpoint.every=0 -s checkpoint.dir="$TMP/fin" -s log.dir="$TMP/$_n.logs" "$@" \
        "$TMP/base.ini" >"$TMP/$_n.out" 2>"$TMP/$_n.err"
}
# failed_rerun DESCRIPTION PATTERN NAME FAULT [-s ...]: the run of fin
# exits 1 with one error line matching PATTERN, and $TMP/fin/final is then
# byte for byte what $TMP/fin_before holds, with no stage left.
failed_rerun() {
    _name=$1 _pat=$2 _e=$TMP/$3.err _n=$3
    shift 2
    fin "$@"
    _st=$?
    if [ "$_st" -eq 1 ] && [ "$(grep -c '^shardtrain: error:' "$_e")" -eq 1 ] &&
        grep '^shardtrain: error:' "$_e" | grep -q -- "$_pat" &&
        tail -n 1 "$TMP/$_n.out" | grep -q ', final weights not written$'; then
        ok "$_name: exit 1, one error line, and the last line says no final weights were written"
    else
        not_ok "$_name: exit 1, one error line, and the last line says no final weights were written (exit $_st)"
        diag "$(cut -c1-300 "$_e")" "$(tail -n 1 "$TMP/$_n.out" | cut -c1-300)"
    fi
    if diff -r "$TMP/fin_before" "$TMP/fin/final" >"$TMP/diff.out" 2>&1; then
        ok "$_name: the earlier final weights are whole, with no stage left"
    else
        not_ok "$_name: the earlier final weights are whole, with no stage left"
        diag "$(head -n 5 "$TMP/diff.out")"
    fi
}

fin full0 -
check "a full run writes its final weights" test -s "$TMP/fin/final/model.safetensors"
cp -a "$TMP/fin/final" "$TMP/fin_before"
# A LoRA rerun writes final/adapter/ too, new in this directory; its move
# comes first by name, and must be undone with the others.
failed_rerun "a LoRA rerun failing at model.safetensors, the last file it moves" \
    "final/model.safetensors: cannot move the new file into place: No space left" \
    lora1 model.safetensors -s lora.rank=4
# The same with putting back failing too (:stuck): the replaced files'
# old copies are kept and named, the new adapter files left and named; the
# next run writing final/ puts it back first, then writes its own.
fin lora_stuck model.safetensors:stuck -s lora.rank=4
st=$?
kept=$(sed -n 's/.*; hint: 2 replaced files could not be put back (the old copies are in \([^ ]*\): config.json as 2, generation_config.json as 3); 2 new files could not be removed (adapter\/adapter_config.json, adapter\/adapter_model.safetensors); readers refuse .*$/\1/p' "$TMP/lora_stuck.err")
stuck_line "a LoRA rerun with put-back failing: exit 1, one error line naming the old copies and the new files left" \
    "$TMP/lora_stuck.err" "$st"
check "... the old copies are the earlier run's files, the new adapter files are where it says" \
    sh -c "[ '$kept' = '$TMP/fin/final/.shardtrain-stage/.old' ] &&
        cmp -s '$kept/2' '$TMP/fin_before/config.json' &&
        cmp -s '$kept/3' '$TMP/fin_before/generation_config.json' &&
        test -s '$TMP/fin/final/adapter/adapter_model.safetensors'"
failed_rerun "the next rerun, failing at config.json, first puts the stuck one back" \
    "final/config.json: cannot move the new file into place" \
    stuck_next config.json -s train.seed=6
check "... saying so in one warning line (2 old files put back, 2 new removed)" \
    grep -q "^shardtrain: warning: $TMP/fin/final: a shardtrain left a failed write here half undone (it was killed, or could not put a file back); the undoing is now finished (2 old files put back, 2 new removed)$" "$TMP/stuck_next.err"
rm -rf "$TMP/fin/final"
cp -a "$TMP/fin_before" "$TMP/fin/final"
failed_rerun "a rerun with another seed failing at config.json" \
    "final/config.json: cannot move the new file into place" \
    seed1 config.json -s train.seed=6
fin lora2 - -s lora.rank=4
st=$?
check "the LoRA rerun without a fault writes (exit $st) its merged weights and adapters" \
    sh -c "[ $st -eq 0 ] && ! cmp -s '$TMP/fin/final/model.safetensors' '$TMP/fin_before/model.safetensors' &&
        test -s '$TMP/fin/final/adapter/adapter_model.safetensors'"
rm -rf "$TMP/fin_before"
cp -a "$TMP/fin/final" "$TMP/fin_before"
failed_rerun "a LoRA rerun failing at its adapter_model.safetensors (in final/adapter)" \
    "final/adapter/adapter_model.safetensors: cannot move the new file into place" \
    lora3 adapter_model.safetensors -s lora.rank=4 -s train.seed=7

# A run killed (SIGKILL) while moving its final weights in: an export of
# them is refused, and the next run writing them finishes the killed
# write first, then replaces it with its own.
fin fkill model.safetensors:kill
st=$?
check "a run killed while moving its final weights in (exit $st) leaves the journal" \
    sh -c "[ $st -eq 137 ] && test -s '$TMP/fin/final/.shardtrain-stage/.commit'"
refused "exporting the half-written final weights is refused (exit 2, one line)" \
    "$TMP/fin/final: holds files half moved in by a shardtrain that was killed" \
    "$SHARDTRAIN" export "$TMP/fin" "$TMP/fin_export"
check "... and makes no output directory" test ! -e "$TMP/fin_export"
fin frerun -
st=$?
check "the rerun (exit $st) finishes the killed write first, with one warning line, and leaves no stage" \
    sh -c "[ $st -eq 0 ] && [ \$(grep -c '^shardtrain: warning:' '$TMP/frerun.err') -eq 1 ] &&
        grep -q 'its write is now finished (1 of its 3 files moved in now)' '$TMP/frerun.err' &&
        test ! -e '$TMP/fin/final/.shardtrain-stage'"
ranks 1 60 "$SHARDTRAIN" export "$TMP/fin" "$TMP/fin_export" >/dev/null 2>"$TMP/fin_export.err"
st=$?
check "its final weights then export (exit $st)" \
    sh -c "[ $st -eq 0 ] && cmp -s '$TMP/fin/final/model.safetensors' '$TMP/fin_export/model.safetensors'"

# A run killed just after its last rename into final/: the journal is
# left, every file moved in, and an export takes the final weights.
rm -rf "$TMP/fin_export"
fin fafter model.safetensors:kill-after
st=$?
check "a run killed just after moving its final weights in (exit $st) leaves the journal, nothing staged" \
    sh -c "[ $st -eq 137 ] && test -s '$TMP/fin/final/.shardtrain-stage/.commit' &&
        test ! -e '$TMP/fin/final/.shardtrain-stage/model.safetensors'"
ranks 1 60 "$SHARDTRAIN" export "$TMP/fin" "$TMP/fin_export" >/dev/null 2>"$TMP/fin_export.err"
st=$?
check "... and its final weights export all the same (exit $st)" \
    sh -c "[ $st -eq 0 ] && cmp -s '$TMP/fin/final/model.safetensors' '$TMP/fin_export/model.safetensors'"
