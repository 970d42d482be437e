#!/bin/sh
# Fuzzes the safetensors header parser with libFuzzer for a bounded time
# (tests/fuzz_safetensors, built by clang with AddressSanitizer and
# UndefinedBehaviorSanitizer from src/hf/safetensors_parse.c and base/log.c), starting
# from a seed corpus of valid files and the malformed table of
# tests/safetensors_cases.py.  Any crash, sanitizer report or broken
# invariant fails the test; a self-test shows that a crash is caught.
. "$top_srcdir/tests/lib.sh"
: "${top_builddir:=$top_srcdir}"
: "${FUZZ_SECONDS:=20}"
fuzz="$top_builddir/tests/fuzz_safetensors"
cases="$top_srcdir/tests/safetensors_cases.py"

if [ ! -x "$fuzz" ]; then
    not_ok "fuzz target $fuzz not built (configure requires clang with libFuzzer)"
    exit 1
fi
ok "fuzz target built"

python3 "$cases" seeds "$TMP/corpus" && python3 "$cases" bad "$TMP/bad"
check "seed corpus and malformed table written" \
    test "$(ls "$TMP/corpus" | wc -l)" -ge 5 -a "$(ls "$TMP/bad" | wc -l)" -ge 20
cp "$TMP"/bad/*.safetensors "$TMP/corpus/"

# Every malformed file on its own first: a regression there names the file.
if "$fuzz" "$TMP"/bad/*.safetensors >"$TMP/replay.log" 2>&1; then
    ok "the malformed table replays through the fuzz target without a crash"
else
    not_ok "the malformed table replays through the fuzz target without a crash"
    diag "$(tail -n 30 "$TMP/replay.log")"
fi

# The bounded run.  timeout is only a hang guard, well above max_total_time.
# The parser is pure, so leaks are checked too (the suite turns them off
# elsewhere because of MPI's).
mkdir -p "$TMP/artifacts"
ASAN_OPTIONS=detect_leaks=1 timeout $((FUZZ_SECONDS * 4 + 60)) "$fuzz" -max_total_time="$FUZZ_SECONDS" -runs=2000000 \
    -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$TMP/artifacts/" "$TMP/corpus" >"$TMP/fuzz.log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/fuzz.log")
if [ "$rc" -eq 0 ] && ! grep -q -e '==ERROR' -e 'deadly signal' -e 'runtime error' \
        -e 'invariant broken' "$TMP/fuzz.log" && [ -z "$(ls "$TMP/artifacts")" ]; then
    ok "libFuzzer: no crash in ${runs:-?} runs (${FUZZ_SECONDS}s)"
else
    not_ok "libFuzzer found a problem (exit $rc); the input is under artifacts"
    diag "$(grep -v '^#' "$TMP/fuzz.log" | tail -n 40)"
fi
check "libFuzzer executed at least 1000 inputs (${runs:-none})" test "${runs:-0}" -ge 1000

# Self-test: with FUZZ_SELF_TEST every accepted input aborts, so the run
# must fail and leave a crash artifact, or the checks above prove nothing.
mkdir -p "$TMP/self"
FUZZ_SELF_TEST=1 timeout 120 "$fuzz" -runs=100 -artifact_prefix="$TMP/self/" \
    "$TMP/corpus" >"$TMP/self.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'deadly signal' "$TMP/self.log" && [ -n "$(ls "$TMP/self")" ]; then
    ok "self-test: a crash in the target fails the fuzz run (exit $rc)"
else
    not_ok "self-test: a deliberate crash was not reported (exit $rc)"
    diag "$(tail -n 20 "$TMP/self.log")"
fi
exit 0
