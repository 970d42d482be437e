#!/bin/sh
# Runs tests/gpu/test_cuda_reduce.cu (the bias, norm and embedding
# gradients' deterministic reductions against the CPU ops) and
# tests/gpu/test_cuda_vec_paths.cu (the 16-byte paths of the elementwise
# kernels, aligned against skewed) on the CPU through the host emulation
# of shim.h, each twice: threads resumed in their order, then with
# ST_EMU_REVERSE=1 (last to first).  Prints the programs' TAP lines,
# numbered in sequence, plus for each one line requiring both runs' result
# digests to be equal (the results must not depend on thread order), and
# the plan.  Needs
# libshardtrain.a built in the top directory, g++ with C++20 and the CUDA
# headers; about a minute on two cores.
# Usage: tests/gpu/emu/run_reduce.sh [top_srcdir [libshardtrain.a]];
# EMU_LIBS and EMU_LINK_FLAGS as in run_model.sh.
set -eu
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu_kernels elementwise embedding casts norms xent reduce
emu_cpu_ref
# Each program: its TAP lines (numbered on from the last program's), a line
# if it died, and the digest line.
rc=0 n=0
for prog in test_cuda_reduce test_cuda_vec_paths; do
    emu_test "$prog"
    # shellcheck disable=SC2086
    emu_link "$tmp/$prog" "$tmp/$prog.o" $emu_objs "$tmp/cpu_ref.o"
    st=0
    OMP_NUM_THREADS=1 "$tmp/$prog" > "$tmp/fwd.out" 2>&1 || st=$?
    ST_EMU_REVERSE=1 OMP_NUM_THREADS=1 "$tmp/$prog" > "$tmp/rev.out" 2>&1 || rc=1
    awk -v n="$n" '/^1\.\./ { next }
        /^(not )?ok [0-9]+/ { n++; sub(/^ok [0-9]+/, "ok " n); sub(/^not ok [0-9]+/, "not ok " n) }
        { print }' "$tmp/fwd.out"
    n=$((n + $(grep -c '^ok \|^not ok ' "$tmp/fwd.out" || true)))
    d1=$(sed -n 's/^# digest //p' "$tmp/fwd.out")
    d2=$(sed -n 's/^# digest //p' "$tmp/rev.out")
    # Status 1 is failed checks, already reported; anything else is a crash.
    if [ "$st" -gt 1 ]; then
        n=$((n + 1))
        echo "not ok $n - $prog died (exit status $st) after the checks above"
    fi
    [ "$st" -eq 0 ] || rc=1
    n=$((n + 1))
    if [ -n "$d1" ] && [ "$d1" = "$d2" ]; then
        echo "ok $n - $prog: ST_EMU_REVERSE=1 (threads resumed last to first) gives bit-identical results (digest $d1)"
    else
        echo "not ok $n - $prog: ST_EMU_REVERSE=1 changes the results (digest '$d1' vs '$d2')"
        rc=1
    fi
done
echo "1..$n"
exit $rc
