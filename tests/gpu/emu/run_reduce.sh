#!/bin/sh
# Runs tests/gpu/test_cuda_reduce.cu (the bias, norm and embedding
# gradients' deterministic reductions against the CPU ops, and the 16-byte
# paths of the memory-bound kernels, aligned against skewed) on the CPU
# through the host emulation of shim.h, twice: threads resumed in their
# order, then with ST_EMU_REVERSE=1 (last to first).  Prints the program's
# TAP lines, plus one line requiring both runs' result digests to be equal
# (the reductions must not depend on thread order), and the plan.  Needs
# libshardtrain.a built in the top directory, g++ with C++20 and the CUDA
# headers; about a minute on two cores.
# Usage: tests/gpu/emu/run_reduce.sh [top_srcdir [libshardtrain.a]];
# EMU_LIBS and EMU_LINK_FLAGS as in run_model.sh.
set -eu
EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
top=${1:-.}
lib=${2:-$top/libshardtrain.a}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in elementwise embedding casts norms xent reduce; do
    python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/$f.cu" > "$tmp/${f}_emu.cpp"
done
cp "$top/tests/gpu/test_cuda_reduce.cu" "$tmp/test_emu.cpp"
objs=
for f in elementwise embedding casts norms xent reduce test; do
    nice -n 10 g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
        -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" \
        -c "$tmp/${f}_emu.cpp" -o "$tmp/$f.o"
    objs="$objs $tmp/$f.o"
done
nice -n 10 gcc -std=c11 -O2 -I"$top/src" -I"$top/tests/gpu" -c "$top/tests/gpu/cpu_ref.c" \
    -o "$tmp/cpu_ref.o"
# shellcheck disable=SC2086
g++ -fopenmp ${EMU_LINK_FLAGS:-} $objs "$tmp/cpu_ref.o" "$lib" \
    -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$tmp/test_emu"
rc=0 st=0
OMP_NUM_THREADS=1 "$tmp/test_emu" > "$tmp/fwd.out" 2>&1 || st=$?
ST_EMU_REVERSE=1 OMP_NUM_THREADS=1 "$tmp/test_emu" > "$tmp/rev.out" 2>&1 || rc=1
grep -v '^1\.\.' "$tmp/fwd.out"
n=$(grep -c '^ok \|^not ok ' "$tmp/fwd.out" || true)
d1=$(sed -n 's/^# digest //p' "$tmp/fwd.out")
d2=$(sed -n 's/^# digest //p' "$tmp/rev.out")
# Status 1 is failed checks, already reported; anything else is a crash.
if [ "$st" -gt 1 ]; then
    n=$((n + 1))
    echo "not ok $n - test_cuda_reduce died (exit status $st) after the checks above"
fi
[ "$st" -eq 0 ] || rc=1
n=$((n + 1))
if [ -n "$d1" ] && [ "$d1" = "$d2" ]; then
    echo "ok $n - ST_EMU_REVERSE=1 (threads resumed last to first) gives bit-identical results (digest $d1)"
else
    echo "not ok $n - ST_EMU_REVERSE=1 changes the results (digest '$d1' vs '$d2')"
    rc=1
fi
echo "1..$n"
exit $rc
