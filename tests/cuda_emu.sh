#!/bin/sh
# The CUDA model units (cuda/model_cuda.cu with the kernels of cuda/) run on
# the CPU through the host emulation of tests/gpu/emu/, checked against the
# CPU backend by tests/gpu/test_cuda_model.cu: fp32 within 1e-4, bf16 within
# 2e-2.  Before it, tests/gpu/test_cuda_reduce.cu checks the bias, norm and
# embedding gradients' reductions against the CPU ops on shapes that break
# their tiling, and tests/gpu/test_cuda_vec_paths.cu the elementwise
# kernels' 16-byte paths, with their bits under reversed thread order, and
# test_cuda_ops.cu and test_cuda_gemm.cu every op and product of cuda/ops.h.
# This is the only execution of the CUDA code a machine without a GPU can
# give; it covers every kernel's indexing, strides, buffer layouts and
# chunking, but not cuBLASLt (st_gemm stands in), memory ordering or speed.  Registered
# in TESTS only where configure found the CUDA toolkit (its headers and
# libcudart are needed); the TAP lines are the five programs', renumbered.
set -u
lib="$top_builddir/libshardtrain.a"
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - $lib is missing (make builds it)"
    exit 1
fi
. "$top_srcdir/tests/gpu/emu/link_env.sh"
# Five programs, one TAP stream: first the reductions of the parameter
# gradients and the elementwise kernels' 16-byte paths against the CPU
# ops, normal and reversed thread order (run_reduce.sh, about two
# minutes), then every non-attention op and product of make check-gpu's
# test_cuda_ops and test_cuda_gemm (run_ops.sh, about a minute), then the
# model units (run_model.sh); their checks are renumbered in sequence and
# the plan comes last.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
sh "$top_srcdir/tests/gpu/emu/run_reduce.sh" "$top_srcdir" "$lib" > "$tmp/reduce.out" 2>&1 ||
    rc=1
sh "$top_srcdir/tests/gpu/emu/run_ops.sh" "$top_srcdir" "$lib" > "$tmp/ops.out" 2>&1 ||
    rc=1
sh "$top_srcdir/tests/gpu/emu/run_model.sh" "$top_srcdir" "$lib" > "$tmp/model.out" 2>&1 ||
    rc=1
awk '/^1\.\./ { next }
     /^Bail out!/ { print; bail = 1; next }
     /^(not )?ok [0-9]+/ { n++; sub(/^ok [0-9]+/, "ok " n); sub(/^not ok [0-9]+/, "not ok " n) }
     { print }
     END { if (n == 0 && !bail) { n = 1; print "not ok 1 - no TAP output from the emulated programs" }
           print "1.." n }' "$tmp/reduce.out" "$tmp/ops.out" "$tmp/model.out"
exit $rc
