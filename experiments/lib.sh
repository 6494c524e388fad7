# lib.sh: shared by the experiments/ scripts (sourced, not run). Parses the common flags, sets
# PL (the pipelab binary), OUT (results/out), FIG (results/out/figures) and DB, and offers
# `point CMD...`, which runs one sweep point when it belongs to this shard.
#   --shard I/N   run only the points with index % N == I (I in 0..N-1) into NAME.shard-I-of-N.db;
#                 merge the shards with `pipelab db merge`, then rerun with --plot-only
#   --plot-only   skip the sweep; tables and figures from the existing NAME.db
#   --db FILE     use FILE instead of results/out/NAME.db
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PL=${PIPELAB:-build/cli/pipelab}
OUT=results/out
FIG=$OUT/figures
mkdir -p "$FIG"
SHARD_I=0
SHARD_N=1
PLOT_ONLY=0
DB=""
while [ $# -gt 0 ]; do
    case "$1" in
        --shard) SHARD_I=${2%/*}; SHARD_N=${2#*/}; shift 2 ;;
        --shard=*) v=${1#--shard=}; SHARD_I=${v%/*}; SHARD_N=${v#*/}; shift ;;
        --plot-only) PLOT_ONLY=1; shift ;;
        --db) DB=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "$0: unknown option $1 (--shard I/N, --plot-only, --db FILE)" >&2; exit 2 ;;
    esac
done
case "$SHARD_I$SHARD_N" in *[!0-9]*) echo "$0: --shard wants I/N, e.g. 0/4" >&2; exit 2 ;; esac
if [ "$SHARD_N" -lt 1 ] || [ "$SHARD_I" -ge "$SHARD_N" ]; then echo "$0: --shard I/N needs 0 <= I < N" >&2; exit 2; fi
if [ -z "$DB" ]; then
    if [ "$SHARD_N" -gt 1 ]; then DB=$OUT/$NAME.shard-$SHARD_I-of-$SHARD_N.db; else DB=$OUT/$NAME.db; fi
fi
if [ ! -x "$PL" ]; then echo "$0: $PL not built (run ./setup.sh)" >&2; exit 1; fi
# A rerun starts from an empty database, so every run in it comes from this invocation.
if [ "$PLOT_ONLY" = 0 ]; then rm -f "$DB" "$DB-wal" "$DB-shm"; fi
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
