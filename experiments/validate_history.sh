# validate_history.sh: the history of validate_cpu.sh --broad and --offgrid, sourced by it (and by
# test_exec). history_repeats merges the grid's database DB (runs tagged NAME) into the history
# database of the grid, code and machine that made them, OUT/history/GRID-REV-HOST-thp-MODE.db
# (GRID: HISTORY_NAME, by default NAME; --offgrid's names its draw), and once that holds two
# grids or more prints `pipelab compare --repeats` over them (PL: the pipelab binary; the top of
# validate_cpu.sh says more).

# The kernel's transparent huge page mode (always, madvise, never; unknown without the file).
thp_mode() {
    local f=/sys/kernel/mm/transparent_hugepage/enabled
    [ -r "$f" ] && sed 's/.*\[\(.*\)\].*/\1/' "$f" || echo unknown
}

# The host's name as the history's file names hold it.
history_host() {
    local host
    host=$(printf %s "${HOSTNAME:-$(uname -n)}" | tr -c 'A-Za-z0-9._-' '_')
    echo "${host:-host}"
}

# The host probes of every grid measured on this host, "EPOCH GRID PROBE_S" lines
# (validate_broad.sh, host_slowdowns): the host's own speed is read over all of them.
history_probes() { echo "$OUT/history/host-probes-$(history_host).txt"; }

# Prints the number of measured runs tagged NAME in database $1.
history_measured() { "$PL" db export --db "$1" --tag "$NAME" --format json | grep -c '"kind": *"measured"'; }

# Merges DB into its history and prints the repeats once the history holds two grids or more;
# nothing for a build of a modified tree or a DB without runs tagged NAME.
history_repeats() {
    local rev hist grids this
    rev=$("$PL" --version | sed -n 's/^pipelab [^ ]* (\(.*\))$/\1/p')
    case "$rev" in
    "" | unknown | *-dirty)
        echo
        echo "history: none kept for a build of revision '${rev:-?}' (a modified or unknown tree)"
        return 0 ;;
    esac
    # a checkout at the build's commit keys the history by the last commit that changed more than
    # documentation, so that grids of the same code on both sides of a note share it
    local key=$rev head
    head=$(git rev-parse -q --verify HEAD 2>/dev/null)
    if [ -n "$head" ] && [ "$(git rev-parse -q --verify "$rev^{commit}" 2>/dev/null)" = "$head" ]; then
        key=$(git log -1 --format=%h HEAD -- . ':(exclude)docs' ':(exclude)*.md' 2>/dev/null)
        [ -n "$key" ] || key=$rev
    fi
    # and by the host and its huge page mode, which shape the timings as much as the code does
    hist=$OUT/history/${HISTORY_NAME:-$NAME}-$key-$(history_host)-thp-$(thp_mode).db
    mkdir -p "$OUT/history"
    "$PL" db merge "$DB" -o "$hist" >/dev/null 2>&1 || { echo "$0: merging $DB into $hist failed" >&2; exit 1; }
    this=$(history_measured "$DB")
    [ "$this" -gt 0 ] || return 0
    grids=$(($(history_measured "$hist") / this))
    echo
    echo "== history of the code of revision $key on this host, huge pages $(thp_mode) (this build: $rev): $grids grid(s) in $hist"
    [ "$grids" -ge 2 ] || return 0
    "$PL" compare --db "$hist" --tag "$NAME" --repeats | sed -n '/^the same configurations measured again/,$p'
    if [ -n "$("$PL" db list --db "$hist" --tag "$NAME-passlen" --format csv | tail -n +2)" ]; then
        echo "the same with the pass-length term:"
        "$PL" compare --db "$hist" --measured-tag "$NAME" --sim-tag "$NAME-passlen" --repeats | sed -n '/ measured twice or more$/,$p'
    fi
}
