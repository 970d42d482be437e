#!/bin/sh
# Replays the committed corpus of every fuzz target (tests/fuzz/TARGET/:
# seeds from real files and one regression input per finding) through the
# target once, without mutation: a few seconds in all.  Any crash,
# sanitizer report or broken invariant fails the test and names the input.
# `make fuzz` is the long run that grows these corpora.  A self-test per
# target shows that an accepted input can make the replay fail.
. "$top_srcdir/tests/lib.sh"
: "${top_builddir:=$top_srcdir}"
# The file-reading targets write each input under TMPDIR.
TMPDIR=$TMP; export TMPDIR

for t in fuzz_safetensors fuzz_config fuzz_manifest fuzz_shard fuzz_hf_config fuzz_tokenizer \
         fuzz_jsonl; do
    bin="$top_builddir/tests/$t"
    corpus="$top_srcdir/tests/fuzz/$t"
    if [ ! -x "$bin" ]; then
        not_ok "$t: target not built (configure requires clang with libFuzzer)"
        continue
    fi
    n=$(ls "$corpus" | wc -l)
    check "$t: corpus has seeds ($n)" test "$n" -ge 1
    # Inputs given as files are run once each; libFuzzer exits non-zero on
    # the first crash.  Leaks count: the parsers free what they allocate.
    if ASAN_OPTIONS=detect_leaks=1 "$bin" -timeout=10 -rss_limit_mb=2048 "$corpus"/* \
            >"$TMP/$t.log" 2>&1 && ! grep -q -e '==ERROR' -e 'runtime error' \
            -e 'invariant broken' "$TMP/$t.log"; then
        ok "$t: $n corpus inputs replay without a crash"
    else
        not_ok "$t: a corpus input crashed the target"
        diag "$(grep -v '^Running:\|^Executed' "$TMP/$t.log" | tail -n 30)"
    fi
    # Self-test: the seeds include accepted inputs, and with FUZZ_SELF_TEST
    # an accepted input aborts, so the replay must fail.
    if FUZZ_SELF_TEST=1 "$bin" "$corpus"/* >"$TMP/$t.self" 2>&1; then
        not_ok "$t: self-test: a deliberate crash was not reported"
    else
        check "$t: self-test: a crash in the target fails the replay" \
            grep -q 'deadly signal' "$TMP/$t.self"
    fi
done
exit 0
