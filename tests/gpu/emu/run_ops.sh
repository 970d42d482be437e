#!/bin/sh
# Runs tests/gpu/test_cuda_ops.cu (every non-attention op of cuda/ops.h
# against its CPU reference) and tests/gpu/test_cuda_gemm.cu (the
# products, through cuBLASLt's interface) on the CPU through the host
# emulation of shim.h: the kernels of cuda/elementwise.cu, embedding.cu,
# casts.cu, norms.cu, xent.cu and reduce.cu execute with one host fiber
# per CUDA thread, and st_cuda_gemm is gemm_host.cpp (the CPU st_gemm,
# every call checked by cuda/gemm_check.h).  test_cuda_gemm's products
# include odd strides on purpose, which cuBLASLt runs on slower kernels,
# so the emulation checks them by the base rules only, as the real path
# does (ST_EMU_GEMM_RULES=base).  This runs the GPU test programs
# themselves before any GPU does: their calls, shapes and references.
# Prints both programs' TAP output, one after the other.  Needs
# libshardtrain.a built in the top directory, g++ with C++20 and the CUDA
# headers.
# Usage: tests/gpu/emu/run_ops.sh [top_srcdir [libshardtrain.a]];
# EMU_LIBS and EMU_LINK_FLAGS as in run_model.sh.
set -eu
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu_kernels elementwise embedding casts norms xent reduce
emu_gemm_host
emu_cpu_ref
rc=0
for prog in test_cuda_ops test_cuda_gemm; do
    emu_test "$prog"
    # shellcheck disable=SC2086
    emu_link "$tmp/$prog" "$tmp/$prog.o" $emu_objs "$tmp/gemm_host.o" "$tmp/cpu_ref.o"
    ST_EMU_GEMM_RULES=base OMP_NUM_THREADS=1 "$tmp/$prog" || rc=1
done
exit $rc
