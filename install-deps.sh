#!/bin/sh
# Installs every Debian package shardtrain's build and test suite need.
# Idempotent: packages already present are left as they are.  Run as root
# or with sudo available.  Debian 12 (bookworm).
set -eu
PACKAGES="
  build-essential autoconf automake libtool pkg-config git
  libopenmpi-dev openmpi-bin libpmix-dev
  libinih-dev libjansson-dev libxxhash-dev libpcre2-dev libopenblas-openmp-dev
  libprotobuf-c-dev protobuf-c-compiler
  mandoc man-db shellcheck
  clang libclang-rt-14-dev
  slurm-wlm slurm-wlm-basic-plugins munge util-linux
  python3 python3-numpy python3-torch python3-xxhash python3-venv python3-crc32c
  librsvg2-bin python3-pil
"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "install-deps.sh: error: run as root or install sudo" >&2
        exit 1
    }
    SUDO=sudo
fi
missing=
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps.sh: all packages already installed"
    exit 0
fi
echo "install-deps.sh: installing:$missing"
$SUDO apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
