#!/bin/sh
# Builds and runs tests/gpu/test_cuda_adamw.cu on the CPU through the host
# emulation in shim.h (no GPU needed): cuda/adamw.cu's kernels execute with
# one host fiber per CUDA thread, against st_adamw from libshardtrain.a.
# Needs libshardtrain.a (make builds it), g++ with C++20 and the CUDA
# headers.  Well under a minute on two cores.
# Usage: tests/gpu/emu/run_adamw.sh [top_srcdir [libshardtrain.a]]
# EMU_LINK_FLAGS: extra link flags (a sanitizer build's, as run_model.sh).
set -eu
top=${1:-.}
lib=${2:-$top/libshardtrain.a}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/adamw.cu" > "$tmp/adamw_emu.cpp"
cp "$top/tests/gpu/test_cuda_adamw.cu" "$tmp/test_emu.cpp"
for f in adamw test; do
    nice -n 10 g++ -std=c++20 -O2 -w -include "$top/tests/gpu/emu/shim.h" -I"$cuda/include" \
        -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" -fopenmp \
        -c "$tmp/${f}_emu.cpp" -o "$tmp/$f.o"
done
# shellcheck disable=SC2086
g++ -fopenmp ${EMU_LINK_FLAGS:-} "$tmp/adamw.o" "$tmp/test.o" "$lib" \
    -L"$cuda/lib64" -lcudart -lm -o "$tmp/test_emu"
OMP_NUM_THREADS=1 "$tmp/test_emu"
