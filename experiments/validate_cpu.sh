#!/usr/bin/env bash
# validate_cpu.sh: simulated against measured on this machine. For two model widths (256, 512;
# 8 dense blocks, microbatch 16) it runs gpipe, 1f1b, zb-h1 and interleaved (v = 2) for real on
# 2 ranks (CPU threads, one core each) with 4 and 8 microbatches (`pipelab run`, whose workers
# profile the block's F, I, W and STEP on their own cores in the gaps between the run's passes,
# and which stores the measured run beside the simulator's prediction from that profile),
# reports each pair's errors, the MAPE and the largest error (`pipelab compare`) and draws
# results/out/figures/accuracy-validate_cpu.png. PROFILE=before profiles just before each run
# instead (`--profile-timing before`), PROFILE=once once per width (`pipelab profile`): the
# earlier methods, kept for comparison (docs/validate_cpu.md).
# Targets of this grid: MAPE of iteration time <= 5%, largest error <= 10%.
# About 2 minutes on an idle 2-core machine (16 runs of 1 + 20 passes, 25 rounds of the profile between them).
#
# Other processes on the cores stretch the measured runs but not the prediction, so the script
# measures what the rest of the machine used (/proc/stat, minus this script's own CPU time):
# before each profile and run it waits (up to QUIET_WAIT seconds in all, default 120) until the
# others use under BUSY_MAX percent of the CPUs (default 10) over QUIET_WINDOW seconds (0.5; the
# script's own work since the last attempt, at least 0.1 s, is that window when the others stayed
# under it meanwhile), and it repeats a profile or run during which they used RUN_BUSY_MAX
# percent or more (default 3: validate_broad.sh's run_contended; up to RETRIES times, default 2).
# A run that stays contended is kept apart, in results/out/validate_cpu.busy.db, and reported
# separately: its error measures the other load, not the model. Nothing is discarded silently.
# Before the grid, `pipelab profile --interruptions INTR_S` (default 20 seconds, both cores) measures
# the host's interruptions, and again for INTR_SAMPLE_S (4) every INTR_EVERY seconds (150) between
# runs; every run's prediction prices the median of the samples before it (`pipelab run
# --interruptions`); the prediction without is stored beside (tag NAME-nointerrupt) and reported
# with the others.
# The host's other guests slow the cores too, and /proc/stat does not show them (its steal time
# stays 0 here); their mark is a run whose passes scatter. Each run's steadiness is the standard
# error of its mean pass (the passes' standard deviation over the square root of their number)
# in percent of its median pass, logged beside the others' share; the summary repeats the
# targets over the pairs whose steadiness is within STEADY_MAX (default 1.5%), beside the
# targets over all quiet pairs, which stay the verdict. With --broad a quiet run that scattered more
# than STEADY_RETRY_OVER (default 2% times the square root of REPEATS) is measured again (with
# STEADY_EXTEND above 1, default 1, it first times more passes itself: `pipelab run --steady`),
# STEADY_RETRIES times at most (default 1; 0 without --broad),
# and the steadiest attempt goes into the verdict; the others are kept apart in
# results/out/validate_cpu.unsteady.db and reported separately, and the summary repeats the
# targets over each configuration's first quiet attempt (validate_cpu.first.db) beside them.
# The other guests can also slow the host for minutes on end, evenly enough that the passes do
# not scatter. Every run times one fixed piece of work before it, the host probe (`pipelab run`:
# the F of one dense block of width 256 on 16 rows, both cores at once, and the same block on one
# core alone; validate_broad.sh, host_slowdowns); the script logs both beside the others' share and keeps the
# first with the host's earlier probes in results/out/history/host-probes-HOST.txt; the summary
# reads each run's probe against the host's own speed (the 10th percentile of all its probes),
# gives both-at-once over alone for the slowed and the unslowed runs, and repeats the targets
# over the runs whose probe was within HOST_SLOW times that (default 1.2): a diagnostic beside
# the verdict.
# Each run also stores its prediction with the reuse-distance and first-touch terms (tag
# validate_cpu-terms; `pipelab run --terms`, off by default) and its prediction with the
# pass-length term (tag validate_cpu-passlen; `pipelab run --pass-length-term`, off by default) and
# its prediction with every F, I, W at the time of a profile round's microbatches after its first
# (tag validate_cpu-rest); the summary then repeats the targets and the per-class errors against
# those predictions, and against each of the reuse-distance and first-touch terms alone (tags
# validate_cpu-reuse, -first), the default without the again term (-noagain, only where a rank
# holds several stages), the default without the version term (-noversions, only where a rank's
# STEPs go into a new weight version: PipeDream), the prediction without the I next to its
# recomputed forward (-nonext, full recomputation), the one with the reuse-distance term and the
# kind before (-before), the one without the jitter and drift terms (-nojitter: one simulated
# run at each action's mean time, whose per-class table is the cost model's pricing of the
# actions, where the default's actions are one random draw each), the one with the jitter
# term alone (-nodrift, where the profile measured a drift), and the one with each rank's STEP at
# the mean over its profile's rounds rather than their median (-stepmean), and the one without the
# states term (-nostates: the drift term's lognormal in place of each profile round's speeds of
# the ranks side by side, which the default draws), and the one without the sharing term
# (-noshare: every action at the profile's time of all ranks at once, where the default takes an
# action alone at the profile's ratio of each worker's F alone to its F beside the others), and the
# one with the states term pricing the backwards at the rounds' own I + W speeds (-bstates, where
# the default gives all compute the rounds' F speeds), and the one with the sharing term per
# class (-classshare: a backward and a forward each at its own ratios alone and beside the other
# class, where the default prices every class at the forwards' one ratio: "The sharing term per
# class").
# With TRACE=1 (the default) every run stores its measured and its predicted timeline, and
# `pipelab compare --actions` writes the per-rank breakdown (compute by kind, SEND/RECV and
# waiting, span; predicted against measured) to results/out/validate_cpu.actions.txt (beside
# the database), whose summary (the busiest rank's compute error beside the iteration error)
# is printed at the end.
# --broad: instead of that grid, 70 configurations on 2 ranks (experiments/validate_broad.sh
# lists them): all ten schedule kinds, recomputation on and off, both blocks (the dense block
# at widths 128 to 1024, depths 4 to 12, microbatches of 8 to 32 rows; the transformer block at
# widths 128 to 512, sequences of 32 to 128 tokens, 1 to 4 per microbatch), m from 2 to 16
# (p to 8p); each measured REPEATS times (default 2), the grid round after round, each run with
# at least 5 timed passes (and 0.25 s) and 30 profile repetitions (the grid's 10, 0.5 s and 60,
# shared among the repeats); about 15 minutes on an idle 2-core machine. Its targets:
# iteration-time MAPE <= 2%, largest error <= 5%, bubble fraction within 1.5 points on average,
# peak memory within 2%; the summary prints each with the signed mean error, over each run
# alone and, with REPEATS 2 or more, over the configurations' mean errors (`pipelab compare
# --repeats`), on which iteration time is judged: the spread from run to run is the host's state,
# which more passes or profile samples within one run do not narrow and separate runs average
# out (docs/validate_cpu.md, "Repeats").
# --broad also keeps a history: the verdict's runs of each grid it measured go into the history
# database of the code and machine that made them, results/out/history/validate_cpu-REV-HOST-thp-MODE.db
# (REV: the build's git revision, `pipelab --version`, or in a checkout at that commit the last
# commit that changed more than documentation; none is kept for a modified tree; HOST: the host
# name; MODE: the kernel's transparent huge page mode), and once that holds two
# grids or more the summary ends with `pipelab compare --repeats` over them, against the default
# prediction and the one with the pass-length term: each configuration's mean error and its
# run-to-run spread, which tell the model's bias from this host's noise (docs/validate_cpu.md,
# "Five grids").
# --offgrid: the broad grid's settings and targets over OFFGRID_N configurations (default 30)
# drawn at random, with seed OFFGRID_SEED (default 1), from a wider space than the broad grid's
# (validate_broad.sh, offgrid_points: widths, depths, sequence lengths, microbatch sizes, inner
# sizes, heads, chunks and m that no broad point takes, unequal stages), into
# results/out/validate_offgrid.db under the tag validate_offgrid: a check that the model holds
# where it was not tuned. One seed gives the same configurations on any machine. Its history, as
# --broad's, is kept per draw: results/out/history/validate_offgrid-seedS-nN-REV-HOST-thp-MODE.db.
# --mpi (with the default grid, --broad or --offgrid): the ranks are 2 MPI processes, one core
# each (`mpirun -np 2 pipelab run --transport mpi`: the profile between the passes in each
# process, the hand-off and the host probe of MPI's), into their own database, tag, figure and
# history (NAME_mpi: validate_cpu_mpi, validate_offgrid_mpi). The targets are the grid's.
# Environment: KINDS ("gpipe 1f1b zb-h1 interleaved"), WIDTHS ("256 512"), MICROBATCHES ("4 8"),
# REPEATS (runs of each configuration: 1; 2 with --broad), TIMED (timed iterations at least, 20; 10
# with --broad; divided by REPEATS; more for short iterations: MIN_TIMED_S, 0.5 divided by
# REPEATS, TIMED_MAX and RATE_GFLOPS; passes of several iterations, pipedream's and 2bw's, at
# least TIMED_PASSES_MIN, 3: validate_broad.sh), TRACE (1), DEPTH (8),
# PROFILE (between | before | once), PREPS (profile repetitions, 100; 60 with --broad; divided by REPEATS), PCONC (before and once:
# profile threads at once, 2: the ranks; 1 profiles one thread alone), QUIET_WAIT, QUIET_WINDOW, BUSY_MAX, RUN_BUSY_MAX, RETRIES, STEADY_MAX, STEADY_RETRY_OVER, STEADY_EXTEND, STEADY_RETRIES, HOST_SLOW. Flags: --shard I/N, --plot-only, --db FILE (experiments/lib.sh);
# shards must run on identical machines for their runs to be comparable.
# The whole script is one block, which bash reads to its end before it runs any of it: a grid
# runs for minutes, and an edit of this file meanwhile (a `git pull`) would otherwise change the
# lines it has still to read.
{
NAME=validate_cpu
BROAD=0
OFFGRID=0
MPI=0
ARGS=()
for a in "$@"; do
    case "$a" in --broad) BROAD=1 ;; --offgrid) OFFGRID=1 ;; --mpi) MPI=1 ;; *) ARGS+=("$a") ;; esac
done
if [ "$BROAD$OFFGRID" = 11 ]; then echo "$0: --broad and --offgrid are two grids: give one" >&2; exit 2; fi
# --offgrid: the broad grid's settings and targets over configurations of its own, in a database,
# a tag and a figure of their own
if [ "$OFFGRID" = 1 ]; then NAME=validate_offgrid; BROAD=1; fi
# --mpi: the same grid with the ranks as MPI processes, in a database, a tag and a figure of their own
LAUNCH=()
TRANSPORT_ARG=
if [ "$MPI" = 1 ]; then
    command -v mpirun >/dev/null || { echo "$0: --mpi needs mpirun (openmpi-bin)" >&2; exit 2; }
    NAME=${NAME}_mpi
    LAUNCH=(mpirun -np 2)
    TRANSPORT_ARG="--transport mpi"
    # as root, Open MPI needs leave
    if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
fi
# `source` without arguments keeps this script's own, --broad included: set them first
set -- ${ARGS[@]+"${ARGS[@]}"}
source "$(dirname "$0")/lib.sh" "$@"
# REPEATS: runs of each configuration, the grid measured round after round (2 with --broad and
# --offgrid, else 1); the measuring of one run (its least timed passes TIMED and seconds
# MIN_TIMED_S, its profile repetitions PREPS) is the grid's divided among them
REPEATS=${REPEATS:-$([ "$BROAD" = 1 ] && echo 2 || echo 1)}
[[ $REPEATS =~ ^[1-9]$ ]] || usage_error "REPEATS wants a whole number from 1 to 9, got '$REPEATS'"
# shares a grid's measuring $1 among the repeats: $1 / REPEATS, rounded up for whole numbers
per_repeat() { awk -v x="$1" -v r="$REPEATS" 'BEGIN { y = x / r; if (x == int(x)) y = int((x + r - 1) / r); print y }'; }
MIN_TIMED_S=${MIN_TIMED_S:-$(per_repeat 0.5)}
source experiments/validate_broad.sh
KINDS=${KINDS:-gpipe 1f1b zb-h1 interleaved}
TRACE=${TRACE:-1}
WIDTHS=${WIDTHS:-256 512}
MICROBATCHES=${MICROBATCHES:-4 8}
TIMED=${TIMED:-$(per_repeat "$([ "$BROAD" = 1 ] && echo 10 || echo 20)")}
DEPTH=${DEPTH:-8}
PROFILE=${PROFILE:-between}
PREPS=${PREPS:-$(per_repeat "$([ "$BROAD" = 1 ] && echo 60 || echo 100)")}
PCONC=${PCONC:-2}
QUIET_WAIT=${QUIET_WAIT:-120}
QUIET_WINDOW=${QUIET_WINDOW:-0.5}
BUSY_MAX=${BUSY_MAX:-10}
RETRIES=${RETRIES:-2}
STEADY_MAX=${STEADY_MAX:-1.5}
# a run whose host probe took more than this times the host's own speed ran on a slowed host
HOST_SLOW=${HOST_SLOW:-1.2}
# a quiet run is measured again when it scattered more than this (with 1.5%, 24 of one grid's 70
# configurations were, and the grid took 15 min 44 s); 2% for a run of a grid's whole measuring,
# times the square root of REPEATS for one of its shares: the same scatter of the passes gives
# a standard error that much larger over the run's fewer passes (with 2% on REPEATS 2, 25 of a
# grid's 140 runs were measured again, 12 of them between 2% and 2.83%)
STEADY_RETRY_OVER=${STEADY_RETRY_OVER:-$(awk -v r="$REPEATS" 'BEGIN { printf "%.2f", 2 * sqrt(r) }')}
STEADY_RETRIES=${STEADY_RETRIES:-$([ "$BROAD" = 1 ] && echo 1 || echo 0)}
# STEADY_EXTEND above 1: a run first times more passes itself while it scatters more than
# STEADY_RETRY_OVER, up to STEADY_EXTEND times its least (`pipelab run --steady`, the added gaps
# with the profile's rounds), and only a run still scattered then is measured again. Default 1:
# none. In three grids (docs/validate_cpu.md, "Timing until steady") it saved no time that the
# host's drift did not hide, and the runs it kept were predicted worse than the steadier attempts
# a retry keeps (3.72% against 2.67% MAPE, signed -3.41% against -1.89%, in one grid)
STEADY_EXTEND=${STEADY_EXTEND:-1}
[[ $STEADY_EXTEND =~ ^[1-9]$ ]] || usage_error "STEADY_EXTEND wants a whole number from 1 to 9, got '$STEADY_EXTEND'"
RUN_CSV=${DB%.db}.run.csv
STEADY=${DB%.db}.steadiness
BUSY_DB=${DB%.db}.busy.db
UNSTEADY_DB=${DB%.db}.unsteady.db
FIRST_DB=${DB%.db}.first.db
TRY_DB=${DB%.db}.try.db
LOG=${DB%.db}.contention
PROBES=${DB%.db}.probes
source experiments/cpu_share.sh
source experiments/validate_history.sh
declare -A SEEN
if [ "$PLOT_ONLY" = 0 ]; then rm -f "$BUSY_DB" "$UNSTEADY_DB" "$FIRST_DB" "$LOG" "$STEADY" "$PROBES"; fi
WAITED=0
# Waits, within the QUIET_WAIT budget (seconds), until the others use under BUSY_MAX percent
# for QUIET_WINDOW seconds. The window only keeps a run from starting into load: the run's own
# share decides whether it is repeated (quiet_try), so half a second (100 jiffies on 2 cores)
# is enough, and the grid's 90-odd attempts do not idle a second each.
wait_quiet() {
    while awk -v w="$WAITED" -v max="$QUIET_WAIT" 'BEGIN { exit !(w < max) }'; do
        measure_others sleep "$QUIET_WINDOW"
        [ "$OTHERS" -ge "$BUSY_MAX" ] || return 0
        WAITED=$(awk -v w="$WAITED" -v d="$QUIET_WINDOW" 'BEGIN { print w + d }')
    done
}
# The quiet window before an attempt: the time since the last command quiet_try or wait_quiet
# ran ended (the script's own work between two attempts, which its shell's and children's CPU
# time leaves out), at least QUIET_SPAN_S seconds (0.1; topped up with a sleep). When the others
# used BUSY_MAX% or more of it (right after a run they often do, for a moment), a fresh
# window of QUIET_SPAN_S, up to 10 of them. Returns 0 on a quiet window; 1 after ten busy ones,
# or before any command (wait_quiet then).
quiet_since() {
    [ -n "${MARK_T:-}" ] || return 1
    local n
    for ((n = 0; n < 10; n++)); do
        others_since
        if [ "$SPAN" -ge "$QUIET_SPAN" ]; then
            [ "$OTHERS" -ge "$BUSY_MAX" ] || return 0
            others_mark
            WAITED=$(awk -v w="$WAITED" -v d="$QUIET_SPAN_S" 'BEGIN { print w + d }')
        fi
        sleep "$QUIET_SPAN_S"
    done
    return 1
}
QUIET_SPAN_S=0.1
QUIET_SPAN=$(awk -v s="$QUIET_SPAN_S" -v hz="$HZ" -v n="$(getconf _NPROCESSORS_ONLN)" 'BEGIN { printf "%d\n", s * hz * n }')
# Runs "$@" on a quiet machine (quiet_since, else after waiting for one), again while the others
# took RUN_BUSY_MAX% or more (run_contended; RETRIES times at most); sets OTHERS for the last.
# BEFORE, when set, is run before each attempt.
quiet_try() {
    local a
    for ((a = 0; a <= RETRIES; a++)); do
        [ -z "${BEFORE:-}" ] || $BEFORE
        quiet_since || wait_quiet
        measure_others "$@" || return 1
        run_contended "$OTHERS" || return 0
        [ "$a" = "$RETRIES" ] || echo "  (other processes took ${OTHERS}% of the CPUs during: ${*:1:4} ...; again)" >&2
    done
}
# Attempt $1's database (one per attempt of a configuration); clear_try empties the current one.
try_db() { echo "${TRY_DB%.db}$1.db"; }
clear_try() { rm -f "$TRY_A" "$TRY_A-wal" "$TRY_A-shm"; }
# Sets PROBE_S and PROBE_ALONE_S to the host probe the run of CSV $1 took before it (validate_broad.sh,
# host_slowdowns; `pipelab run`'s host_probe_s and host_probe_alone_s: the F of one dense block on
# both cores at once, and on one core alone); empty without one.
run_probe() {
    read -r PROBE_S PROBE_ALONE_S <<< "$(last_run_row "$1" host_probe_s host_probe_alone_s 2>/dev/null)"
}
# Prints columns $2... of the run CSV $1, space-separated, from the first row of its last run: the
# file holds every attempt quiet_try made, each from its header.
last_run_row() {
    local f=$1
    shift
    awk -F, -v cols="$*" '$1 == "kind" { for (i = 1; i <= NF; i++) c[$i] = i; row = 0; next }
        !row { n = split(cols, k, " "); v = ""; for (j = 1; j <= n; j++) v = v (j > 1 ? " " : "") $c[k[j]]; row = 1 }
        END { print v }' "$f"
}
# Merges attempt $1's database into $2.
merge_try() {
    "$PL" db merge "$(try_db "$1")" -o "$2" >/dev/null 2>&1 || { echo "$0: merging $(try_db "$1") into $2 failed" >&2; exit 1; }
}
# Moves attempt $1 into database $2, logging line $3.
keep_try() {
    echo "$3 -> $(basename "$2")" >> "$LOG"
    merge_try "$1" "$2"
    TRY_A=$(try_db "$1") clear_try
}
# Prints the steadiness (the standard error of the mean pass, in percent of the median pass) and
# the timed passes of the last run whose `pipelab run --format csv` is file $1.
steadiness() {
    last_run_row "$1" steadiness timed_passes | awk '{ printf "%.2f %d\n", 100 * $1, $2 }'
}
# Prints the broad grid's targets over the pairs of `pipelab compare "$@"`, and with REPEATS > 1
# over the configurations' mean errors (compare --repeats), on which iteration time is judged.
grid_targets() {
    "$PL" compare "$@" --format csv | broad_targets
    [ "$REPEATS" -gt 1 ] || return 0
    "$PL" compare "$@" --repeats | sed -n '/ measured twice or more$/,$p'
    "$PL" compare "$@" --repeats --format csv | repeat_means | broad_targets "configurations' means"
}

# The configurations, one a line: "KIND M RECOMPUTE MODEL-SPEC [CHUNKS]" (validate_broad.sh).
if [ "$OFFGRID" = 1 ]; then
    OFFGRID_N=${OFFGRID_N:-30}
    OFFGRID_SEED=${OFFGRID_SEED:-1}
    [[ $OFFGRID_N =~ ^[0-9]{1,4}$ ]] && [ "$OFFGRID_N" -ge 1 ] || usage_error "OFFGRID_N wants a whole number from 1 to 9999, got '$OFFGRID_N'"
    [[ $OFFGRID_SEED =~ ^[0-9]{1,9}$ ]] || usage_error "OFFGRID_SEED wants a whole number from 0 to 999999999, got '$OFFGRID_SEED'"
    OFFGRID_N=$((10#$OFFGRID_N)) OFFGRID_SEED=$((10#$OFFGRID_SEED)) # one draw, one name: 08 is 8
    POINTS=$(offgrid_points "$OFFGRID_N" "$OFFGRID_SEED")
    HISTORY_NAME=$NAME-seed$OFFGRID_SEED-n$OFFGRID_N
    echo "off the broad grid: $OFFGRID_N configurations drawn with seed $OFFGRID_SEED (OFFGRID_N, OFFGRID_SEED)"
elif [ "$BROAD" = 1 ]; then POINTS=$(broad_points); else
    POINTS=$(for h in $WIDTHS; do for m in $MICROBATCHES; do for kind in $KINDS; do
        echo "$kind $m none mlp:width=$h,depth=$DEPTH,microbatch=16"; done; done; done)
fi
# The host's interruptions, sampled before the grid and between its runs, each run priced at the
# median of the samples before it (interruptions.sh; docs/validate_cpu.md, "What the tail is
# made of", "Interruptions sampled across the grid")
source experiments/interruptions.sh
[ "$PLOT_ONLY" = 1 ] || intr_sample "$INTR_S"
t0=$(date +%s)
# the grid once a round, REPEATS rounds: a configuration's runs minutes apart, in different states
# of the host
NPOINTS=$(grep -c . <<< "$POINTS")
N=0
while read -r kind m recompute spec chunks; do
    if [ "$REPEATS" -gt 1 ] && [ $((N % NPOINTS)) = 0 ] && [ "$PLOT_ONLY" = 0 ]; then
        echo "round $((N / NPOINTS + 1)) of $REPEATS: every configuration once ($(date +%T))"
    fi
    N=$((N + 1))
    PROF=$OUT/$NAME.profile-$(echo "$spec" | tr ':,=' '_+-').csv
    # PROFILE=once: measured once per model and invocation, before the first run of that model
    # on this shard, and read by all of them.
    [ "$PLOT_ONLY" = 1 ] || [ -n "${SEEN[$PROF]:-}" ] || rm -f "$PROF"
    SEEN[$PROF]=1
    extra="--recompute $recompute"
    [ "$TRACE" = 0 ] || extra="$extra --trace"
    case "$kind" in interleaved|looped-bfs) extra="$extra --chunks ${chunks:-2}" ;; esac
    run_one() {
        # this shard's runs alone take fresh samples and their price (point: PLOT_ONLY runs none)
        if intr_due; then intr_sample "$INTR_SAMPLE_S"; fi
        [ -z "$INTR" ] || extra="$extra --interruptions $INTR"
        if [ "$PROFILE" = once ]; then
            if [ ! -f "$PROF" ]; then
                quiet_try "$PL" profile --model "$spec" --reps "$PREPS" --concurrency "$PCONC" -o "$PROF" >/dev/null || exit 1
                echo "profile $spec (F I W of block 1, s): $(grep -v '^#' "$PROF" | sed -n 3p | cut -d, -f3-5 | tr , ' ') (others ${OTHERS}%)"
            fi
            PROFILE_ARG="--profile $PROF"
        elif [ "$PROFILE" = before ]; then
            PROFILE_ARG="--profile-timing before --profile-reps $PREPS --profile-concurrency $PCONC" # by the run itself, just before it
        else
            PROFILE_ARG="--profile-timing between --profile-reps $PREPS" # by the run's workers, between its passes
        fi
        local passes se timed uid a best=-1 best_se= into steady=
        local -a try_se=() try_uid=() try_oth=() try_probe=() try_alone=() try_timed=()
        passes=$(point_timed "$kind" "$m" "$recompute" "$spec")
        [ "$STEADY_EXTEND" = 1 ] || steady="--steady $STEADY_RETRY_OVER --timed-max $((passes * STEADY_EXTEND))"
        # attempt a into its own database (TRY_DB, a); a quiet run that scattered more than
        # STEADY_RETRY_OVER is measured again, STEADY_RETRIES times at most, and the steadiest is kept
        for ((a = 0; a <= STEADY_RETRIES; a++)); do
            TRY_A=$(try_db "$a")
            # shellcheck disable=SC2086
            BEFORE=clear_try quiet_try ${LAUNCH[@]+"${LAUNCH[@]}"} "$PL" run $TRANSPORT_ARG --kind "$kind" --ranks 2 \
                --microbatches "$m" $extra --model "$spec" --timed "$passes" $steady $PROFILE_ARG --tag "$NAME" \
                --db "$TRY_A" --format csv </dev/null >"$RUN_CSV" || exit 1
            read -r se timed <<< "$(steadiness "$RUN_CSV")"
            run_probe "$RUN_CSV"
            uid=$("$PL" db list --db "$TRY_A" --format csv | awk -F, 'NR > 1 && $4 == "measured" { print $2 }')
            try_se[a]=$se
            try_uid[a]=$uid
            try_oth[a]=$OTHERS
            try_probe[a]=${PROBE_S:-?}
            try_alone[a]=${PROBE_ALONE_S:-?}
            try_timed[a]=$timed
            if run_contended "$OTHERS"; then
                keep_try "$a" "$BUSY_DB" "$kind m=$m${chunks:+ chunks=$chunks} recompute=$recompute $spec others=${OTHERS}% steadiness=${se}% passes=$timed probe=${try_probe[a]}s alone=${try_alone[a]}s"
                try_se[a]=
                continue
            fi
            [ "$a" != 0 ] || [ "$STEADY_RETRIES" = 0 ] || merge_try "$a" "$FIRST_DB"
            if [ "$best" -lt 0 ] || awk -v x="$se" -v y="$best_se" 'BEGIN { exit !(x < y) }'; then best=$a; best_se=$se; fi
            if awk -v x="$se" -v max="$STEADY_RETRY_OVER" 'BEGIN { exit !(x <= max) }'; then break; fi
            [ "$a" = "$STEADY_RETRIES" ] || echo "  (${kind} m=$m $spec scattered: steadiness ${se}% over ${STEADY_RETRY_OVER}% after $timed passes; again)" >&2
        done
        for ((a = 0; a < ${#try_uid[@]}; a++)); do
            [ -n "${try_se[a]}" ] || continue
            into=$UNSTEADY_DB
            if [ "$a" = "$best" ]; then
                into=$DB
                echo "${try_uid[a]} ${try_se[a]}" >> "$STEADY"
                [ "${try_probe[a]}" = "?" ] || echo "${try_uid[a]} ${try_probe[a]} ${try_alone[a]}" >> "$PROBES"
            fi
            keep_try "$a" "$into" "$kind m=$m${chunks:+ chunks=$chunks} recompute=$recompute $spec others=${try_oth[a]}% steadiness=${try_se[a]}% passes=${try_timed[a]} probe=${try_probe[a]}s alone=${try_alone[a]}s"
        done
    }
    point run_one
done <<< "$(for ((r = 0; r < REPEATS; r++)); do echo "$POINTS"; done)"
intr_summary
if [ "$PLOT_ONLY" = 0 ]; then
    echo "runs took $(($(date +%s) - t0)) s (${WAITED} s waiting for a quiet machine)"
    # the executor asks for huge pages (exec_lines_alloc); whether the kernel grants them shapes
    # the timings (docs/validate_cpu.md, "Huge pages")
    echo "transparent huge pages: $(thp_mode) (the runs ask for them)"
    echo "CPU share of other processes during each run (>= ${RUN_BUSY_MAX}% kept apart in $(basename "$BUSY_DB")), its steadiness (standard error of the mean pass) and the host probe before it:"
    sed 's/^/  /' "$LOG"
    # the host's probes join those of its earlier grids, over which its own speed is read
    if [ -s "$PROBES" ]; then
        mkdir -p "$OUT/history"
        awk -v t="$(date +%s)" -v g="$NAME" '{ print t, g, $2 }' "$PROBES" >> "$(history_probes)"
    fi
fi
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
echo
if [ -f "$DB" ]; then
    echo "== predicted against measured, quiet machine ($DB)"
    "$PL" compare --db "$DB" --tag "$NAME"
    echo
    [ "$REPEATS" = 1 ] || echo "each configuration ran $REPEATS times, a round of the grid apart: the targets over each run alone, then iteration time's verdict over the configurations' mean errors, which average out this host's state from run to run (docs/validate_cpu.md, \"Repeats\")"
    grid_targets --db "$DB" --tag "$NAME"
    if [ -f "$STEADY" ]; then
        echo
        echo "the same over the steady pairs only (steadiness within ${STEADY_MAX}%; $(awk -v max="$STEADY_MAX" '$2 > max' "$STEADY" | wc -l) of $(wc -l < "$STEADY") runs scattered more): a diagnostic, not the verdict"
        "$PL" compare --db "$DB" --tag "$NAME" --format csv | pairs_within "$STEADY" "$STEADY_MAX" | broad_targets
    fi
    if [ -s "$PROBES" ] && [ -s "$(history_probes)" ]; then
        SLOWDOWNS=${DB%.db}.slowdowns
        host_slowdowns "$(history_probes)" < "$PROBES" > "$SLOWDOWNS"
        echo
        echo "host speed: the probe before each run (pipelab run's host probe: F of one dense block of width 256 on 16 rows, both cores at once) over the host's own, the 10th percentile of its $(wc -l < "$(history_probes)") probes in $(history_probes):"
        awk '{ print $2 }' "$SLOWDOWNS" | sort -g | awk -v max="$HOST_SLOW" '{ v[NR] = $1; n += $1 > max }
            END { printf "  fastest %.2fx, median %.2fx, slowest %.2fx; %d of %d runs more than %sx slower\n", v[1], v[int((NR + 1) / 2)], v[NR], n, NR, max }'
        # both cores at once against one alone: how much the slowed host slows the profile's
        # lockstep; the passes' own actions showed no such slowing (compare --overlap;
        # docs/validate_cpu.md, "The gap's opening round")
        awk 'FNR == NR { s[$1] = $2; next } ($1 in s) && $3 + 0 > 0 { r = $2 / $3; k = s[$1] > max ? "slowed" : "unslowed"; n[k]++; m[k] += log(r) }
            END { for (k in n) printf "  %s runs: both cores at once %.2fx one alone (geometric mean over %d)\n", k, exp(m[k] / n[k]), n[k] }' \
            max="$HOST_SLOW" "$SLOWDOWNS" "$PROBES" | sort -r
        echo "the same over the runs on an unslowed host (probe within ${HOST_SLOW}x of the host's own speed): a diagnostic, not the verdict"
        "$PL" compare --db "$DB" --tag "$NAME" --format csv | pairs_within "$SLOWDOWNS" "$HOST_SLOW" | broad_targets
    fi
    if [ -f "$FIRST_DB" ]; then
        echo
        echo "the same over each configuration's first quiet attempt, before the steadiness retries ($(basename "$FIRST_DB")): a diagnostic, not the verdict"
        grid_targets --db "$FIRST_DB" --tag "$NAME"
    fi
    if [ "$TRACE" != 0 ]; then
        "$PL" compare --db "$DB" --tag "$NAME" --actions -o "${DB%.db}.actions.txt"
        echo
        # the per-class tables, then the per-model table's ends: its most under-predicted compute
        # first and most over-predicted last (a broad grid has one row per model, about 50)
        sed -n '/^the busiest rank/,$p' "${DB%.db}.actions.txt" | awk -v head=6 -v tail=3 '
            !m { print; if (/^per model/) m = 1; next }
            m == 1 { print; m = 2; next }  # the column names
            { row[++n] = $0 }
            END {
                for (i = 1; i <= n; i++)
                    if (i <= head || i > n - tail) print row[i]
                    else if (i == head + 1) printf "... %d more models (the file has every row)\n", n - head - tail
            }'
        echo "per-rank breakdown: ${DB%.db}.actions.txt"
        # whether the ranks slowed each other down by sharing the machine (the premise of a
        # bandwidth-sharing term, docs/validate_cpu.md "Compute alone and beside")
        "$PL" compare --db "$DB" --tag "$NAME" --overlap | sed -n '/^compute alone/,$p'
        # each class's typical action against its tail (docs/validate_cpu.md, "Typical and
        # tail"), priced at each action's mean time where the runs stored that prediction beside
        TAIL_SIM="$NAME"
        [ -z "$("$PL" db list --db "$DB" --tag "$NAME-nojitter" --format csv | tail -n +2)" ] || TAIL_SIM="$NAME-nojitter"
        "$PL" compare --db "$DB" --measured-tag "$NAME" --sim-tag "$TAIL_SIM" --tail | sed -n '/^each class/,$p'
        # each backward against its reuse distance (docs/validate_cpu.md, "Reuse distance in the
        # runs"), at each action's mean time, then with the reuse-distance term where stored
        "$PL" compare --db "$DB" --measured-tag "$NAME" --sim-tag "$TAIL_SIM" --distance | sed -n '/^each backward/,$p'
        if [ -n "$("$PL" db list --db "$DB" --tag "$NAME-reuse" --format csv | tail -n +2)" ]; then
            echo "with the reuse-distance term (tag $NAME-reuse):"
            "$PL" compare --db "$DB" --measured-tag "$NAME" --sim-tag "$NAME-reuse" --distance | sed -n '/^CLASS/,$p'
        fi
    fi
    # the same measured runs against the other predictions each run stores beside its own: with
    # the reuse-distance, first-touch and again terms, and with the pass-length term; all from
    # one invocation
    other_prediction() { # SUFFIX DESCRIPTION
        [ -n "$("$PL" db list --db "$DB" --tag "$NAME$1" --format csv | tail -n +2)" ] || return 0
        echo
        echo "== $2 (tag $NAME$1), the same measured runs"
        grid_targets --db "$DB" --measured-tag "$NAME" --sim-tag "$NAME$1"
        if [ "$TRACE" != 0 ]; then
            "$PL" compare --db "$DB" --measured-tag "$NAME" --sim-tag "$NAME$1" --actions -o "${DB%.db}$1.actions.txt"
            sed -n '/^per class over all pairs/,/^$/p' "${DB%.db}$1.actions.txt" # the per-class table; the per-model one stays in the file
        fi
    }
    other_prediction -terms "with the reuse-distance and first-touch terms (pipelab run --terms)"
    other_prediction -passlen "with the pass-length term (pipelab run --pass-length-term)"
    other_prediction -rest "with every F, I, W at a profile round's time after its first microbatch"
    # and each of --terms' two alone, and the default without the again term: which one moves
    # which configurations
    other_prediction -reuse "with the reuse-distance term alone"
    other_prediction -first "with the first-touch term alone"
    other_prediction -noagain "without the again term (only the runs whose ranks hold several stages)"
    other_prediction -noversions "without the version term (only the runs with a rank whose STEPs go into a new weight version)"
    other_prediction -nonext "without the I next to its recomputed forward (only the runs under full recomputation)"
    other_prediction -before "with the reuse-distance term and the kind before (an I after an F of its stage, an F after its backwards)"
    other_prediction -nojitter "without the jitter and drift terms (one simulated run at each action's mean time: its per-class table prices the actions, where the default's are random draws)"
    other_prediction -nointerrupt "without the interruption term (pipelab run --interruptions, the median of the samples before each run)"
    other_prediction -stepmean "with each rank's STEP at the mean over its profile's rounds, the host's stalls left out (rather than their median)"
    other_prediction -nostates "without the states term (the drift term's lognormal draw in its place, as before the states term)"
    other_prediction -nodrift "with the jitter term alone (only the runs whose profile measured a drift between the ranks)"
    other_prediction -noshare "without the sharing term (pipelab run --no-sharing-term: every action at the profile's time of all workers at once)"
    other_prediction -share "with the sharing term (over MPI, where it is not the default: pipelab run --sharing-term)"
    other_prediction -bstates "with the states term per class (the backwards at each round's own I + W speeds, where the default gives all compute its F speeds)"
    other_prediction -classshare "with the sharing term per class (pipelab run --sharing-per-class: a backward and a forward each at its own ratios alone and beside the other class)"
    "$PL" plot accuracy --db "$DB" --tag "$NAME" -o "$FIG/accuracy-$NAME.png" \
        --title "Predicted against measured iteration time, 2 CPU ranks, $(nproc) cores" >/dev/null
    echo "figure: $FIG/accuracy-$NAME.png"
fi
if [ -f "$UNSTEADY_DB" ]; then
    echo
    echo "== quiet runs that scattered more than ${STEADY_RETRY_OVER}% and were measured again ($UNSTEADY_DB): a steadier attempt of each is in the verdict"
    "$PL" compare --db "$UNSTEADY_DB" --tag "$NAME"
fi
if [ -f "$BUSY_DB" ]; then
    echo
    echo "== runs measured while other processes used >= ${RUN_BUSY_MAX}% of the CPUs ($BUSY_DB): not the model's error"
    "$PL" compare --db "$BUSY_DB" --tag "$NAME"
    if [ "$TRACE" != 0 ]; then
        "$PL" compare --db "$BUSY_DB" --tag "$NAME" --actions -o "${BUSY_DB%.db}.actions.txt"
        echo
        sed -n '/^the busiest rank/,$p' "${BUSY_DB%.db}.actions.txt"
    fi
fi
if [ "$BROAD" = 1 ] && [ "$PLOT_ONLY" = 0 ] && [ -f "$DB" ]; then history_repeats; fi
exit
}
