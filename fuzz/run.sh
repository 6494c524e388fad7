#!/usr/bin/env bash
# fuzz/run.sh: builds pipelab's libFuzzer targets (clang, ASan + UBSan) and fuzzes each parser.
#
#   fuzz/run.sh [--time SECONDS] [--jobs N] [--build DIR] [--report] [TARGET...]
#
# --report prints the table of the last runs' logs without building or fuzzing.
# TARGET: sched_text torch_csv graph profile_csv hw_ini partition set_kv (default: all).
# Each target runs for --time seconds (default 1800) with N targets at once (default 2), from the
# seeds in fuzz/corpus/<target>/, the regressions in fuzz/regress/<target>/ and the reference
# data kept in the repository (schedules/examples/torch/, cost_models/profiles/pipedream/). The growing corpus, logs and any crashing input go under
# the build folder (default build-fuzz/). Prints one line per target: seconds, executions,
# coverage (libFuzzer's cov: edges and ft: features), corpus size and verdict. Exits 1 when any
# target found a crash, leak, hang (>10 s on one input) or allocation beyond 2 GiB: its input is
# kept as build-fuzz/artifacts/<target>/crash-* (copy it into fuzz/regress/<target>/ with the fix).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

time_s=1800
jobs=2
build=build-fuzz
report_only=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) time_s=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --report) report_only=1; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
all=(sched_text torch_csv graph profile_csv hw_ini partition set_kv)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
for t in "${targets[@]}"; do
    case " ${all[*]} " in *" $t "*) ;; *) echo "fuzz/run.sh: unknown target '$t' (known: ${all[*]})" >&2; exit 2 ;; esac
done

if [ $report_only = 0 ]; then
if ! command -v clang >/dev/null; then
    echo "fuzz/run.sh: clang not found; install the Debian packages clang and libclang-rt-dev (./setup.sh does)" >&2
    exit 1
fi

# build: the libraries with -fsanitize=fuzzer-no-link,address,undefined, the targets with libFuzzer
if [ ! -f "$build/CMakeCache.txt" ]; then
    mkdir -p "$build"
    CC=clang cmake -S . -B "$build" -DPIPELAB_FUZZ=ON -DPIPELAB_MPI=OFF -DPIPELAB_CUDA=OFF \
        -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
        { cat "$build/configure.log" >&2; exit 1; }
fi
cmake --build "$build" --target fuzzers -j2 >"$build/build.log" 2>&1 || { tail -40 "$build/build.log" >&2; exit 1; }

torch_dir="$ROOT/schedules/examples/torch"
pipedream_dir="$ROOT/cost_models/profiles/pipedream"
run_one() {
    local t=$1
    local corpus="$build/corpus/$t" art="$build/artifacts/$t" seeds="$build/seeds/$t" log="$build/logs/$t.log"
    mkdir -p "$corpus" "$art" "$seeds" "$build/logs" "fuzz/regress/$t"
    # reference data as extra seeds (the targets that take a selector byte get one prepended)
    case $t in
        graph) cp "$pipedream_dir"/*.graph.txt "$seeds/" ;;
        torch_csv)
            for f in "$torch_dir"/*.csv; do
                case $f in *legacy*) sel='\001' ;; *) sel='\000' ;; esac
                { printf "$sel"; cat "$f"; } >"$seeds/$(basename "$f")"
            done ;;
    esac
    local rc=0
    "$build/fuzz/fuzz_$t" -max_total_time="$time_s" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/" \
        "$corpus" "fuzz/corpus/$t" "fuzz/regress/$t" "$seeds" >"$log" 2>&1 || rc=$?
    echo "$rc" >"$build/logs/$t.rc"
}
export -f run_one
export build time_s torch_dir pipedream_dir ROOT

echo "fuzzing ${targets[*]} for ${time_s} s each, $jobs at a time (logs in $build/logs/)"
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'
fi

failed=0
printf '\n%-12s %8s %12s %9s %7s %7s %7s  %s\n' target seconds executions exec/s cov ft corpus verdict
for t in "${targets[@]}"; do
    log="$build/logs/$t.log"
    rc=$(cat "$build/logs/$t.rc" 2>/dev/null || echo 1)
    [ -f "$log" ] || { printf '%-12s no log\n' "$t"; failed=1; continue; }
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    verdict=ok
    if [ "$rc" != 0 ]; then
        verdict="FAILED (rc $rc): $(grep -a -m1 -E 'ERROR|==[0-9]+==|fuzz invariant|runtime error' "$log" | cut -c1-100 || true)"
        failed=1
    fi
    printf '%-12s %8s %12s %9s %7s %7s %7s  %s\n' "$t" "${secs:-?}" "${execs:-?}" "${rate:-?}" \
        "${cov:-?}" "${ft:-?}" "${corp:-?}" "$verdict"
done
[ $failed = 0 ] || { echo "crashing inputs: $build/artifacts/<target>/" >&2; exit 1; }
