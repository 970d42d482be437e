#!/bin/sh
# The host emulation's rewrite of cuda/ (tests/gpu/emu/transform.py) keeps
# every line on its source line: for each kernel file of cuda/, the output
# held against the sources by tests/gpu/emu/transform_lines.py through its
# #line directives (inlined headers, launches rewritten onto one line).
# gcov's coverage of cuda/ under the emulation (tests/gpu/emu/coverage.sh),
# compiler messages and a debugger see the kernels only through this.
# Three self-checks show the check fails on the mistakes a rewrite could
# make: a line lost, the directive after an inlined header lost, and a
# launch that keeps one line fewer than it spanned.  Needs only python3.
. "$top_srcdir/tests/lib.sh"
require command -v python3
emu="$top_srcdir/tests/gpu/emu"

for f in "$top_srcdir"/cuda/*.cu; do
    name=$(basename "$f")
    if python3 "$emu/transform.py" "$f" >"$TMP/$name.cpp" 2>"$TMP/$name.err" &&
        python3 "$emu/transform_lines.py" "$f" <"$TMP/$name.cpp" >"$TMP/$name.out" 2>>"$TMP/$name.err"
    then
        ok "$name: $(cat "$TMP/$name.out")"
    else
        not_ok "$name: the emulation's rewrite moves lines"
        diag "$(head -n 12 "$TMP/$name.err")"
    fi
done

# must_fail WHAT FILE: transform_lines.py refuses $TMP/FILE.cpp, a mutant
# of FILE's output, with a line naming a line of the sources.
must_fail() {
    if python3 "$emu/transform_lines.py" "$top_srcdir/cuda/$2" <"$TMP/mutant.cpp" \
        >/dev/null 2>"$TMP/mutant.err"; then
        not_ok "self-check: $1 passes the check"
    elif grep -q "lines off their source line" "$TMP/mutant.err"; then
        ok "self-check: $1 fails the check"
    else
        not_ok "self-check: $1 fails without the expected line"
        diag "$(head -n 5 "$TMP/mutant.err")"
    fi
}

# norms.cu inlines common.cuh, which inlines dynamic_smem.cuh, and has
# launches spanning two lines.
src=norms.cu
out="$TMP/$src.cpp"
sed '60d' "$out" >"$TMP/mutant.cpp"
must_fail "a line lost from $src's output" "$src"
awk '/^#line [0-9]+ ".*common.cuh"$/ && seen++ { next } { print }' "$out" >"$TMP/mutant.cpp"
if cmp -s "$out" "$TMP/mutant.cpp"; then
    not_ok "self-check: $src's output has no directive resuming common.cuh after its header"
else
    must_fail "the directive after an inlined header lost" "$src"
fi
awk 'drop && $0 == "" { drop = 0; next } /emu_launch\(/ { drop = 1 } { print }' "$out" \
    >"$TMP/mutant.cpp"
if cmp -s "$out" "$TMP/mutant.cpp"; then
    not_ok "self-check: $src's output has no launch spanning lines"
else
    must_fail "a launch that keeps one line fewer than it spanned" "$src"
fi
