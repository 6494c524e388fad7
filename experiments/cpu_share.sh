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
# Sets OWN to the CPU jiffies this shell's finished children used so far (user + system);
# `times` runs in this shell (in a $(...) subshell it would see none of them).
own_jiffies() {
    times > "$TIMES_F"
    OWN=$(tail -1 "$TIMES_F" | awk -v hz="$HZ" '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /m|s/); t += a[1] * 60 + a[2] } printf "%d\n", t * hz + 0.5 }')
}
# Runs "$@" and sets OTHERS to the percentage of all CPUs that other processes used meanwhile.
measure_others() {
    local b0 t0 o0 b1 t1 o1
    own_jiffies; o0=$OWN; read -r b0 t0 <<< "$(cpu_jiffies)"
    "$@"
    local rc=$?
    read -r b1 t1 <<< "$(cpu_jiffies)"; own_jiffies; o1=$OWN
    OTHERS=$(awk -v b=$((b1 - b0 - (o1 - o0))) -v t=$((t1 - t0)) 'BEGIN { v = t > 0 ? 100 * b / t : 0; printf "%.0f", v < 0 ? 0 : v }')
    return $rc
}
