#!/bin/sh
# Builds an emulated shardtrain: the real binary (src/cli/main.o and the objects
# of libshardtrain.a), except that the C files calling the CUDA runtime
# (src/kernels/kernels_cuda.c, src/runtime/device.c, src/comm/comm_nccl.c) are
# compiled with shim_c.h force-included (every runtime call they make
# mapped onto devmem.c's checked host arena and streams.c's streams and
# events, every NCCL call onto nccl_mpi.c's MPI collectives (nccl_waits.c
# naming a cycle of waits across communicators), races.c
# checking that streams and events order every device operation), and the kernels of cuda/ are
# rewritten by transform.py and compiled by g++ against shim.h (one host
# fiber per CUDA thread), with gemm_host.cpp (the CPU st_gemm) standing in
# for cuBLASLt.  So train.device = cuda binds an emulated device and the
# training runs the CUDA backend end to end on the CPU, over the mpi or
# the nccl backend.  The binary must import no CUDA runtime symbol but
# cudaGetErrorString (which needs no device) and no NCCL symbol: checked
# here with nm, so a call the shims miss fails the build.
# Needs a configured and built tree (libshardtrain.a, src/cli/main.o), g++ with
# C++20 and the CUDA headers.
# Usage: tests/gpu/emu/build_shardtrain.sh OUT [top_srcdir [top_builddir]]
set -eu
out=$1
top=${2:-.}
build=${3:-$top}
cuda=${CUDA_PREFIX:-/usr/local/cuda}
emu="$top/tests/gpu/emu"
mk() { sed -n "s/^$1 = //p" "$build/Makefile"; }
for f in "$build/libshardtrain.a" "$build/src/cli/main.o" "$build/Makefile"; do
    [ -f "$f" ] || { echo "build_shardtrain.sh: $f is missing (make builds it)" >&2; exit 1; }
done
CC=$(mk CC)
# A sanitizer build (configure --enable-sanitizers, make check-sanitize):
# the host C files are compiled with its flags and the link pulls in the
# runtimes its libshardtrain.a needs.  The emulated kernels (g++, one fiber
# per CUDA thread) stay uninstrumented: AddressSanitizer does not follow
# user-level stack switches reliably, and they would run far too slowly.
san=$(mk SAN_CFLAGS)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The library without the objects rebuilt against the shim.
cp "$build/libshardtrain.a" "$tmp/lib.a"
ar d "$tmp/lib.a" kernels_cuda.o device.o comm_nccl.o

cflags="-std=c11 -O2 -g -Wall -Wextra $(mk OPENMP_CFLAGS) -D_GNU_SOURCE -I$build -I$top/src \
-I$top/cuda $(mk INIH_CFLAGS) $(mk JANSSON_CFLAGS) $(mk XXHASH_CFLAGS) $(mk PROTOBUF_C_CFLAGS) $(mk PMIX_CFLAGS) \
$(mk CUDA_CFLAGS) $(mk NCCL_CFLAGS) $san -include $emu/shim_c.h"
objs=
for f in kernels/kernels_cuda runtime/device comm/comm_nccl; do
    o="$tmp/$(basename "$f").o"
    # shellcheck disable=SC2086
    nice -n 10 $CC $cflags -c "$top/src/$f.c" -o "$o"
    objs="$objs $o"
done

nice -n 10 $CC -std=c11 -O2 -Wall -Wextra $san -c "$emu/devmem.c" -o "$tmp/devmem.o"
nice -n 10 $CC -std=c11 -O2 -Wall -Wextra $san -c "$emu/streams.c" -o "$tmp/streams.o"
nice -n 10 $CC -std=c11 -O2 -Wall -Wextra $san -c "$emu/races.c" -o "$tmp/races.o"
nice -n 10 $CC -std=c11 -O2 -Wall -Wextra $san -c "$emu/nccl_waits.c" -o "$tmp/nccl_waits.o"
nice -n 10 $CC -std=c11 -O2 -Wall -Wextra $san -c "$emu/nccl_wait_cycle.c" -o "$tmp/nccl_wait_cycle.o"
# shellcheck disable=SC2086
nice -n 10 $CC $cflags -c "$emu/nccl_mpi.c" -o "$tmp/nccl_mpi.o"
objs="$objs $tmp/devmem.o $tmp/streams.o $tmp/races.o $tmp/nccl_waits.o $tmp/nccl_wait_cycle.o $tmp/nccl_mpi.o"

# EMU_COVERAGE: emu.sh's gcov instrumentation of the kernels (coverage.sh).
. "$emu/emu.sh"
for f in elementwise embedding casts norms xent attention attention_tc model_cuda model_common model_gpt2 model_llama adamw reduce; do
    python3 "$emu/transform.py" "$top/cuda/$f.cu" > "$tmp/${f}_emu.cpp"
    # shellcheck disable=SC2046 # the flags are several words
    nice -n 10 g++ -std=c++20 -O2 -w $(emu_cov_flags) -include "$emu/shim.h" -I"$cuda/include" \
        -I"$build" -I"$top" -I"$top/cuda" -I"$top/src" -c "$tmp/${f}_emu.cpp" -o "$tmp/$f.o"
    objs="$objs $tmp/$f.o"
done
nice -n 10 g++ -std=c++20 -O2 -w -I"$cuda/include" -I"$top/cuda" -I"$top/src" \
    -c "$emu/gemm_host.cpp" -o "$tmp/gemm_host.o"
objs="$objs $tmp/gemm_host.o"

# shellcheck disable=SC2086,SC2046
$CC $(mk OPENMP_CFLAGS) $san $(emu_cov_link) -o "$out" "$build/src/cli/main.o" $objs "$tmp/lib.a" \
    $(mk INIH_LIBS) $(mk JANSSON_LIBS) $(mk XXHASH_LIBS) $(mk PCRE2_LIBS) $(mk PROTOBUF_C_LIBS) $(mk PMIX_LIBS) $(mk NCCL_LIBS) \
    $(mk CUDA_LIBS) $(mk BLAS_LIBS) -lstdc++ -lpthread -lm

# No real runtime call may be left: the only cuda* import allowed is
# cudaGetErrorString; and no NCCL call (nccl_mpi.c stands in for all).
left=$(nm -D --undefined-only "$out" | awk '{print $NF}' | sed 's/@.*//' |
       grep '^cuda\|^nccl' | grep -v '^cudaGetErrorString$' || true)
if [ -n "$left" ]; then
    echo "build_shardtrain.sh: $out still calls the CUDA runtime or NCCL:" $left >&2
    rm -f "$out"
    exit 1
fi
