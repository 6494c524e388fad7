# lib.sh: shared by the experiments/ scripts (sourced, not run). Parses the common flags, sets
# PL (the pipelab binary), OUT (results/out), FIG (results/out/figures) and DB, and offers
# `point CMD...`, which runs one sweep point when it belongs to this shard.
#   --shard I/N   run only the points with index % N == I (I in 0..N-1) into NAME.shard-I-of-N.db
#                 (and write nothing else); then --merge N on one machine
#   --merge N     merge the N shard databases into NAME.db (made afresh) with `pipelab db merge`,
#                 refusing when one is missing, then make the tables and figures as --plot-only
#   --plot-only   skip the sweep; tables and figures from the existing NAME.db
#   --db FILE     use FILE instead of results/out/NAME.db; shards write FILE's name with
#                 .shard-I-of-N before its .db, and --merge N reads those
# Environment: PIPELAB, the binary (default build/cli/pipelab); PIPELAB_OUT, the folder of the
# databases and figures (default results/out). Paths given in flags and in the environment are
# relative to the directory the script was called from; the script itself runs in the
# repository root, so it works from any directory.
set -euo pipefail
CALLER_DIR=$PWD
# Returns (prints) path made absolute against the caller's directory.
from_caller() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$CALLER_DIR/$1" ;; esac; }
SCRIPT=$(from_caller "$0")
# Exits 2 (a usage error) with the script's name and what is wrong.
usage_error() { echo "$0: $1" >&2; exit 2; }
# Returns (prints) the header comment of file $1 from its line $2 on, without the '#'s: the help.
header() { awk -v from="$2" 'NR >= from && !/^#/ { exit } NR >= from { sub(/^# ?/, ""); print }' "$1"; }
# Returns (prints) the database shard I of N writes: the sweep's own for a single shard.
shard_db() { if [ "$2" -gt 1 ]; then echo "${SWEEP_DB%.db}.shard-$1-of-$2.db"; else echo "$SWEEP_DB"; fi; }
SHARD_I=0
SHARD_N=1
SHARDED=0
MERGE_N=0
PLOT_ONLY=0
DB=""
while [ $# -gt 0 ]; do
    case "$1" in
        --shard|--merge|--db) [ $# -ge 2 ] || usage_error "$1 wants a value" ;;&
        --shard) [[ $2 =~ ^[0-9]+/[0-9]+$ ]] || usage_error "--shard wants I/N, two whole numbers (e.g. 0/4), got '$2'"
            SHARD_I=$((10#${2%/*})); SHARD_N=$((10#${2#*/})); SHARDED=1; shift 2 ;;
        --merge) [[ $2 =~ ^[0-9]+$ ]] && [ $((10#$2)) -ge 1 ] || usage_error "--merge wants N >= 1, the number of shards, got '$2'"
            MERGE_N=$((10#$2)); shift 2 ;;
        --plot-only) PLOT_ONLY=1; shift ;;
        --db) DB=$(from_caller "$2"); shift 2 ;;
        -h|--help) header "$SCRIPT" 2; header "${BASH_SOURCE[0]}" 4; exit 0 ;;
        *) usage_error "unknown option $1 (--shard I/N, --merge N, --plot-only, --db FILE)" ;;
    esac
done
if [ "$SHARD_N" -lt 1 ] || [ "$SHARD_I" -ge "$SHARD_N" ]; then usage_error "--shard I/N needs 0 <= I < N, got $SHARD_I/$SHARD_N"; fi
if [ "$SHARDED" = 1 ] && [ "$PLOT_ONLY$MERGE_N" != 00 ]; then usage_error "--shard runs a part of the sweep: not with --plot-only or --merge"; fi
if [ "$MERGE_N" -gt 0 ]; then PLOT_ONLY=1; fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PL=build/cli/pipelab
[ -z "${PIPELAB:-}" ] || PL=$(from_caller "$PIPELAB")
OUT=results/out
[ -z "${PIPELAB_OUT:-}" ] || OUT=$(from_caller "$PIPELAB_OUT")
FIG=$OUT/figures
SWEEP_DB=${DB:-$OUT/$NAME.db}
DB=$(shard_db "$SHARD_I" "$SHARD_N")
if [ ! -x "$PL" ]; then echo "$0: $PL not built (run ./setup.sh)" >&2; exit 1; fi
mkdir -p "$(dirname "$DB")"
# Merges the MERGE_N shard databases into DB, made afresh; exits 1 naming a missing shard.
merge_shards() {
    local i shards=()
    for ((i = 0; i < MERGE_N; i++)); do shards+=("$(shard_db "$i" "$MERGE_N")"); done
    for i in "${!shards[@]}"; do
        [ -f "${shards[$i]}" ] || { echo "$0: --merge $MERGE_N: ${shards[$i]} not found (shard $i/$MERGE_N did not run or failed)" >&2; exit 1; }
    done
    rm -f "$DB" "$DB-wal" "$DB-shm"
    "$PL" db merge "${shards[@]}" -o "$DB" >&2
}
# (a single shard wrote the sweep's database itself)
if [ "$MERGE_N" -gt 1 ]; then merge_shards; fi
# A rerun starts from an empty database, so every run in it comes from this invocation.
if [ "$PLOT_ONLY" = 0 ]; then rm -f "$DB" "$DB-wal" "$DB-shm"; fi
[ "$SHARD_N" -gt 1 ] || mkdir -p "$FIG"
POINT=0
# Runs "$@" when the current point belongs to this shard (and not --plot-only); counts points.
point() {
    local i=$POINT
    POINT=$((POINT + 1))
    [ "$PLOT_ONLY" = 0 ] || return 0
    [ $((i % SHARD_N)) -eq "$SHARD_I" ] || return 0
    "$@"
}
# Returns 0 when figures and tables should be made now (one shard only writes its database).
summarize() { [ "$SHARD_N" = 1 ]; }
