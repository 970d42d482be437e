#!/bin/sh
# Runs tests/gpu/test_cuda_attention.cu (the fused attention's forward and
# backward against the CPU backend) on the CPU through the host emulation
# in shim.h (no GPU needed): the kernels of cuda/attention.cu execute with
# one host fiber per CUDA thread (the bf16 cases through the tensor-core
# kernels of cuda/attention_tc.cu).  Prints the program's TAP output.
# Needs libshardtrain.a built in the top directory, g++ with C++20 and the
# CUDA headers.  About three and a half minutes on two cores
# (tests/cuda_attention_emu.sh runs it).
# Usage: tests/gpu/emu/run.sh [top_srcdir [libshardtrain.a]];
# EMU_LIBS and EMU_LINK_FLAGS as in run_model.sh.
set -eu
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu_flags=-fopenmp
emu_kernels attention attention_tc
emu_test test_cuda_attention
# shellcheck disable=SC2086
emu_link "$tmp/test_emu" $emu_objs "$tmp/test_cuda_attention.o"
OMP_NUM_THREADS=1 "$tmp/test_emu"
