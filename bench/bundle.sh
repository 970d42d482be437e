#!/bin/sh
# Packs the built shardtrain with its own Open MPI runtime into one
# relocatable folder, for a host that has no Open MPI, PMIx, inih, jansson
# or xxHash (the lent GPU machine: files reach it only in the working tree
# or a carried folder of at most 64 MiB).  `. OUT_DIR/env.sh` there.
#
#   sh bench/bundle.sh [--with-cuda-libs] [OUT_DIR]     (default: bundle)
#
# Even one rank without a launcher needs Open MPI's runtime: the singleton
# MPI_Init forks orted, and both load MCA plugins, help texts and the params
# file from paths compiled into libopen-pal and libpmix.  The bundle mirrors
# the /usr tree of Debian's packages under OUT_DIR so that env.sh can point
# every one of those paths (OPAL_*, PMIX_*) at the copy.
#
# glibc stays on the host (a copied libc would not match the host's
# ld-linux).  CUDA libraries stay on the host too, by default: the GPU
# machine has the same toolkit, and libnccl alone is over 200 MB;
# --with-cuda-libs copies the ones shardtrain needs anyway.
set -eu

with_cuda=0
out=
for a in "$@"; do
    case $a in
        --with-cuda-libs) with_cuda=1 ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        -*) echo "bundle.sh: unknown option $a" >&2; exit 2 ;;
        *) out=$a ;;
    esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
out=${out:-bundle}
bin=${SHARDTRAIN:-$top/shardtrain}
[ -x "$bin" ] || { echo "bundle.sh: $bin not built (make first)" >&2; exit 1; }
# A sanitizer build is for finding bugs on this machine, not for carrying:
# its instrumented programs and the sanitizer runtimes take the bundle past
# the 64 MiB the device tool carries (72 MiB on 2026-11-29), and on the GPU
# machine compute-sanitizer is the checker.
if ldd "$bin" 2>/dev/null | grep -q 'lib[a-z]*san\.so'; then
    echo "bundle.sh: $bin is a sanitizer build (--enable-sanitizers); bundle a release build" >&2
    exit 1
fi

mpirun=$(readlink -f "$(command -v mpirun)")
orted=$(readlink -f "$(command -v orted)")
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
sysl=/usr/lib/$multiarch
ompi_plugins=$sysl/openmpi/lib/openmpi3
pmix_root=$sysl/pmix2
for d in "$ompi_plugins" "$pmix_root/share" /usr/share/openmpi /etc/openmpi; do
    [ -d "$d" ] || { echo "bundle.sh: $d missing: not Debian's Open MPI 4.1 / PMIx layout" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/usr/bin" "$out/usr/lib/$multiarch/openmpi/lib/openmpi3" "$out/usr/lib/$multiarch/hwloc" \
    "$out/usr/lib/$multiarch/pmix2/lib/pmix" "$out/usr/share" "$out/etc"
B=$(cd "$out" && pwd)
lib=$B/usr/lib/$multiarch
work=$(mktemp -d "${TMPDIR:-/tmp}/bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Libraries that never go in: glibc's own (they must match the host's
# loader), the driver, and the CUDA libraries unless asked for.
host_lib() {
    case $1 in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libutil.so.*|\
        libresolv.so.*|libanl.so.*|libmvec.so.*|libnss_*|libBrokenLocale.so.*|\
        ld-linux*|linux-vdso*|libcuda.so.*|libnvidia-*) return 0 ;;
        libcudart.so.*|libnccl.so.*|libcublas*.so.*) [ "$with_cuda" -eq 0 ] ;;
        *) return 1 ;;
    esac
}
# Fabrics this one-node tool never uses (InfiniBand, UCX, PSM, libfabric)
# and OpenSHMEM: plugins that need them are left out, so the bundle stays
# small and Open MPI never warns about a plugin it cannot open.
fabric_lib() {
    case $1 in
        libucp.*|libuct.*|libucs.*|libucm.*|libpsm*|libinfinipath.*|libfabric.*|\
        libibverbs.*|librdmacm.*|libefa.*|libnl-*|liboshmem.*|libmca_common_ucx.*|\
        libmca_common_ofi.*|libmca_common_verbs.*) return 0 ;;
        *) return 1 ;;
    esac
}

# deps OBJ: "soname path" of every library OBJ needs, walking NEEDED
# entries (not ldd's flat list, which would also drag in what the host
# CUDA libraries need, such as libstdc++).  Cached: plugins share most.
mkdir "$work/deps"
deps() {
    c=$work/deps/$(echo "$1" | tr / _)
    [ -f "$c" ] || deps_of "$1" > "$c"
    cat "$c"
}
deps_of() {
    ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' > "$work/ldd"
    for n in $(objdump -p "$1" | awk '$1 == "NEEDED" {print $2}'); do
        host_lib "$n" && continue
        p=$(awk -v n="$n" '$1 == n {print $2; exit}' "$work/ldd")
        [ -n "$p" ] || { echo "bundle.sh: $1 needs $n, not found" >&2; return 1; }
        echo "$n $p"
    done
}
# closure OBJ...: every library in the NEEDED closure, once ("soname path")
closure() {
    : > "$work/seen"
    for o in "$@"; do echo "- $o"; done > "$work/todo"
    while [ -s "$work/todo" ]; do
        read -r n p < "$work/todo"
        sed -i 1d "$work/todo"
        deps "$p" | while read -r dn dp; do
            grep -qx "$dn $dp" "$work/seen" && continue
            echo "$dn $dp" >> "$work/seen"
            echo "$dn $dp" >> "$work/todo"
        done
    done
    cat "$work/seen"
}

# MCA plugins, without those for the fabrics above.
plugins=
for p in "$ompi_plugins"/*.so; do
    skip=0
    for n in $(closure "$p" | awk '{print $1}'); do
        fabric_lib "$n" && { skip=1; break; }
    done
    [ "$skip" -eq 0 ] && plugins="$plugins $p"
done
pmix_plugins=$(ls "$pmix_root"/lib/pmix/*.so)

# The programs (mpirun is orterun; mpiexec the same program), plugins and
# the closure of all their libraries.
install -m 755 "$bin" "$B/usr/bin/shardtrain"
install -m 755 "$mpirun" "$B/usr/bin/mpirun"
install -m 755 "$orted" "$B/usr/bin/orted"
ln -s mpirun "$B/usr/bin/mpiexec"
# The GPU test programs, when built (make check builds them where configure
# found CUDA): the GPU machine has no Open MPI to build them with, so
# bench/gpu.sh runs these copies.  Every program of make check-gpu's list
# (Makefile.am's GPU_TESTS: tests/gpu/test_* without a suffix).
gpu_tests=
for t in "$top"/tests/gpu/test_*; do
    case ${t##*/} in *.*) continue ;; esac
    if [ ! -f "$t" ] || [ ! -x "$t" ]; then continue; fi
    install -m 755 "$t" "$B/usr/bin/"
    gpu_tests="$gpu_tests $t"
done
for p in $plugins; do install -m 644 "$p" "$B/usr/lib/$multiarch/openmpi/lib/openmpi3/"; done
for p in $pmix_plugins; do install -m 644 "$p" "$B/usr/lib/$multiarch/pmix2/lib/pmix/"; done
# shellcheck disable=SC2086
closure "$bin" "$mpirun" "$orted" $gpu_tests $plugins $pmix_plugins | sort -u > "$work/libs"
while read -r n p; do
    fabric_lib "$n" && { echo "bundle.sh: $n reached outside a plugin" >&2; exit 1; }
    install -m 644 "$p" "$lib/$n"
done < "$work/libs"

# Runtime data: help texts (without them every error is "help file not
# found"), Open MPI's site params (Debian's turn off the fabric plugins) and
# PMIx's, whose component path is absolute: env.sh sets it instead.
cp -r /usr/share/openmpi "$B/usr/share/openmpi"
rm -f "$B"/usr/share/openmpi/*-wrapper-data.txt
cp -r /etc/openmpi "$B/etc/openmpi"
cp -r "$pmix_root/share" "$B/usr/lib/$multiarch/pmix2/share"
sed -i 's|^mca_base_component_path *=|# set by env.sh: &|' \
    "$B/usr/lib/$multiarch/pmix2/share/pmix-mca-params.conf"

# Debug sections are dead weight on the other machine.
find "$B/usr" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.txt' |
    while read -r f; do strip --strip-debug "$f" 2>/dev/null || true; done

# The device tool carries 64 MiB, and OpenBLAS alone (kernels for every
# x86 CPU in one library) is 35 MB: libraries over 1 MiB travel gzipped
# (OpenBLAS's to 10.7 MB) and env.sh unpacks each beside itself the first
# time it is sourced.  Plugins and programs stay as they are.
find "$lib" -maxdepth 1 -type f -name '*.so*' ! -name '*.gz' -size +1024k -exec gzip -9n {} +

cat > "$B/env.sh" <<EOF
# Source this (. path/to/bundle/env.sh) to run the bundled shardtrain,
# mpirun and orted with the bundle's Open MPI and PMIx instead of a system
# one.  Written by bench/bundle.sh; every path is relative to this file.
#
# A sourced file has no portable way to learn its own path: bash and zsh
# tell it; dash keeps the file open while reading it, so /proc/\$\$/fd
# names it; ST_BUNDLE set beforehand wins over both.
if [ -z "\${ST_BUNDLE:-}" ]; then
    if [ -n "\${BASH_SOURCE:-}" ]; then ST_BUNDLE=\$(dirname "\$BASH_SOURCE")
    elif [ -n "\${ZSH_VERSION:-}" ]; then eval 'ST_BUNDLE=\${\${(%):-%x}:h}'
    else
        for _st_fd in /proc/\$\$/fd/*; do
            _st_p=\$(readlink "\$_st_fd" 2>/dev/null) || continue
            case \$_st_p in */env.sh) [ -d "\${_st_p%/env.sh}/usr/lib/$multiarch/openmpi" ] &&
                ST_BUNDLE=\${_st_p%/env.sh} ;; esac
        done
        unset _st_fd _st_p
    fi
fi
if [ -z "\${ST_BUNDLE:-}" ] || [ ! -d "\$ST_BUNDLE/usr/lib/$multiarch/openmpi" ]; then
    echo "env.sh: cannot tell where the bundle is; set ST_BUNDLE=/path/to/bundle first" >&2
    unset ST_BUNDLE
    return 1 2>/dev/null || exit 1
fi
ST_BUNDLE=\$(cd "\$ST_BUNDLE" && pwd)
export ST_BUNDLE
# Libraries bundle.sh gzipped, unpacked once beside themselves (through a
# temporary name, so a library that exists is whole); Python's gzip where
# the host has no gzip.
for _st_gz in "\$ST_BUNDLE/usr/lib/$multiarch"/*.so*.gz; do
    [ -f "\$_st_gz" ] && [ ! -f "\${_st_gz%.gz}" ] || continue
    _st_tmp=\${_st_gz%.gz}.unpacking.\$\$
    if { if command -v gzip >/dev/null 2>&1; then gzip -dc "\$_st_gz"
         elif command -v python3 >/dev/null 2>&1; then
             python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), sys.stdout.buffer)' "\$_st_gz"
         else false; fi; } 2>/dev/null >"\$_st_tmp" && mv -f "\$_st_tmp" "\${_st_gz%.gz}" 2>/dev/null; then :
    else
        rm -f "\$_st_tmp"
        echo "env.sh: cannot unpack \$_st_gz; hint: the bundle must be writable, with gzip or python3 on PATH" >&2
        unset _st_gz _st_tmp ST_BUNDLE
        return 1 2>/dev/null || exit 1
    fi
done
unset _st_gz _st_tmp
export PATH="\$ST_BUNDLE/usr/bin\${PATH:+:\$PATH}"
export LD_LIBRARY_PATH="\$ST_BUNDLE/usr/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
# The CUDA libraries are the host's.  Where its loader cannot find one
# (NCCL is not part of the CUDA toolkit: a host may have it only in
# PyTorch's Python packages, nvidia-nccl-cu13 and the like), the folder
# that holds it is added, from CUDA_HOME or python3's nvidia packages;
# one still missing is one warning line.
_st_missing=\$(for _st_p in "\$ST_BUNDLE"/usr/bin/*; do ldd "\$_st_p" 2>/dev/null; done |
    awk '\$2 == "=>" && \$3 == "not" && !seen[\$1]++ {print \$1}')
if [ -n "\$_st_missing" ]; then
    _st_cuda=\${CUDA_HOME:-/usr/local/cuda}
    _st_dirs="\$_st_cuda/lib64 \$_st_cuda/targets/x86_64-linux/lib \$(python3 -c '
import os, nvidia
print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))))' 2>/dev/null)"
    _st_lost=
    for _st_l in \$_st_missing; do
        _st_found=
        for _st_d in \$_st_dirs; do
            [ -f "\$_st_d/\$_st_l" ] || continue
            _st_found=1
            case ":\$LD_LIBRARY_PATH:" in *":\$_st_d:"*) ;; *) LD_LIBRARY_PATH="\$LD_LIBRARY_PATH:\$_st_d" ;; esac
            break
        done
        [ -n "\$_st_found" ] || _st_lost="\$_st_lost \$_st_l"
    done
    [ -z "\$_st_lost" ] || echo "env.sh: warning: not found on this host:\$_st_lost (looked in \$_st_cuda and python3's nvidia packages); the programs that need them will not start" >&2
    unset _st_cuda _st_dirs _st_lost _st_l _st_found _st_d
fi
unset _st_missing _st_p
# Open MPI: OPAL_PREFIX relocates what Debian configured under \${prefix}
# (libdir); the rest is absolute in libopen-pal, so each is named.
export OPAL_PREFIX="\$ST_BUNDLE/usr"
export OPAL_EXEC_PREFIX="\$ST_BUNDLE/usr"
export OPAL_BINDIR="\$ST_BUNDLE/usr/bin"
export OPAL_LIBDIR="\$ST_BUNDLE/usr/lib/$multiarch/openmpi/lib"
export OPAL_PKGLIBDIR="\$ST_BUNDLE/usr/lib/$multiarch/openmpi/lib/openmpi3"
export OPAL_DATAROOTDIR="\$ST_BUNDLE/usr/share"
export OPAL_DATADIR="\$ST_BUNDLE/usr/share"
export OPAL_PKGDATADIR="\$ST_BUNDLE/usr/share/openmpi"
export OPAL_SYSCONFDIR="\$ST_BUNDLE/etc/openmpi"
export OMPI_MCA_mca_base_component_path="\$OPAL_PKGLIBDIR"
# The singleton MPI_Init and mpirun on other nodes start this orted.
export OMPI_MCA_orte_launch_agent="\$ST_BUNDLE/usr/bin/orted"
# PMIx (the external libpmix Open MPI uses): its own install paths.
export PMIX_PREFIX="\$ST_BUNDLE/usr/lib/$multiarch/pmix2"
export PMIX_INSTALL_PREFIX="\$PMIX_PREFIX"
export PMIX_LIBDIR="\$PMIX_PREFIX/lib"
export PMIX_PKGLIBDIR="\$PMIX_PREFIX/lib/pmix"
export PMIX_DATADIR="\$PMIX_PREFIX/share"
export PMIX_PKGDATADIR="\$PMIX_PREFIX/share/pmix"
export PMIX_SYSCONFDIR="\$PMIX_PREFIX/share"
export PMIX_MCA_mca_base_component_path="\$PMIX_PREFIX/lib/pmix"
# libhwloc would otherwise load whatever plugins the host has at Debian's
# path, built against another hwloc; Open MPI needs none on one node.
export HWLOC_PLUGINS_PATH="\$ST_BUNDLE/usr/lib/$multiarch/hwloc"
EOF

# The host's glibc must be at least the newest version any file asks for.
glibc=$(find "$B/usr" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)
size=$(du -sk "$B" | cut -f1)
packed=$(find "$lib" -maxdepth 1 -name '*.gz' | wc -l)
echo "bundle: $B ($((size / 1024)) MiB, $size KiB; $(wc -l < "$work/libs") libraries ($packed gzipped)," \
    "$(echo "$plugins" | wc -w) Open MPI plugins; the host needs glibc >= ${glibc#GLIBC_})"
[ "$size" -lt $((64 * 1024)) ] || echo "bundle.sh: warning: over 64 MiB, too big to carry" >&2
