#!/bin/sh
# Runs tests/gpu/test_cuda_ops.cu (every non-attention op of cuda/ops.h
# against its CPU reference, the products through cuBLASLt's interface) on
# the CPU through the host emulation of shim.h: the kernels of
# cuda/elementwise.cu, embedding.cu, casts.cu, norms.cu, xent.cu and
# reduce.cu execute with one host fiber per CUDA thread, and st_cuda_gemm is
# gemm_host.cpp (the CPU st_gemm, every call checked by cuda/gemm_check.h).
# The program's products include odd strides on purpose, which cuBLASLt
# runs on slower kernels, so the emulation checks them by the base rules
# only, as the real path does (ST_EMU_GEMM_RULES=base).  This runs the GPU
# test program itself before any GPU does: its calls, shapes and
# references.  Prints the program's TAP output.  Needs libshardtrain.a
# built in the top directory, g++ with C++20 and the CUDA headers.
# Usage: tests/gpu/emu/run_ops.sh [top_srcdir [libshardtrain.a]];
# EMU_LIBS and EMU_LINK_FLAGS as in run_model.sh.
set -eu
EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
top=${1:-.}
lib=${2:-$top/libshardtrain.a}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=
for f in elementwise embedding casts norms xent reduce; do
    python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/$f.cu" > "$tmp/${f}_emu.cpp"
    nice -n 10 g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
        -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" \
        -c "$tmp/${f}_emu.cpp" -o "$tmp/$f.o"
    objs="$objs $tmp/$f.o"
done
nice -n 10 g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
    -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" \
    -x c++ -c "$top/tests/gpu/test_cuda_ops.cu" -o "$tmp/test.o"
nice -n 10 g++ -std=c++20 -O2 -w -I"$cuda/include" -I"$top/cuda" -I"$top/src" \
    -c "$top/tests/gpu/emu/gemm_host.cpp" -o "$tmp/gemm_host.o"
nice -n 10 gcc -std=c11 -O2 -I"$top/src" -I"$top/tests/gpu" -c "$top/tests/gpu/cpu_ref.c" \
    -o "$tmp/cpu_ref.o"
# shellcheck disable=SC2086
g++ -fopenmp ${EMU_LINK_FLAGS:-} "$tmp/test.o" $objs "$tmp/gemm_host.o" "$tmp/cpu_ref.o" "$lib" \
    -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$tmp/test_emu"
ST_EMU_GEMM_RULES=base OMP_NUM_THREADS=1 "$tmp/test_emu"
