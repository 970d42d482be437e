# Sourced by the run_*.sh scripts of the host emulation: the one way a CUDA
# file is built to run on the CPU.  A kernel file of cuda/ goes through
# transform.py (its launches made host calls), a test program of tests/gpu/
# is compiled as it is; both as C++20 with shim.h included first, against
# the CUDA headers (no GPU or driver needed), and linked with
# libshardtrain.a (the CPU references) and libcudart (for its types and
# error strings only).
#
# emu_setup TOP [LIB]   sets top, lib (TOP/libshardtrain.a by default),
#                       cuda (CUDA_PREFIX or /usr/local/cuda) and tmp, a
#                       directory removed at exit; EMU_LIBS defaults to
#                       OpenBLAS's flags (the CPU reference's products)
# emu_cxx ARGS...       g++ for emulated code, niced
# emu_kernels NAME...   cuda/NAME.cu transformed and compiled to $tmp/NAME.o,
#                       each added to $emu_objs
# emu_test NAME         tests/gpu/NAME.cu compiled to $tmp/NAME.o
# emu_cpu_ref           tests/gpu/cpu_ref.c compiled to $tmp/cpu_ref.o
# emu_gemm_host         gemm_host.cpp (st_cuda_gemm on the CPU's st_gemm,
#                       every call checked) compiled to $tmp/gemm_host.o
# emu_link OUT OBJ...   OUT linked from the objects, $lib, libcudart,
#                       EMU_LIBS and EMU_LINK_FLAGS (a sanitizer build's
#                       runtimes, tests/cuda_emu.sh)
# The emulated kernels stay uninstrumented whatever the build (see
# build_shardtrain.sh).
#
# EMU_COVERAGE=DIR (tests/gpu/emu/coverage.sh): every emulated compile is
# instrumented for gcov (emu_cov_flags), its notes and counts kept in a
# folder of its own under DIR, since counts merge only with the same
# build's, and every link takes gcov's runtime (emu_cov_link).  The counts
# name cuda/'s own lines through transform.py's #line directives.

emu_setup() {
    top=$1
    lib=${2:-$top/libshardtrain.a}
    cuda=${CUDA_PREFIX:-/usr/local/cuda}
    EMU_LIBS=${EMU_LIBS-$(pkg-config --libs openblas)}
    emu_flags=
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064 # tmp is expanded now, on purpose
    trap "rm -rf '$tmp'" EXIT
    emu_objs=
}

emu_cov_flags() {
    [ -n "${EMU_COVERAGE:-}" ] || return 0
    mkdir -p "$EMU_COVERAGE"
    echo "--coverage -fprofile-update=atomic -fno-early-inlining -dumpdir $(mktemp -d "$EMU_COVERAGE/o.XXXXXX")/"
}
emu_cov_link() { [ -z "${EMU_COVERAGE:-}" ] || echo --coverage; }

emu_cxx() {
    # shellcheck disable=SC2046 # the flags are several words
    nice -n 10 g++ -std=c++20 -O2 -w $(emu_cov_flags) -include "$top/tests/gpu/emu/shim.h" \
        -I"$cuda/include" -I"$top" -I"$top/cuda" -I"$top/src" -I"$top/tests" -I"$top/tests/gpu" "$@"
}

# emu_flags: extra compile options a script sets (-fopenmp), several words.
emu_kernels() {
    for _k in "$@"; do
        python3 "$top/tests/gpu/emu/transform.py" "$top/cuda/$_k.cu" > "$tmp/${_k}_emu.cpp"
        # shellcheck disable=SC2086
        emu_cxx $emu_flags -c "$tmp/${_k}_emu.cpp" -o "$tmp/$_k.o"
        emu_objs="$emu_objs $tmp/$_k.o"
    done
}

emu_test() {
    # shellcheck disable=SC2086
    emu_cxx $emu_flags -x c++ -c "$top/tests/gpu/$1.cu" -o "$tmp/$1.o"
}

emu_cpu_ref() {
    nice -n 10 gcc -std=c11 -O2 -I"$top/src" -I"$top/tests/gpu" -c "$top/tests/gpu/cpu_ref.c" \
        -o "$tmp/cpu_ref.o"
}

emu_gemm_host() {
    nice -n 10 g++ -std=c++20 -O2 -w -I"$cuda/include" -I"$top/cuda" -I"$top/src" \
        -c "$top/tests/gpu/emu/gemm_host.cpp" -o "$tmp/gemm_host.o"
}

emu_link() {
    _out=$1
    shift
    # shellcheck disable=SC2086 # the flags are several words
    g++ -fopenmp ${EMU_LINK_FLAGS:-} $(emu_cov_link) "$@" "$lib" -L"$cuda/lib64" -lcudart ${EMU_LIBS:-} -lm \
        -o "$_out"
}
