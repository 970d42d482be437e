#!/bin/sh
# Matrix products of one GPT-2 124M step (bench/gemm_cpu.c) through
# shardtrain's st_gemm, through OpenBLAS's own threading, and through BLIS
# when Debian's libblis-openmp-dev is installed: GFLOP/s at 1 thread
# (pinned to CPU 0) and at every core, and whether each gives the same bits
# at both thread counts.  docs/benchmarks.md records a run.
#
#   sh bench/gemm_cpu.sh        # from a configured and built tree
#
# Environment: OUT (default bench/out), CC (default: the tree's).
set -eu
cd "$(dirname "$0")/.."
if [ ! -f Makefile ] || [ ! -f libshardtrain.a ]; then
    echo "gemm_cpu.sh: error: configure and make first (needs Makefile and libshardtrain.a)" >&2
    exit 1
fi
mk() { sed -n "s/^$1 = //p" Makefile; }
out=${OUT:-bench/out}
mkdir -p "$out"
cc=${CC:-$(mk CC)}
cores=$(nproc)
# shellcheck disable=SC2046
$cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -DWITH_SHARDTRAIN -Isrc -I. $(mk BLAS_CFLAGS) bench/gemm_cpu.c \
    libshardtrain.a $(mk BLAS_LIBS) -lm -o "$out/gemm_openblas"
blis=/usr/include/x86_64-linux-gnu/blis-openmp
if [ -d "$blis" ]; then
    $cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$blis" bench/gemm_cpu.c \
        -L/usr/lib/x86_64-linux-gnu/blis-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/blis-openmp \
        -lblis -lm -o "$out/gemm_blis"
fi
echo "| library and threading | threads | GFLOP/s | total ms | digest |"
echo "| --- | --- | --- | --- | --- |"
row() { # LABEL THREADS PROGRAM MODE
    if [ "$2" -eq 1 ]; then pin="taskset -c 0"; else pin=; fi
    # shellcheck disable=SC2086
    r=$(OMP_NUM_THREADS=$2 BLIS_NUM_THREADS=$2 $pin "$3" "$4" | tail -n 1)
    echo "$r" | awk -v l="$1" -v t="$2" '{ gsub(",", ""); print "| " l " | " t " | " $4 " | " $2 " | " $7 " |" }'
}
for t in 1 "$cores"; do
    row "st_gemm (OpenBLAS, shardtrain's tile grid)" "$t" "$out/gemm_openblas" st
    row "OpenBLAS, its own threads" "$t" "$out/gemm_openblas" cblas
    [ -x "$out/gemm_blis" ] && row "BLIS, its own threads" "$t" "$out/gemm_blis" cblas
done
