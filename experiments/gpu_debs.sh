#!/usr/bin/env bash
# experiments/gpu_debs.sh: downloads, on a machine with a Debian package registry, the Debian
# packages that experiments/gpu_check.sh unpacks on a GPU machine that has CUDA, CMake and a C
# compiler but no registry: the libraries pipelab builds against (sqlite3, GSL, CUnit, inih,
# OpenBLAS) and pkg-config. They go into .debs/ (git-ignored), which the GPU call carries along.
# Takes a few seconds; about 20 MB. Run it from anywhere; it works in the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="libsqlite3-dev libsqlite3-0 libgsl-dev libgsl27 libgslcblas0 libcunit1-dev libcunit1
      libinih-dev libinih1 libinireader0 libopenblas-dev libopenblas0 libopenblas-pthread-dev
      libopenblas0-pthread libgfortran5 libquadmath0 pkg-config pkgconf pkgconf-bin libpkgconf3"

if ! command -v apt-get >/dev/null; then
    echo "gpu_debs.sh: needs apt-get (a Debian or Ubuntu machine with its package registry)" >&2
    exit 1
fi
# the GPU machines are x86-64: on another processor, fetch amd64 packages from their own lists
opts=()
if [ "$(dpkg --print-architecture)" != amd64 ]; then
    mkdir -p /tmp/pipelab-amd64-lists/partial
    opts=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/pipelab-amd64-lists)
    apt-get "${opts[@]}" update
fi
rm -rf .debs
mkdir -p .debs
# shellcheck disable=SC2086
(cd .debs && apt-get "${opts[@]}" download $PKGS)
n=$(find .debs -maxdepth 1 -name "*.deb" | wc -l)
echo "gpu_debs.sh: $n packages in .debs/ ($(du -sh .debs | cut -f1)); carry \".debs\" with experiments/gpu_check.sh"
