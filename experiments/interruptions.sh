# interruptions.sh: the host's interruptions sampled across a grid, sourced by validate_cpu.sh (and
# by test_exec) in bash; it needs PL, DB, quiet_try and run_contended, and sets INTR to
# SHARE,RATE,SHORT_SHARE,SHORT_RATE for `pipelab run --interruptions` (the gaps over 0.1 ms, then
# the short ones over 1 us: "Short gaps").
#
# The host's interruptions are measured on both cores and priced by every prediction; the one
# without is stored beside under tag NAME-nointerrupt (docs/validate_cpu.md, "What the tail is
# made of"). One sample of INTR_S seconds (default 20) before the grid, then one of INTR_SAMPLE_S
# (default 4) before the next run whenever INTR_EVERY seconds (default 150) have passed since the
# last; each run's prediction prices the median share and the median rate of each band over the
# samples taken before it, so one sample in an unusual state of the host does not price a whole grid
# ("Interruptions sampled across the grid"). A sample between runs waits INTR_SETTLE_S first
# (default 2): for a second or two after a run ends, the host's gaps read twice their usual share.
# A sample during which other processes used the CPUs (quiet_try's test) is logged and left out;
# the first is kept while it is the only one, and dropped when a clean one comes.
INTR_S=${INTR_S:-20}
INTR_SAMPLE_S=${INTR_SAMPLE_S:-4}
INTR_EVERY=${INTR_EVERY:-150}
INTR_SETTLE_S=${INTR_SETTLE_S:-2}
for v in INTR_EVERY INTR_SETTLE_S; do
    [[ ${!v} =~ ^[0-9]{1,6}$ ]] || { echo "$0: $v wants a whole number of seconds, got '${!v}'" >&2; exit 2; }
done
INTR=""
INTR_SHARES=()
INTR_RATES=()
INTR_SHORT_SHARES=()
INTR_SHORT_RATES=()
INTR_T=0
INTR_FIRST_BUSY=0
INTR_OUT=${DB%.db}.interruptions
# Prints the median of its numeric arguments (the mean of the middle two for an even count).
median_of() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
intr_measure() { "$PL" profile --interruptions "$1" --concurrency 2 > "$INTR_OUT"; }
# Takes one sample of $1 seconds (after INTR_SETTLE_S when samples came before) and sets INTR to
# the medians over the samples so far.
intr_sample() {
    [ "${#INTR_SHARES[@]}" = 0 ] || sleep "$INTR_SETTLE_S"
    quiet_try intr_measure "$1" || exit 1
    INTR_T=$(date +%s)
    local line share rate short short_share short_rate
    line=$(grep '^interruptions ' "$INTR_OUT" || true)
    short=$(grep '^short gaps ' "$INTR_OUT" || true)
    read -r share rate <<< "$(sed -n 's/.*share \([0-9.e+-]*\) .*, \([0-9.]*\) a second.*/\1 \2/p' <<< "$line")"
    read -r short_share short_rate <<< "$(sed -n 's/.*share \([0-9.e+-]*\) .*, \([0-9.]*\) a second.*/\1 \2/p' <<< "$short")"
    if [ -z "$rate" ] || [ -z "$short_rate" ]; then
        echo "validate_cpu.sh: cannot read the interruptions from: $(cat "$INTR_OUT")" >&2
        exit 1
    fi
    if run_contended "$OTHERS"; then
        if [ "${#INTR_SHARES[@]}" -gt 0 ]; then
            echo "interruptions sample left out: other processes took ${OTHERS}% of the CPUs during it: $line; $short"
            return 0
        fi
        echo "interruptions: other processes took ${OTHERS}% of the CPUs during the first sample; kept until a clean one comes"
        INTR_FIRST_BUSY=1
    elif [ "$INTR_FIRST_BUSY" = 1 ]; then
        echo "interruptions: the first sample, taken while other processes used the CPUs, dropped"
        INTR_SHARES=()
        INTR_RATES=()
        INTR_SHORT_SHARES=()
        INTR_SHORT_RATES=()
        INTR_FIRST_BUSY=0
    fi
    INTR_SHARES+=("$share")
    INTR_RATES+=("$rate")
    INTR_SHORT_SHARES+=("$short_share")
    INTR_SHORT_RATES+=("$short_rate")
    INTR=$(median_of "${INTR_SHARES[@]}"),$(median_of "${INTR_RATES[@]}"),$(median_of "${INTR_SHORT_SHARES[@]}"),$(median_of "${INTR_SHORT_RATES[@]}")
    echo "$line"
    echo "$short"
    [ "${#INTR_SHARES[@]}" = 1 ] || echo "interruptions: the median of ${#INTR_SHARES[@]} samples, $(intr_priced), prices the runs from here"
}
# Prints what INTR prices: the share and rate of each band.
intr_priced() {
    local v
    IFS=, read -r -a v <<< "$INTR"
    echo "share ${v[0]}, ${v[1]} a second; short gaps ${v[2]}, ${v[3]} a second"
}
# Succeeds when the next run wants a fresh sample: INTR_EVERY seconds since the last.
intr_due() { [ $(($(date +%s) - INTR_T)) -ge "$INTR_EVERY" ]; }
# Prints how many samples were taken, their range and what the last runs were priced at.
intr_summary() {
    local n=${#INTR_SHARES[@]}
    [ "$n" = 0 ] || echo "interruptions: $n sample$([ "$n" = 1 ] || echo s), share $(pct_range "${INTR_SHARES[@]}"), short gaps $(pct_range "${INTR_SHORT_SHARES[@]}"), the last runs priced at $(intr_priced)"
}
# Prints the range of its fractions in percent: "A% to B%".
pct_range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%.3g%% to %.3g%%", 100 * a, 100 * b }'; }
