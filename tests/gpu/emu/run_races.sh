#!/bin/sh
# Builds tests/gpu/emu/race_check.cu against the emulation's race check
# (races.c) and runs every case it lists, as TAP: a case expected to race
# must abort with a "cuda emulation: race:" line naming both operations
# (each word race_check lists, '|' standing for a space), and a case
# expected to pass must run to its end with no race line.  An order case
# runs twice, the second time with ST_EMU_REVERSE=1, and its printed
# result must be the same both times, or differ where its kernel races.  Needs
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
    if [ "$expect" = same ] || [ "$expect" = differs ]; then
        rc2=0
        ST_EMU_REVERSE=1 "$tmp/race_check" "$name" > "$tmp/out2" 2> "$tmp/err2" || rc2=$?
        [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] || why="exit status $rc, reversed $rc2"
        r1=$(grep '^result:' "$tmp/out" || true)
        r2=$(grep '^result:' "$tmp/out2" || true)
        [ -n "$r1" ] && [ -n "$r2" ] || why="${why:-no result printed}"
        if [ "$expect" = same ]; then
            [ "$r1" = "$r2" ] || why="${why:-reversed order changed the result: $r1 / $r2}"
        else
            [ "$r1" != "$r2" ] || why="${why:-reversed order gave the same result: $r1}"
        fi
        line="in order $r1; reversed $r2"
    elif [ "$expect" = ok ]; then
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
