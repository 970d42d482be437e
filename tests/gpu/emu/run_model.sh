#!/bin/sh
# Runs tests/gpu/test_cuda_model.cu on the CPU through the host emulation in
# shim.h (no GPU needed): the kernels of cuda/elementwise.cu, casts.cu,
# norms.cu, xent.cu, attention.cu, attention_tc.cu and model_cuda.cu execute with one host fiber per
# CUDA thread; st_cuda_gemm is gemm_host.cpp (the CPU st_gemm behind ops.h's
# interface), since cuBLASLt needs a GPU.  Needs libshardtrain.a built in
# the top directory (make libshardtrain.a), g++ with C++20 and the CUDA
# headers.  Takes a few minutes on two cores.
# Usage: tests/gpu/emu/run_model.sh [top_srcdir [libshardtrain.a]]
# (default: the current directory and the library in it).  EMU_LINK_FLAGS:
# extra link flags, the sanitizer flags when the library was built with
# them (tests/cuda_emu.sh; the emulated kernels stay uninstrumented, see
# build_shardtrain.sh).
set -eu
# The CPU reference in libshardtrain.a multiplies matrices with OpenBLAS.
EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
top=${1:-.}
lib=${2:-$top/libshardtrain.a}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in elementwise embedding casts norms xent attention attention_tc model_cuda model_block; do
    python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/$f.cu" > "$tmp/${f}_emu.cpp"
done
cp "$top/tests/gpu/test_cuda_model.cu" "$tmp/test_emu.cpp"
objs=
for f in elementwise embedding casts norms xent attention attention_tc model_cuda model_block test; do
    nice -n 10 g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
        -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" -fopenmp \
        -c "$tmp/${f}_emu.cpp" -o "$tmp/$f.o"
    objs="$objs $tmp/$f.o"
done
nice -n 10 g++ -std=c++20 -O2 -w -I"$cuda/include" -I"$top/cuda" -I"$top/src" \
    -c "$top/tests/gpu/emu/gemm_host.cpp" -o "$tmp/gemm_host.o"
# shellcheck disable=SC2086
g++ -fopenmp ${EMU_LINK_FLAGS:-} $objs "$tmp/gemm_host.o" "$lib" \
    -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$tmp/test_emu"
OMP_NUM_THREADS=1 "$tmp/test_emu"
