#!/bin/sh
# The CUDA model units (cuda/model_cuda.cu with the kernels of cuda/) run on
# the CPU through the host emulation of tests/gpu/emu/, checked against the
# CPU backend by tests/gpu/test_cuda_model.cu: fp32 within 1e-4, bf16 within
# 2e-2.  This is the only execution of the CUDA code a machine without a GPU
# can give; it covers every kernel's indexing, strides, buffer layouts and
# chunking, but not cuBLASLt (st_gemm stands in), memory ordering or speed.
# Registered in TESTS only where configure found the CUDA toolkit (its
# headers and libcudart are needed); the TAP lines are the test program's.
set -u
lib="$top_builddir/libshardtrain.a"
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - $lib is missing (make builds it)"
    exit 1
fi
# A sanitizer build's library needs the sanitizer runtimes at link time.
EMU_LINK_FLAGS=$(sed -n 's/^SAN_CFLAGS = //p' "$top_builddir/Makefile")
EMU_LIBS=$(sed -n "s/^BLAS_LIBS = //p" "$top_builddir/Makefile")
export EMU_LIBS EMU_LINK_FLAGS
exec sh "$top_srcdir/tests/gpu/emu/run_model.sh" "$top_srcdir" "$lib"
