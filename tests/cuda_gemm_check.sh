#!/bin/sh
# The cuBLASLt checker of cuda/gemm_check.h and the emulated st_cuda_gemm_ex
# of tests/gpu/emu/gemm_host.cpp, on the host (no GPU, no fibers): builds
# tests/gpu/test_gemm_check.cpp against them and runs it.  The program shows
# that every kind of caller mistake (wrong ld for a transpose, a stride or
# pointer off the 16-byte grid, beta 0.5, overlapping or mis-declared C/D,
# each epilogue's missing or mistyped operand) is refused with the rule it
# broke, and that correct calls, with a separate D and with each epilogue,
# give the values of a float64 reference.  Its TAP lines are these; a few
# seconds.  Registered only where configure found the CUDA toolkit (the
# CUDA headers are needed).
set -u
lib="$top_builddir/libshardtrain.a"
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - $lib is missing (make builds it)"
    exit 1
fi
top=$top_srcdir
cuda=${CUDA_PREFIX:-/usr/local/cuda}
. "$top_srcdir/tests/gpu/emu/link_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inc="-I$cuda/include -I$top/cuda -I$top/src -I$top/tests"
# shellcheck disable=SC2086
if ! { nice -n 10 g++ -std=c++20 -O2 -Wall -Wextra $inc \
           -c "$top/tests/gpu/emu/gemm_host.cpp" -o "$tmp/gemm_host.o" &&
       nice -n 10 g++ -std=c++20 -O2 -Wall -Wextra $inc \
           -c "$top/tests/gpu/test_gemm_check.cpp" -o "$tmp/test.o" &&
       g++ -fopenmp ${EMU_LINK_FLAGS:-} "$tmp/test.o" "$tmp/gemm_host.o" "$lib" \
           -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$tmp/test_gemm_check"; } \
        >"$tmp/build.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 - tests/gpu/test_gemm_check.cpp builds"
    sed 's/^/# /' "$tmp/build.log" | tail -n 30
    exit 1
fi
OMP_NUM_THREADS=1 "$tmp/test_gemm_check"
