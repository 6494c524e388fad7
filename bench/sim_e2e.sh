#!/usr/bin/env bash
# bench/sim_e2e.sh: `pipelab simulate` as whole commands, from start to exit, for one or two
# binaries side by side: compute actions per second and peak resident bytes per compute action
# at p = 1024, m = 8192 for 1f1b, interleaved (v = 2) and zb-h1, CPU time per action of that
# case over p = 64, m = 1024 (t/act; smaller runs are all process start), and a small run
# (p = 4, m = 8) without and with the database write, beside --version (process start alone).
# Each figure is the best of --reps runs (default 3) with the spread (worst / best wall time);
# the small runs also get perf stat's mean CPU time and elapsed time over 10 x --reps runs. Wall time from date +%s%N around the
# command; peak RSS and user + system CPU time from /usr/bin/time (on a shared machine the CPU
# time is the steadier figure). Printed, not asserted.
# usage: bench/sim_e2e.sh [--reps N] [--quick] NEW_PIPELAB [OLD_PIPELAB]
#   --quick   skip the p = 1024 cases
set -u
reps=3 quick=0
while [ $# -gt 0 ]; do
    case $1 in
    --reps) reps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: bench/sim_e2e.sh [--reps N] [--quick] NEW_PIPELAB [OLD_PIPELAB]" >&2; exit 2; }
bins=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# best_of BIN ARGS...: runs the command reps times; prints "best_s worst_s peak_kb cpu_s" (the
# best wall time, the worst, the least peak RSS and the least user + system CPU time: on a shared
# machine the CPU time is the steadier figure)
best_of() {
    local bin=$1
    shift
    local best="" worst="" kb="" cpu=""
    for _ in $(seq "$reps"); do
        local t0 t1
        t0=$(date +%s%N)
        /usr/bin/time -f "%M %U %S" -o "$tmp/t" "$bin" "$@" > /dev/null 2> "$tmp/err" || { cat "$tmp/err" >&2; echo "0 0 0 0"; return; }
        t1=$(date +%s%N)
        local s m u y
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')
        read -r m u y < "$tmp/t"
        cpu=$(awk -v a="$cpu" -v b="$(awk -v u="$u" -v y="$y" 'BEGIN { print u + y }')" 'BEGIN { print (a == "" || b < a) ? b : a }')
        best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (a == "" || b < a) ? b : a }')
        worst=$(awk -v a="$worst" -v b="$s" 'BEGIN { print (a == "" || b > a) ? b : a }')
        kb=$(awk -v a="$kb" -v b="$m" 'BEGIN { print (a == "" || b < a) ? b : a }')
    done
    echo "$best $worst $kb $cpu"
}

# compute actions of a generated schedule: 2 p m v (F, B) or 3 p m (zb: F, I, W)
compute_actions() { # kind p m
    case $1 in
    zb-h1) echo $((3 * $2 * $3)) ;;
    interleaved) echo $((2 * 2 * $2 * $3)) ;;
    *) echo $((2 * $2 * $3)) ;;
    esac
}

printf "%-12s %6s %6s %-4s %9s %7s %8s %8s %8s %10s %8s\n" kind p m bin wall_s spread Mact/s cpu_s Mact/cpu B/act_rss t/act

for kind in 1f1b interleaved zb-h1; do
    extra=""
    [ "$kind" = interleaved ] && extra="--chunks 2"
    for i in "${!bins[@]}"; do
        name=$([ "$i" = 0 ] && echo new || echo old)
        small_ns=""
        for pm in "64 1024" "1024 8192"; do
            set -- $pm
            [ "$quick" = 1 ] && [ "$1" = 1024 ] && continue
            n=$(compute_actions "$kind" "$1" "$2")
            read -r b w kb c <<< "$(best_of "${bins[$i]}" simulate --kind "$kind" $extra --ranks "$1" --microbatches "$2" \
                --tf 1 --tb 2 --tcomm 0.1 --no-db)"
            ns=$(awk -v s="$c" -v n="$n" 'BEGIN { print s / n * 1e9 }') # CPU time per action
            ratio="-"
            [ -n "$small_ns" ] && ratio=$(awk -v a="$ns" -v b="$small_ns" 'BEGIN { printf "%.2f", a / b }')
            [ -z "$small_ns" ] && small_ns=$ns
            awk -v k="$kind" -v p="$1" -v m="$2" -v nm="$name" -v b="$b" -v w="$w" -v n="$n" -v kb="$kb" -v r="$ratio" -v c="$c" \
                'BEGIN { printf "%-12s %6d %6d %-4s %9.3f %7.2f %8.2f %8.3f %8.2f %10.1f %8s\n", k, p, m, nm, b, (b > 0 ? w / b : 0),
                         (b > 0 ? n / b / 1e6 : 0), c, (c > 0 ? n / c / 1e6 : 0), kb * 1024 / n, r }'
        done
    done
done
echo
# perf_ms BIN ARGS...: perf stat -r (10 x reps) of the command; prints "task_ms elapsed_ms" (the
# means: CPU time of the process and its wall time, start to exit), or "- -" without perf
perf_ms() {
    local out
    if ! out=$(perf stat -r $((10 * reps)) "$@" 2>&1 >/dev/null); then
        echo "- -"
        return
    fi
    awk '/task-clock/ { t = $1 } /seconds time elapsed/ { e = $1 * 1e3 } END { if (t == "" || e == "") print "- -"; else printf "%.2f %.2f\n", t, e }' <<< "$out"
}
# small_row LABEL NAME BIN ARGS...: one row of the small-run table
small_row() {
    local label=$1 nm=$2
    shift 2
    local b w kb c t e
    read -r b w kb c <<< "$(best_of "$@")"
    command -v perf >/dev/null && read -r t e <<< "$(perf_ms "$@")" || { t=-; e=-; }
    awk -v l="$label" -v nm="$nm" -v b="$b" -v w="$w" -v t="$t" -v e="$e" \
        'BEGIN { printf "%-34s %-4s %10.1f %8.2f %10s %10s\n", l, nm, b * 1e3, (b > 0 ? w / b : 0), t, e }'
}
# best_ms/spread: best_of's wall time (from bash: fork and exec included); task_ms/elapsed_ms: the
# means of perf stat over 10 x reps runs ("-" without perf); the database gathers a run per run.
printf "%-34s %-4s %10s %8s %10s %10s\n" "small run (1f1b p=4 m=8)" bin best_ms spread task_ms elapsed_ms
small_args=(simulate --kind 1f1b --ranks 4 --microbatches 8 --tf 1 --tb 2)
for i in "${!bins[@]}"; do
    name=$([ "$i" = 0 ] && echo new || echo old)
    small_row "--version (process start, exit)" "$name" "${bins[$i]}" --version
    small_row "--no-db" "$name" "${bins[$i]}" "${small_args[@]}" --no-db
    rm -f "$tmp/db"*
    small_row "--db (a database of a few runs)" "$name" "${bins[$i]}" "${small_args[@]}" --db "$tmp/db"
done
