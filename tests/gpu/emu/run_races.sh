#!/bin/sh
# Builds tests/gpu/emu/race_check.cu against the emulation's race check
# (races.c) and runs every case it lists, as TAP: a case expected to race
# must abort with a "cuda emulation: race:" line naming both operations
# (each word race_check lists, '|' standing for a space), and a case
# expected to pass must run to its end with no race line.  Needs
# libshardtrain.a (make builds it), g++ with C++20 and the CUDA headers.
# Usage: tests/gpu/emu/run_races.sh [top_srcdir [libshardtrain.a]]
set -eu
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu="$top/tests/gpu/emu"
python3 "$emu/transform.py" "$emu/race_check.cu" > "$tmp/race_check_emu.cpp"
emu_cxx -I"$emu" -c "$tmp/race_check_emu.cpp" -o "$tmp/race_check.o"
emu_gemm_host
for f in devmem streams races; do
    nice -n 10 gcc -std=c11 -O2 -Wall -Wextra -Werror -c "$emu/$f.c" -o "$tmp/$f.o"
done
nice -n 10 gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$cuda/include" -I"$emu" \
    -include "$emu/shim_c.h" -c "$emu/race_host.c" -o "$tmp/race_host.o"
emu_link "$tmp/race_check" "$tmp/race_check.o" "$tmp/gemm_host.o" "$tmp/race_host.o" \
    "$tmp/devmem.o" "$tmp/streams.o" "$tmp/races.o"
"$tmp/race_check" --list > "$tmp/cases"
echo "1..$(wc -l < "$tmp/cases")"
n=0
fail=0
while read -r name expect what; do
    n=$((n + 1))
    rc=0
    "$tmp/race_check" "$name" > "$tmp/out" 2> "$tmp/err" || rc=$?
    line=$(grep '^cuda emulation: race: ' "$tmp/err" || true)
    why=
    if [ "$expect" = ok ]; then
        [ "$rc" -eq 0 ] || why="exit status $rc"
        [ -z "$line" ] || why="a race was reported: $line"
        grep -q "ran to the end" "$tmp/out" || why="${why:-it did not run to its end}"
    else
        [ "$rc" -gt 128 ] || why="exit status $rc, not an abort"
        [ -n "$line" ] || why="no race line on stderr ($(head -c 300 "$tmp/err"))"
        for w in $what; do
            w=$(printf '%s' "$w" | tr '|' ' ')
            case $line in *"$w"*) ;; *) why="${why:-the race line lacks '$w': $line}" ;; esac
        done
    fi
    if [ -z "$why" ]; then
        echo "ok $n - $name: ${line:-no race, as CUDA orders it}"
    else
        echo "not ok $n - $name: $why"
        fail=1
    fi
done < "$tmp/cases"
exit $fail
