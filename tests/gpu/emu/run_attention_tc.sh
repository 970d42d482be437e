#!/bin/sh
# Builds the tensor-core tests for the host emulation of shim.h and
# tensor_core.h: tests/gpu/test_tensor_core.cu (the instruction models
# against the PTX ISA's tables) and tests/gpu/test_attention_tc.cu (the
# kernels of cuda/attention_tc.cu through cuda/attention.cu against the
# CPU reference in LIB).  Needs g++ with C++20 and the CUDA headers.
# Usage: tests/gpu/emu/run_attention_tc.sh OUTDIR [top_srcdir [libshardtrain.a]]
# leaves OUTDIR/test_tensor_core and OUTDIR/test_attention_tc.
# EMU_LINK_FLAGS: extra link flags (a sanitizer build's runtimes).
set -eu
# The CPU reference in libshardtrain.a multiplies matrices with OpenBLAS.
EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
out=$1
top=${2:-.}
lib=${3:-$top/libshardtrain.a}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
mkdir -p "$out"
# emu_cxx only: this script keeps its objects in OUTDIR, not emu_setup's tmp.
. "$top/tests/gpu/emu/emu.sh"
for f in cuda/attention cuda/attention_tc tests/gpu/test_tensor_core tests/gpu/test_attention_tc; do
    b=$(basename "$f")
    rm -f "$out/$b.o"
    python3 "$top/tests/gpu/emu/transform.py" "$top/$f.cu" > "$out/${b}_emu.cpp"
    emu_cxx -c "$out/${b}_emu.cpp" -o "$out/$b.o" &
done
wait
for f in attention attention_tc test_tensor_core test_attention_tc; do
    [ -s "$out/$f.o" ] || { echo "run_attention_tc.sh: $f did not compile" >&2; exit 1; }
done
# shellcheck disable=SC2086
g++ ${EMU_LINK_FLAGS:-} $(emu_cov_link) "$out/test_tensor_core.o" -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm \
    -o "$out/test_tensor_core"
# shellcheck disable=SC2086
g++ -fopenmp ${EMU_LINK_FLAGS:-} $(emu_cov_link) "$out/test_attention_tc.o" "$out/attention.o" \
    "$out/attention_tc.o" "$lib" -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm -o "$out/test_attention_tc"
