#!/usr/bin/env bash
# setup.sh: installs pipelab's missing Debian packages, then configures and builds it in build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")"

PKGS="build-essential cmake pkg-config git libsqlite3-dev libgsl-dev libcunit1-dev \
libopenblas-dev libinih-dev gnuplot-nox libopenmpi-dev openmpi-bin clang libclang-rt-dev help2man man-db"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq $missing >/dev/null
    else
        echo "setup: missing Debian packages; as root run:" >&2
        echo "  apt-get install -y$missing" >&2
        exit 1
    fi
fi

BUILD_DIR="${PIPELAB_BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${PIPELAB_CMAKE_ARGS:-} >&2
fi
cmake --build "$BUILD_DIR" -j"$(nproc)" >&2
