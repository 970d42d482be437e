#!/bin/sh
# Runs tests/gpu/test_cuda_attention.cu on the CPU through the host
# emulation in shim.h (no GPU needed): the kernels of cuda/attention.cu
# execute with one host fiber per CUDA thread (the bf16 cases through the
# tensor-core kernels of cuda/attention_tc.cu).  Needs libshardtrain.a built
# in the top directory (make libshardtrain.a), g++ with C++20 and the CUDA
# headers.  Slow: about 15 minutes for the whole test on two cores.
# Usage: tests/gpu/emu/run.sh [top_srcdir]   (default: the current directory)
set -eu
# The CPU reference in libshardtrain.a multiplies matrices with OpenBLAS.
EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
top=${1:-.}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/attention.cu" > "$tmp/attention_emu.cpp"
python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/attention_tc.cu" > "$tmp/attention_tc_emu.cpp"
cp "$top/tests/gpu/test_cuda_attention.cu" "$tmp/test_emu.cpp"
# shellcheck disable=SC2086 # EMU_LIBS: several words
g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
    -I"$top/cuda" -I"$top/src" -I"$top/tests" -fopenmp \
    "$tmp/attention_emu.cpp" "$tmp/attention_tc_emu.cpp" "$tmp/test_emu.cpp" "$top/libshardtrain.a" \
    -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$tmp/test_emu"
OMP_NUM_THREADS=1 "$tmp/test_emu"
