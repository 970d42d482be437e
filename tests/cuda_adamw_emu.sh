#!/bin/sh
# The one-launch-per-unit AdamW (cuda/adamw.cu's st_cuda_adamw_unit) on the
# CPU through the host emulation of tests/gpu/emu/, checked against the CPU
# reference st_adamw by tests/gpu/test_cuda_adamw.cu: segments with mixed
# weight decay and gaps, the fp32 update within its stated bound of the
# fp64 one, the moments bit-identical when the gradient is not scaled, the
# bf16 copy equal to packing the new parameters bit for bit, the same bits
# when run twice, and one launch per call (the emulation's launch count).
# Registered in TESTS only where configure found the CUDA toolkit; the TAP
# lines are the test program's.
set -u
lib="$top_builddir/libshardtrain.a"
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - $lib is missing (make builds it)"
    exit 1
fi
EMU_LINK_FLAGS=$(sed -n 's/^SAN_CFLAGS = //p' "$top_builddir/Makefile")
export EMU_LINK_FLAGS
exec sh "$top_srcdir/tests/gpu/emu/run_adamw.sh" "$top_srcdir" "$lib"
