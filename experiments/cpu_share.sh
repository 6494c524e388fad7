# cpu_share.sh: sourced by experiments/ scripts (bash). measure_others CMD... runs CMD and sets
# OTHERS to the percentage of all CPUs that other processes (and the hypervisor's steal time)
# used meanwhile: /proc/stat's busy time minus the CPU time of this shell's children.
HZ=$(getconf CLK_TCK)

# Prints "busy total" jiffies of all CPUs (busy counts the hypervisor's steal time).
cpu_jiffies() {
    local _c u n s i w q sq st
    read -r _c u n s i w q sq st _ < /proc/stat
    echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
TIMES_F=$(mktemp)
trap 'rm -f "$TIMES_F"' EXIT
# Sets OWN to the CPU jiffies this shell and its finished children used so far (user + system);
# `times` runs in this shell (in a $(...) subshell it would see none of them).
own_jiffies() {
    times > "$TIMES_F"
    OWN=$(awk -v hz="$HZ" '{ for (i = 1; i <= 2; i++) { split($i, a, /m|s/); t += a[1] * 60 + a[2] } } END { printf "%d\n", t * hz + 0.5 }' "$TIMES_F")
}
# others_mark remembers this moment; others_since then sets OTHERS to the percentage of all CPUs
# that other processes used since it, and SPAN to the jiffies of all CPUs since it.
others_mark() {
    own_jiffies; MARK_O=$OWN; read -r MARK_B MARK_T <<< "$(cpu_jiffies)"
}
others_since() {
    local b t
    read -r b t <<< "$(cpu_jiffies)"; own_jiffies
    SPAN=$((t - MARK_T))
    OTHERS=$(awk -v b=$((b - MARK_B - (OWN - MARK_O))) -v t="$SPAN" 'BEGIN { v = t > 0 ? 100 * b / t : 0; printf "%.0f", v < 0 ? 0 : v }')
}
# Runs "$@" and sets OTHERS to the percentage of all CPUs that other processes used meanwhile;
# the mark is then its end (others_since: what the others did after it).
measure_others() {
    others_mark
    "$@"
    local rc=$?
    others_since
    others_mark
    return $rc
}
