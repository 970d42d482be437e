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
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu_flags=-fopenmp
emu_kernels elementwise embedding casts norms xent attention attention_tc model_cuda model_common model_gpt2 model_llama
emu_test test_cuda_model
emu_gemm_host
# shellcheck disable=SC2086
emu_link "$tmp/test_emu" $emu_objs "$tmp/test_cuda_model.o" "$tmp/gemm_host.o"
OMP_NUM_THREADS=1 "$tmp/test_emu"
