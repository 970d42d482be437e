#!/bin/sh
# Builds and runs tests/gpu/test_cuda_adamw.cu on the CPU through the host
# emulation in shim.h (no GPU needed): cuda/adamw.cu's kernels execute with
# one host fiber per CUDA thread, against st_adamw from libshardtrain.a.
# Needs libshardtrain.a (make builds it), g++ with C++20 and the CUDA
# headers.  Well under a minute on two cores.
# Usage: tests/gpu/emu/run_adamw.sh [top_srcdir [libshardtrain.a]]
# EMU_LINK_FLAGS: extra link flags (a sanitizer build's, as run_model.sh).
set -eu
. "${1:-.}/tests/gpu/emu/emu.sh"
emu_setup "${1:-.}" "${2:-}"
emu_flags=-fopenmp
emu_kernels adamw
emu_test test_cuda_adamw
emu_link "$tmp/test_emu" "$tmp/adamw.o" "$tmp/test_cuda_adamw.o"
OMP_NUM_THREADS=1 "$tmp/test_emu"
