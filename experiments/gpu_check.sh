#!/usr/bin/env bash
# experiments/gpu_check.sh: the CUDA backend's device check, made for one call of at most 8
# minutes on a GPU machine that has CUDA (nvcc, cuBLAS), CMake and a C compiler but no package
# registry. It unpacks the Debian packages carried in .debs/ (experiments/gpu_debs.sh fetches
# them) into a prefix and points pkg-config and the loader at it, builds pipelab with CUDA in
# build-gpu/ (sm_90 + PTX), runs the CUDA tests (test_exec_cuda: kernels, runs and every
# schedule against the CPU backend), runs `pipelab profile/run --backend cuda` (records in a
# database; 4 ranks in green contexts of a quarter of the SMs each), then bench_cuda (cuBLAS
# peak, GEMM rate, gpipe/1f1b/zb-h1 with 4 ranks on one GPU against the ideal and the
# prediction), and prints a table last. Logs go to $OUT (the device
# tool's folder) when it is set, else /tmp/pipelab-gpu-check. The exact call: README, "GPU backend".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
T0=$(date +%s)
OUTD=${OUT:-/tmp/pipelab-gpu-check}
mkdir -p "$OUTD"
PREFIX=${PIPELAB_PREFIX:-/tmp/pipelab-prefix}
BUILD=${PIPELAB_GPU_BUILD:-build-gpu}
DEADLINE=$((T0 + ${PIPELAB_GPU_CHECK_S:-450})) # the whole script, under the call's 8 minutes
declare -a STEPS=()
log() { echo "[gpu_check +$(($(date +%s) - T0))s] $*"; }
# step NAME SECONDS CMD...: runs CMD under a time limit (and within the script's deadline), its
# output to $OUTD/NAME.log and the terminal's tail; records the outcome for the table. Output
# is line-buffered (stdbuf) so that a command stopped at its limit leaves what it printed.
LINEBUF=()
command -v stdbuf >/dev/null && LINEBUF=(stdbuf -oL)
step() {
    local name=$1 limit=$2 t rc left
    shift 2
    t=$(date +%s)
    left=$((DEADLINE - t))
    if [ "$left" -lt 10 ]; then
        STEPS+=("$(printf '%-10s %-7s %4ss  %s' "$name" "skipped" 0 "no time left")")
        return 124
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    log "$name (limit ${limit}s): $*"
    timeout "$limit" "${LINEBUF[@]}" "$@" >"$OUTD/$name.log" 2>&1
    rc=$?
    tail -n 25 "$OUTD/$name.log"
    STEPS+=("$(printf '%-10s rc=%-4s %4ss  %s' "$name" "$rc" "$(($(date +%s) - t))" "$OUTD/$name.log")")
    return $rc
}
# shellcheck disable=SC2317 # called by the EXIT trap
summary() {
    echo
    echo "== gpu_check summary ($(($(date +%s) - T0)) s; rc 77 = skipped, 124 = timed out) =="
    for s in "${STEPS[@]}"; do echo "$s"; done
    if [ -s "$OUTD/bench.log" ]; then
        echo
        sed -n '/^kind /,$p' "$OUTD/bench.log"
    fi
}
trap summary EXIT

# ---- 1. the carried packages
if ! ls .debs/*.deb >/dev/null 2>&1; then
    echo "gpu_check.sh: no .debs/*.deb: run experiments/gpu_debs.sh on a machine with a registry and carry .debs" >&2
    exit 1
fi
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
for f in .debs/*.deb; do dpkg -x "$f" "$PREFIX" || { echo "gpu_check.sh: cannot unpack $f" >&2; exit 1; }; done
# the .pc files name /usr: point them into the prefix
find "$PREFIX" -name '*.pc' -exec sed -i -e "s#=/usr#=$PREFIX/usr#g" -e "s#-I/usr#-I$PREFIX/usr#g" \
    -e "s#-L/usr#-L$PREFIX/usr#g" {} +
ML=$PREFIX/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$ML/pkgconfig:$ML/openblas-pthread/pkgconfig:$PREFIX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$ML:$ML/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LIBRARY_PATH=$ML:$ML/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
export CPATH=$PREFIX/usr/include:$PREFIX/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}
# the carried pkgconf (its .pc files were just rewritten for it), else the machine's
PKGCONF=$PREFIX/usr/bin/pkgconf
[ -x "$PKGCONF" ] && "$PKGCONF" --version >/dev/null 2>&1 || PKGCONF=$(command -v pkg-config || echo pkg-config)
for d in /usr/local/cuda/bin /opt/torch/.venv/bin; do [ -d "$d" ] && PATH=$PATH:$d; done
if ! command -v nvcc >/dev/null; then # a toolkit elsewhere (another version folder, a wheel's)
    N=$(find /usr/local /opt /usr/lib -maxdepth 9 -name nvcc -type f -perm -u+x 2>/dev/null | sort | tail -1)
    [ -n "$N" ] && PATH=$PATH:$(dirname "$N")
fi
export PATH
CMAKE=$(command -v cmake || true)
if [ -z "$CMAKE" ]; then
    CMAKE=$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || true)
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# cuBLAS: the toolkit's, else the one a Python wheel brought (headers and a versioned library)
EXTRA=()
CUDA_ROOT=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if [ ! -e "$CUDA_ROOT/include/cublas_v2.h" ]; then
    H=$(find /usr/local /opt /usr/lib -name cublas_v2.h 2>/dev/null | head -1)
    LIBF=$( [ -n "$H" ] && find "$(dirname "$(dirname "$H")")" -name 'libcublas.so*' 2>/dev/null | sort | head -1)
    LTF=$( [ -n "$H" ] && find "$(dirname "$(dirname "$H")")" -name 'libcublasLt.so*' 2>/dev/null | sort | head -1)
    log "no cublas_v2.h in $CUDA_ROOT: using ${H:-none}, ${LIBF:-none}"
    if [ -n "$H" ] && [ -n "$LIBF" ]; then
        CPATH=$(dirname "$H"):$CPATH
        LD_LIBRARY_PATH=$(dirname "$LIBF"):$LD_LIBRARY_PATH
        EXTRA=(-DCUDA_cublas_LIBRARY="$LIBF")
        [ -n "$LTF" ] && EXTRA+=(-DCUDA_cublasLt_LIBRARY="$LTF")
    fi
fi
# the toolkit's libraries (cuBLAS is loaded by name at run time) where the loader looks first
for d in "$CUDA_ROOT/lib64" "$CUDA_ROOT/lib" "$CUDA_ROOT/targets/x86_64-linux/lib"; do
    [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
export LD_LIBRARY_PATH CPATH
NVCC=$(command -v nvcc || true)
log "prefix $PREFIX ($(find .debs -maxdepth 1 -name "*.deb" | wc -l) packages), cmake ${CMAKE:-none}, nvcc $(command -v nvcc || echo none), pkg-config $PKGCONF"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv 2>&1 | head -3
[ -n "$CMAKE" ] || { echo "gpu_check.sh: no cmake on this machine" >&2; exit 1; }

# ---- 2. build (the CUDA tests, the benchmark and the program only)
# warnings are not errors here: the machine's compiler may be newer than the one CI holds the code to
step configure 90 "$CMAKE" -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPIPELAB_CUDA=ON -DPIPELAB_MPI=OFF \
    -DPIPELAB_WERROR=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" -DPKG_CONFIG_EXECUTABLE="$PKGCONF" \
    ${NVCC:+-DCMAKE_CUDA_COMPILER="$NVCC"} "${EXTRA[@]}" || exit 1
step build 200 "$CMAKE" --build "$BUILD" -j "$(nproc)" --target test_exec_cuda bench_cuda pipelab || exit 1

# ---- 3. the CUDA tests (verbose: every error against its bound)
step tests 150 env PIPELAB_TEST_VERBOSE=1 "$BUILD/tests/test_exec_cuda"

# ---- 4. the program: a GPU profile, then a run with the prediction, stored and compared
P=$BUILD/cli/pipelab
DB=/tmp/pipelab-gpu-check.db # not in $OUT: the device tool returns at most 8 files (the 8 logs)
rm -f "$DB" "$DB-wal" "$DB-shm"
# the profile's CSV goes into its log (after the summary); 4 workers in green contexts, as the
# run's ranks: its blocks and the hand-off between two ranks (#@ p2p_latency_s, p2p_Bps)
step profile 60 sh -c '"$0" profile --backend cuda --precision bf16 --sm-split --concurrency 4 --width 1024 --depth 8 \
    --microbatch-size 64 --reps 20 -o /tmp/pipelab-gpu-profile.csv && cat /tmp/pipelab-gpu-profile.csv' "$P"
step run 90 "$P" run --backend cuda --sm-split --precision bf16 --kind zb-h1 --ranks 4 --microbatches 8 --width 1024 \
    --depth 8 --microbatch-size 64 --warmup 2 --timed 5 --trace --db "$DB" --tag gpu_check
step compare 30 "$P" compare --db "$DB" --tag gpu_check --actions
# every action of the run's timed passes and its prediction, for a look at the hand-offs' waits
step ops 30 sh -c '"$0" db show 1 --ops --db "$1" && "$0" db show 2 --ops --db "$1"' "$P" "$DB"

# ---- 5. the benchmark (its table is printed again at the very end)
step bench 180 "$BUILD/bench/bench_cuda" 2048 256 8 4 bf16
exit 0
