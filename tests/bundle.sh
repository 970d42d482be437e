#!/bin/sh
# bench/bundle.sh makes a folder that runs shardtrain on a host without
# Open MPI (the lent GPU machine).  Proven here by hiding the system's Open
# MPI, PMIx, inih, jansson and xxHash in a private mount namespace (empty
# files and directories bound over them): there the system binary must fail
# to start (else the hiding proves nothing), while the bundle, moved away
# from where it was built, trains one rank without a launcher to the same
# bytes as the normal binary, and its mpirun runs two ranks that agree with
# one rank as closely as tests/fsdp.sh asks.  Its large libraries travel
# gzipped (the carry limit is 64 MiB): env.sh unpacks them whole, with
# gzip or, without it, Python, and with neither says so in one line.
# CUDA libraries the host keeps only in Python packages are found there.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v unshare
require command -v mount
require unshare -m true
export OMP_NUM_THREADS=1

# ---- a sanitizer build is refused (make check-sanitize) -------------------
# The bundle is what the device tool carries, so it is built from release
# binaries only; under check-sanitize this test checks that refusal, and
# the rest (which needs a bundle) runs in every release build's make check.
if ldd "$SHARDTRAIN" 2>/dev/null | grep -q 'lib[a-z]*san\.so'; then
    SHARDTRAIN="$SHARDTRAIN" sh "$top_srcdir/bench/bundle.sh" "$TMP/san" \
        >"$TMP/san.out" 2>"$TMP/san.err"
    st=$?
    check "bench/bundle.sh refuses a sanitizer build (exit $st)" test "$st" -eq 1
    check "it says why: $(cat "$TMP/san.err")" grep -q 'is a sanitizer build' "$TMP/san.err"
    check "and writes no bundle" test ! -e "$TMP/san"
    exit 0
fi

# ---- the bundle, built in one place and used from another ----------------
if SHARDTRAIN="$SHARDTRAIN" sh "$top_srcdir/bench/bundle.sh" "$TMP/built/bundle" \
        >"$TMP/bundle.out" 2>"$TMP/bundle.err"; then
    ok "bench/bundle.sh builds the bundle"
else
    not_ok "bench/bundle.sh builds the bundle"; diag "$(cat "$TMP/bundle.err")"
    exit 1
fi
diag "$(cat "$TMP/bundle.out")"
mkdir -p "$TMP/moved" && mv "$TMP/built/bundle" "$TMP/moved/b" && rmdir "$TMP/built"
B=$TMP/moved/b
kib=$(du -sk "$B" | cut -f1)
check "bundle is under 64 MiB ($kib KiB)" test "$kib" -lt $((64 * 1024))
L=$B/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
check "libraries over 1 MiB travel gzipped, OpenBLAS's among them, none unpacked yet" \
    sh -c "test -f '$L/libopenblas.so.0.gz' && test ! -e '$L/libopenblas.so.0' &&
        test -z \"\$(find '$L' -maxdepth 1 -type f -name '*.so*' ! -name '*.gz' -size +1024k)\""
# Copies, still packed, for env.sh on a host without gzip (Python's gzip
# instead) and in a read-only bundle.
cp -r "$B" "$TMP/nogzip-bundle"
cp -r "$B" "$TMP/ro-bundle"

# ---- the hiding ----------------------------------------------------------
# Every file through which the system's Open MPI or the libraries bundled
# for it could still be reached; symbolic links are followed by mount, so
# binding over the real files covers them.
ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
hide_dirs="/usr/lib/$ma/openmpi /usr/lib/$ma/pmix2 /etc/openmpi /usr/share/openmpi"
hide_files=$(find /usr/bin /usr/lib/"$ma" -maxdepth 1 -type f \( -name orted -o -name orterun \
    -o -name 'libmpi*.so*' -o -name 'libopen-rte.so*' -o -name 'libopen-pal.so*' \
    -o -name 'libmca_common_*.so*' -o -name 'libpmix.so*' -o -name 'libinih.so*' \
    -o -name 'libjansson.so*' -o -name 'libxxhash.so*' -o -name 'liboshmem.so*' \) | tr '\n' ' ')
mkdir "$TMP/empty" && : >"$TMP/empty.file"
cat >"$TMP/hide.sh" <<EOF
# runs its arguments with the system Open MPI made unreachable
set -e
for d in $hide_dirs; do mount --bind "$TMP/empty" "\$d"; done
for f in $hide_files; do mount --bind "$TMP/empty.file" "\$f"; done
set +e
exec "\$@"
EOF
# hidden SECONDS COMMAND...: COMMAND in a private mount namespace without
# them, with a hang guard
hidden() {
    _t=$1; shift
    timeout "$_t" unshare -m --propagation private sh "$TMP/hide.sh" "$@"
}
diag "hiding $(echo "$hide_dirs $hide_files" | wc -w) paths"

hidden 60 sh -c 'test -z "$(ls -A /usr/lib/'"$ma"'/openmpi)$(ls -A /etc/openmpi)" && test ! -s /usr/bin/orted'
check "the system's Open MPI is hidden in the namespace" test $? -eq 0
hidden 60 "$SHARDTRAIN" --version >"$TMP/sys.out" 2>"$TMP/sys.err"
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] && grep -q 'error while loading shared libraries' "$TMP/sys.err"
then ok "system shardtrain cannot start there (exit $st, no libraries)"
else not_ok "system shardtrain cannot start there (exit $st)"; diag "$(cat "$TMP/sys.err")"; fi
hidden 60 sh -c 'exec mpirun -np 1 true' >"$TMP/sysmpi.out" 2>"$TMP/sysmpi.err"
st=$?
if [ "$st" -ne 0 ] && [ "$st" -ne 124 ]; then ok "system mpirun cannot start there (exit $st)"
else not_ok "system mpirun cannot start there (exit $st)"; diag "$(cat "$TMP/sysmpi.err")"; fi

# ---- training -------------------------------------------------------------
prepare_test_data
write_base_ini "$TMP/base.ini"
args() { # NAME: the train arguments for run NAME (the base with seed 11)
    echo "train -s train.seed=11 -s log.dir=$TMP/$1/logs -s checkpoint.dir=$TMP/$1/ckpt $TMP/base.ini"
}
final() { echo "$TMP/$1/ckpt/final/model.safetensors"; }

# The references, with the normal binary and the system's Open MPI.
ranks 1 300 "$SHARDTRAIN" $(args sys1) >"$TMP/sys1.out" 2>"$TMP/sys1.err"
check "one rank with the normal binary" test -s "$(final sys1)"
ranks 2 300 "$SHARDTRAIN" $(args sys2) -s train.micro_batch=2 >"$TMP/sys2.out" 2>"$TMP/sys2.err"
check "two ranks with the normal binary" test -s "$(final sys2)"

# bundled NAME COMMAND...: COMMAND after sourcing env.sh (by dash: env.sh
# finds its own folder), inside the namespace
bundled() {
    _n=$1; shift
    hidden 300 sh -c '. "$0/env.sh" && exec "$@"' "$B" "$@" \
        >"$TMP/$_n.out" 2>"$TMP/$_n.err"
}
bundled b1 shardtrain $(args b1)
st=$?
if [ "$st" -eq 0 ] && [ -s "$(final b1)" ]; then ok "bundle: one rank, no launcher, trains"
else not_ok "bundle: one rank, no launcher, trains (exit $st)"; diag "$(tail -n 8 "$TMP/b1.err")"; fi
unpacked_ok() {   # unpacked_ok DIR: every .gz beside a library equal to its contents
    for _gz in "$1"/*.so*.gz; do gzip -dc "$_gz" | cmp -s - "${_gz%.gz}" || return 1; done
    test -z "$(find "$1" -name '*.unpacking.*')"
}
check "env.sh unpacked each gzipped library beside itself, whole" unpacked_ok "$L"
check "bundle: one rank's final weights equal the normal binary's byte for byte" \
    same_tensors "$(final b1)" "$(final sys1)"
check "bundle: the same 4 losses as the normal binary" \
    compare_runs --exact --only metrics "$TMP/b1" "$TMP/sys1" 4

bundled b2 mpirun --oversubscribe -np 2 shardtrain $(args b2) -s train.micro_batch=2
st=$?
if [ "$st" -eq 0 ] && [ -s "$(final b2)" ] && [ "$(grep -c '^step ' "$TMP/b2.out")" -ge 1 ]; then
    ok "bundle: its mpirun runs two ranks"
else not_ok "bundle: its mpirun runs two ranks (exit $st)"; diag "$(tail -n 8 "$TMP/b2.err")"; fi
check "bundle: two ranks' final weights equal the system mpirun's byte for byte" \
    same_tensors "$(final b2)" "$(final sys2)"
# A missing help file, plugin or params file shows up as Open MPI or PMIx
# text on stderr, not always as a failure.
check "bundle: no Open MPI or PMIx messages on stderr" \
    test -z "$(cat "$TMP/b1.err" "$TMP/b2.err" | grep -v '^shardtrain: ')"
# As tests/fsdp.sh: losses and weights (norm-wise) within 1e-5 relative.
check "bundle: two ranks match one rank within 1e-5 (as tests/fsdp.sh)" \
    compare_runs "$TMP/b2" "$TMP/b1" 1e-5 4

# ---- bench/gpu.sh through the bundle ----------------------------------------
# What the first GPU session runs: bench/gpu.sh finding no build and taking
# the bundle's programs through its env.sh wrapper.  Here on the CPU (the
# tiny preset; PyTorch's side left out), with the system's Open MPI hidden:
# shardtrain's row must hold a number.
hidden 400 env GPU_BENCH_BUNDLE="$B" GPU_BENCH_DEVICE=cpu GPU_BENCH_MODELS=tiny \
    GPU_BENCH_MAX_MB=2 GPU_BENCH_STEPS=3 GPU_BENCH_SKIP=1 GPU_BENCH_TRAIN_CHECK=0 \
    TORCH_PYTHON=/bin/false GPU_BENCH_BUDGET_S=400 OUT="$TMP/gb" \
    sh "$top_srcdir/bench/gpu.sh" >"$TMP/gb.log" 2>&1
check "bench/gpu.sh with the bundle (system Open MPI hidden): shardtrain's tiny row measured" \
    /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]["tiny"]["shardtrain"]
sys.exit(not (r["status"] == "ok" and r["tokens_per_s"] > 0))' "$TMP/gb/results.json"
# gpu.sh tells a CUDA build by the bundled shardtrain's dynamic section:
# with objdump, and again where objdump is missing (a stand-in that exits
# 127, as a shell does for a command it cannot find), by grep -a.
if ldd "$SHARDTRAIN" | grep -q 'libcudart'; then cuda=yes; else cuda=no; fi
mkdir "$TMP/no-objdump" && printf '#!/bin/sh\nexit 127\n' >"$TMP/no-objdump/objdump" &&
    chmod +x "$TMP/no-objdump/objdump"
hidden 400 env PATH="$TMP/no-objdump:$PATH" GPU_BENCH_BUNDLE="$B" GPU_BENCH_DEVICE=cpu \
    GPU_BENCH_MODELS=tiny GPU_BENCH_MAX_MB=2 GPU_BENCH_STEPS=3 GPU_BENCH_SKIP=1 \
    GPU_BENCH_TRAIN_CHECK=0 TORCH_PYTHON=/bin/false GPU_BENCH_BUDGET_S=400 OUT="$TMP/gb2" \
    sh "$top_srcdir/bench/gpu.sh" >"$TMP/gb2.log" 2>&1
check "gpu.sh knows the bundle's shardtrain has CUDA: $cuda, with objdump and without" \
    sh -c "grep -q 'CUDA toolkit found by configure: $cuda\$' '$TMP/gb/results.md' &&
        grep -q 'CUDA toolkit found by configure: $cuda\$' '$TMP/gb2/results.md'"
# The bundle carries every GPU test program the build made (make
# check-gpu's, which exist where configure found CUDA).  No GPU here: each
# fails, and the status names them all.
built='' carried=''
for t in "$top_srcdir"/tests/gpu/test_*; do
    case ${t##*/} in *.*) continue ;; esac
    [ -f "$t" ] && [ -x "$t" ] && built="${built:+$built, }${t##*/}"
done
for t in "$B"/usr/bin/test_*; do
    [ -f "$t" ] && carried="${carried:+$carried, }${t##*/}"
done
n=$(printf '%s' "$built" | awk -F', ' '{ print NF }')
if [ -n "$built" ]; then
    check "the bundle carries all $n GPU test programs the build made ($carried)" \
        test "$carried" = "$built"
    check "gpu.sh's check-gpu status names all $n GPU test programs that failed here" \
        sh -c "grep '^check-gpu: failed: ' '$TMP/gb.log' | grep -qF 'failed: $built: '"
else
    check "gpu.sh's check-gpu status says the bundle has no GPU test programs" \
        grep -q '^check-gpu: failed: the bundle has no GPU test programs' "$TMP/gb.log"
fi

# ---- env.sh without gzip ---------------------------------------------------
# Only the tools env.sh runs, gzip not among them: Python's gzip unpacks.
mkdir "$TMP/nogzip-bin"
for t in sh readlink dirname mv rm; do
    ln -s "$(command -v "$t")" "$TMP/nogzip-bin/$t"
done
NG=$TMP/nogzip-bundle
# With neither: one line saying so, and env.sh fails.
PATH=$TMP/nogzip-bin "$TMP/nogzip-bin/sh" -c '. "$0/env.sh" && exec shardtrain --version' "$NG" \
    >"$TMP/ng0.out" 2>"$TMP/ng0.err"
st=$?
check "env.sh with neither gzip nor python3: exit $st, one line: $(head -n 1 "$TMP/ng0.err")" \
    sh -c "test $st -ne 0 && test \"\$(wc -l < '$TMP/ng0.err')\" = 1 &&
        grep -q '^env.sh: cannot unpack .*\\.gz; hint:' '$TMP/ng0.err' &&
        test -z \"\$(find '$NG' -name '*.unpacking.*')\""
# A read-only bundle (mounted so in a private namespace): nothing can be
# unpacked, one line says so.
RO=$TMP/ro-bundle
timeout 60 unshare -m --propagation private sh -c \
    'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && . "$0/env.sh"' "$RO" \
    >"$TMP/ro.out" 2>"$TMP/ro.err"
st=$?
check "env.sh in a read-only bundle: exit $st, one line: $(head -n 1 "$TMP/ro.err" | cut -c1-60)..." \
    sh -c "test $st -ne 0 && test \"\$(wc -l < '$TMP/ro.err')\" = 1 &&
        grep -q '^env.sh: cannot unpack .*\\.gz; hint: the bundle must be writable' '$TMP/ro.err'"
# Debian's Python (python3 on PATH may be a wrapper needing more tools)
ln -s /usr/bin/python3 "$TMP/nogzip-bin/python3"
PATH=$TMP/nogzip-bin "$TMP/nogzip-bin/sh" -c '. "$0/env.sh" && exec shardtrain --version' "$NG" \
    >"$TMP/ng.out" 2>"$TMP/ng.err"
st=$?
check "env.sh with no gzip on PATH unpacks with Python, and shardtrain starts (exit $st)" \
    test "$st" -eq 0 -a -s "$TMP/ng.out"
check "those libraries equal gzip's" unpacked_ok "$NG/usr/lib/$ma"

# ---- CUDA libraries the host keeps elsewhere -------------------------------
# The bundle leaves CUDA's libraries to the host, whose toolkit may lack
# NCCL (PyTorch's nvidia-nccl-cu13 package has it).  Here the toolkit's
# library folder is hidden and its libraries shardtrain needs appear only
# in a Python package named nvidia: env.sh must find them there; with
# that package off the Python path, it names them in one warning line.
cudalibs=$(ldd "$SHARDTRAIN" | awk '$2 == "=>" && $3 ~ /cuda/ {print $3}')
if [ -n "$cudalibs" ]; then
    cudadir=$(dirname "$(readlink -f "$(echo "$cudalibs" | head -n 1)")")
    mkdir -p "$TMP/py/nvidia/cuda_libs/lib"
    {
        echo 'set -e'
        for f in $cudalibs; do
            n=${f##*/}
            : >"$TMP/py/nvidia/cuda_libs/lib/$n"
            echo "mount --bind '$(readlink -f "$f")' '$TMP/py/nvidia/cuda_libs/lib/$n'"
        done
        echo "mount --bind '$TMP/empty' '$cudadir'"
        echo 'set +e'
        echo 'exec "$@"'
    } >"$TMP/hidecuda.sh"
    nocuda() {
        timeout 120 unshare -m --propagation private sh "$TMP/hidecuda.sh" "$@"
    }
    nocuda sh -c 'test -z "$(ls -A "$0")" && ! "$1" --version' "$cudadir" "$SHARDTRAIN" \
        >/dev/null 2>&1
    check "the host's CUDA libraries hidden: the normal binary cannot start" test $? -eq 0
    PYTHONPATH=$TMP/py nocuda sh -c '. "$0/env.sh" && exec shardtrain --version' "$B" \
        >"$TMP/pyc.out" 2>"$TMP/pyc.err"
    st=$?
    check "env.sh finds $(echo "$cudalibs" | wc -l) CUDA libraries in python3's nvidia packages (exit $st)" \
        test "$st" -eq 0 -a -s "$TMP/pyc.out" -a ! -s "$TMP/pyc.err"
    PYTHONPATH= nocuda sh -c '. "$0/env.sh"; shardtrain --version' "$B" \
        >"$TMP/noc.out" 2>"$TMP/noc.err"
    check "found nowhere: one warning naming them, $(head -n 1 "$TMP/noc.err" | cut -c1-80)..." \
        sh -c "test \"\$(grep -c '^env.sh:' '$TMP/noc.err')\" = 1 &&
            grep -q '^env.sh: warning: not found on this host:.* libnccl.so.2' '$TMP/noc.err'"
else
    sh -c '. "$0/env.sh" && echo "$LD_LIBRARY_PATH"' "$B" >"$TMP/ldp.out" 2>"$TMP/ldp.err"
    check "a build without CUDA: env.sh adds only the bundle's own libraries" \
        test "$(cat "$TMP/ldp.out")" = "$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -a ! -s "$TMP/ldp.err"
fi

