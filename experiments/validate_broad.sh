# shellcheck shell=bash
# validate_broad.sh: the configurations of `validate_cpu.sh --broad` and the check of its
# targets (sourced by validate_cpu.sh, not run).
#
# broad_points prints 70 configurations, one a line: "KIND M RECOMPUTE MODEL-SPEC". Point n
# (0..69) takes kind n mod 10 and round r = n / 10 (0..6); every other setting turns with r and
# the kind at its own period, so that each kind meets both blocks, recomputation on and off and
# several values of every size, and no size is tied to a kind:
#   block        transformer when (k + r) is odd, else the dense block
#   recompute    full when (k + r / 2) is odd
#   m            2 3 4 6 8 12 16 (p to 8p on 2 ranks; DualPipeV needs m >= 4: 4 for its 2 and 3)
#   dense        width 128 256 512 768 1024, depth 4 6 8 12, microbatch 8 16 32 rows
#   transformer  hidden 128 256 384 512 (heads = hidden / 64), seq 32 64 128, 1 2 4 sequences
#                per microbatch, layers 4 8
# each made smaller when its work exceeds BROAD_MAX_FLOPS (below).
BROAD_KINDS=(gpipe 1f1b pipedream 2bw interleaved looped-bfs zb-h1 zb-h2 zbv dualpipev)
BROAD_M=(2 3 4 6 8 12 16)
BROAD_WIDTH=(128 256 512 768 1024)
BROAD_DEPTH=(4 6 8 12)
BROAD_MBS=(8 16 32)
BROAD_HIDDEN=(128 256 384 512)
BROAD_SEQ=(32 64 128)
BROAD_SEQS=(1 2 4)
BROAD_LAYERS=(4 8)
BROAD_ROUNDS=7
# The most forward FLOPs of one rank's blocks for one microbatch (half the model on 2 ranks).
# A point above it is made smaller, in this order, until it fits: the dense block's rows per
# microbatch (to 4), then its depth (to 4); the transformer's sequences per microbatch (to 1),
# then its sequence length (to 32), then its layers (to 4). At about 40 GFLOP/s per core, a run
# of 1 + 10 passes and its profile between them then take about 10 s or less.
BROAD_MAX_FLOPS=1000000000

# Forward FLOPs of one block for one microbatch (exec/model.c, exec_block_flops): the dense block
# of width $1 on $2 rows with an inner size $3 (default 4) times the width, 4 b h f; the
# transformer block of width $1 on $3 sequences of $2 tokens, 24 R h^2 + 4 R s h with R = b s rows.
mlp_block_flops() { echo $((4 * ${3:-4} * $2 * $1 * $1)); }
gpt_block_flops() { echo $((24 * $3 * $2 * $1 * $1 + 4 * $3 * $2 * $2 * $1)); }

# Timed passes of a run are at least MIN_TIMED_S seconds of measurement (default 0.5;
# validate_cpu.sh shares it among its REPEATS runs), at
# least TIMED and at most TIMED_MAX (default 200) passes. A short iteration is otherwise a few
# milliseconds of passes, most of them right after the profile's rounds between the passes,
# whose blocks have pushed the run's out of the caches: such a pass is slower than a pass after
# a pass, so the median pass of 10 measured the profile's disturbance (docs/validate_cpu.md,
# "Short iterations"). The iteration is estimated from its FLOPs at a low
# RATE_GFLOPS (default 20, under what small GEMMs reach here, so that the estimate errs long
# and the passes err many): the busiest of 2 ranks does half the blocks, F, I and W of each
# microbatch (and a second F under full recomputation). A pass of an asynchronous schedule
# holds several iterations (pipedream and 2bw: 4, as `pipelab schedule` generates them), and
# TIMED and MIN_TIMED_S count iterations: such a run times ceil(TIMED / iterations) passes, at
# least TIMED_PASSES_MIN (3; the steadiness is their spread), where it timed TIMED passes of 4
# iterations each before, half of the grid's pass time in two of its ten kinds.
MIN_TIMED_S=${MIN_TIMED_S:-0.5}
TIMED_PASSES_MIN=${TIMED_PASSES_MIN:-3}
TIMED_MAX=${TIMED_MAX:-200}
RATE_GFLOPS=${RATE_GFLOPS:-20}
# Prints the timed passes of configuration "KIND M RECOMPUTE MODEL-SPEC" ($1 .. $4).
point_timed() {
    local m=$2 rc=$3 spec=$4 kv L f it
    it=$("$PL" schedule --kind "$1" --ranks 2 --microbatches "$m" --format csv 2>/dev/null | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } NR == 2 { print $c["iterations"] }')
    declare -A p
    for kv in $(echo "${spec#*:}" | tr , ' '); do p[${kv%%=*}]=${kv#*=}; done
    if [ "${spec%%:*}" = transformer ]; then L=${p[layers]}; f=$(gpt_block_flops "${p[hidden]}" "${p[seq]}" "${p[microbatch]}")
    else L=${p[depth]}; f=$(mlp_block_flops "${p[width]}" "${p[microbatch]}" "${p[ffn_mult]:-4}"); fi
    awk -v m="$m" -v L="$L" -v f="$f" -v rc="$rc" -v rate="$RATE_GFLOPS" -v want="$MIN_TIMED_S" -v lo="$TIMED" -v hi="$TIMED_MAX" \
        -v it="${it:-1}" -v least="$TIMED_PASSES_MIN" 'BEGIN {
        it += 0; if (it < 1) it = 1
        est = it * m * int((L + 1) / 2) * f * (rc == "full" ? 4 : 3) / (rate * 1e9)
        n = int(want / est + 0.999999); lo = int((lo + it - 1) / it); if (it > 1 && lo < least) lo = least
        if (n < lo) n = lo; if (n > hi) n = hi; print n }'
}

# Prints the configurations (see above).
broad_points() {
    local nk=${#BROAD_KINDS[@]} n k r kind m rc spec
    for ((n = 0; n < nk * BROAD_ROUNDS; n++)); do
        k=$((n % nk)); r=$((n / nk)); kind=${BROAD_KINDS[$k]}
        m=${BROAD_M[$(((r + 2 * k) % ${#BROAD_M[@]}))]}
        [ "$kind" != dualpipev ] || [ "$m" -ge 4 ] || m=4
        rc=none; [ $(((k + r / 2) % 2)) = 0 ] || rc=full
        # (k + r) has one parity per block: the indices halve it so that every value turns up
        if [ $(((k + r) % 2)) = 1 ]; then
            local h=${BROAD_HIDDEN[$(((r + k) / 2 % ${#BROAD_HIDDEN[@]}))]} s=${BROAD_SEQ[$(((2 * r + k) % ${#BROAD_SEQ[@]}))]}
            local b=${BROAD_SEQS[$(((r + 2 * k) % ${#BROAD_SEQS[@]}))]} L=${BROAD_LAYERS[$(((r + k / 2) % ${#BROAD_LAYERS[@]}))]}
            while [ $((L / 2 * $(gpt_block_flops "$h" "$s" "$b"))) -gt "$BROAD_MAX_FLOPS" ]; do
                if [ "$b" -gt 1 ]; then b=$((b / 2)); elif [ "$s" -gt 32 ]; then s=$((s / 2)); elif [ "$L" -gt 4 ]; then L=$((L / 2)); else break; fi
            done
            spec="transformer:layers=$L,hidden=$h,heads=$((h / 64)),seq=$s,microbatch=$b"
        else
            local w=${BROAD_WIDTH[$(((3 * r + k) % ${#BROAD_WIDTH[@]}))]} d=${BROAD_DEPTH[$(((r + 3 * k) / 2 % ${#BROAD_DEPTH[@]}))]}
            local mb=${BROAD_MBS[$(((k + 2 * r) % ${#BROAD_MBS[@]}))]}
            while [ $((d / 2 * $(mlp_block_flops "$w" "$mb"))) -gt "$BROAD_MAX_FLOPS" ]; do
                if [ "$mb" -gt 4 ]; then mb=$((mb / 2)); elif [ "$d" -gt 4 ]; then d=$((d / 2)); else break; fi
            done
            spec="mlp:width=$w,depth=$d,microbatch=$mb"
        fi
        echo "$kind $m $rc $spec"
    done
}

# Reads `pipelab compare --format csv` on stdin and prints, over its pairs, the broad grid's targets
# beside what was measured: iteration time MAPE (<= 2%), largest error (<= 5%) and signed mean;
# bubble fraction mean absolute difference (<= 1.5 points) and signed mean; peak memory MAPE
# (<= 2%), largest error and signed mean. A metric whose column the input lacks is left out, and
# $1 names the rows (default "pairs"): `repeat_means | broad_targets "configurations' means"` judges
# iteration time on the configurations' mean errors. Prints "no pairs" when there are none.
broad_targets() {
    awk -F, -v what="${1:-pairs}" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i
          hb = "bubble_fraction_err" in col; hm = "peak_mem_err" in col; next }
        function abs(x) { return x < 0 ? -x : x }
        { n++; it = $col["iteration_time_err"]; bu = hb ? $col["bubble_fraction_err"] : 0; me = hm ? $col["peak_mem_err"] : 0
          si += it; ai += abs(it); if (abs(it) > abs(mi)) mi = it
          sb += bu; ab += abs(bu)
          sm += me; am += abs(me); if (abs(me) > abs(mm)) mm = me }
        function verdict(ok) { return ok ? "met" : "MISSED" }
        END {
          if (n == 0) { print "targets: no " what; exit }
          printf "%-41s measured    target  verdict\n", sprintf("targets over %d %s", n, what)
          printf "  iteration time MAPE                      %6.2f%%    <= 2%%   %s\n", 100 * ai / n, verdict(ai / n <= 0.02)
          printf "  iteration time largest error             %+6.2f%%    <= 5%%   %s\n", 100 * mi, verdict(abs(mi) <= 0.05)
          printf "  iteration time signed mean error         %+6.2f%%\n", 100 * si / n
          if (hb) {
            printf "  bubble fraction mean |difference|        %6.2f pp  <= 1.5   %s\n", 100 * ab / n, verdict(ab / n <= 0.015)
            printf "  bubble fraction signed mean difference   %+6.2f pp\n", 100 * sb / n }
          if (hm) {
            printf "  peak memory MAPE                         %6.2f%%    <= 2%%   %s\n", 100 * am / n, verdict(am / n <= 0.02)
            printf "  peak memory largest error                %+6.2f%%\n", 100 * mm
            printf "  peak memory signed mean error            %+6.2f%%\n", 100 * sm / n } }'
}

# Reads `pipelab compare --repeats --format csv` on stdin and prints, for broad_targets, each
# configuration's mean iteration-time error as its iteration_time_err. The model column before
# it is quoted and holds commas, so the mean is found counting from the line's end.
repeat_means() {
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "iteration_time_err_mean") back = NF - i
          if (back == "") { print "repeat_means: no iteration_time_err_mean column" > "/dev/stderr"; exit 1 }
          print "iteration_time_err"; next }
        { print $(NF - back) }'
}

# A profile or run during which the other processes (and the hypervisor's steal time) took
# RUN_BUSY_MAX percent of the CPUs or more is measured again (validate_cpu.sh's quiet_try) and,
# still contended, kept apart. Default 3: over broad grids 83 and 84 the 8 runs at 3-8% erred
# 3.0-5.0% (MAPE; -8.70% the largest), those at 1-2% 0.8-2.1%, those under 1% 1.0-1.5%
# (docs/validate_cpu.md, "A run the others took 3% from"). The quiet window before each
# attempt keeps BUSY_MAX (10): over a tenth of a second, one tick of 100 a second on 2 cores is
# 5% already.
RUN_BUSY_MAX=${RUN_BUSY_MAX:-3}
# Succeeds when $1, the others' percentage of the CPUs during a profile or run, makes it
# contended (RUN_BUSY_MAX or more).
run_contended() { [ "$1" -ge "$RUN_BUSY_MAX" ]; }

# Reads `pipelab compare --format csv` on stdin and prints its header and the pairs whose measured
# run's value in file $1 ("UID VALUE" lines) is within $2: the steady pairs (the steadiness
# file), the pairs measured on an unslowed host (host_slowdowns' file). A pair whose run the file
# lacks is left out.
pairs_within() {
    awk -F, -v max="$2" 'FNR == NR { v[$1] = $2; next }
        FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; print; next }
        ($c["measured_uid"] in v) && v[$c["measured_uid"]] <= max' FS=' ' "$1" FS=, -
}

# The host's speed. Other guests of the host slow its cores without showing in /proc/stat, and
# a slowed host slows a run's passes and the profile between them unevenly (docs/validate_cpu.md,
# "A slowed host"). validate_cpu.sh therefore reads the host probe each run takes before it
# (`pipelab run`: the F of one dense block of width 256 on 16 rows, both cores at once, and on
# one core alone; exec_host_probe_measure), one fixed piece of work. host_slowdowns reads
# "UID PROBE_S" lines on stdin and prints "UID SLOWDOWN": each probe over the host's own speed, the 10th percentile (nearest rank) of the probes in the files
# "$@" ("... PROBE_S" lines, the probe last: this grid's and the host's earlier ones). Prints
# nothing without probes.
host_slowdowns() {
    local ref
    ref=$(awk '{ print $NF }' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) { k = int(0.1 * NR); if (k < 0.1 * NR) k++; if (k < 1) k = 1; print v[k] } }')
    [ -n "$ref" ] || return 0
    awk -v ref="$ref" 'ref > 0 { printf "%s %.3f\n", $1, $2 / ref }'
}

# offgrid_points N SEED prints N configurations for `validate_cpu.sh --offgrid`, one a line:
# "KIND M RECOMPUTE MODEL-SPEC CHUNKS", drawn at random from a space wider than the broad
# grid's, so that the model is checked where it was not looked at. The draw is seeded (a
# linear congruential generator in shell arithmetic, the same on every machine): one SEED
# gives one list. Every point takes at least one value that no broad point takes, and none is
# a broad point:
#   kind         any of the ten; interleaved and looped-bfs with 2, 3 or 4 chunks per rank
#   m            2 to 16, every value (DualPipeV: 4 or more)
#   dense        width 96 to 1280, depth 2 to 16 (odd depths give unequal stages), 4 to 48
#                rows per microbatch, inner size 2 or 4 times the width
#   transformer  hidden 64 to 768 with heads of 32 or 64 dimensions, seq 16 to 256, 1 to 6
#                sequences per microbatch, layers 2 to 12
# with at least one block per stage, each made smaller as the broad grid's points are when its
# work exceeds BROAD_MAX_FLOPS (depth and layers down to the stages' count).
OFF_WIDTH=(96 128 160 192 256 320 384 448 512 640 768 896 1024 1280)
OFF_MBS=(4 8 12 16 24 32 48)
OFF_FFN=(2 4 4)
OFF_HIDDEN=(64 128 192 256 320 384 448 512 640 768)
OFF_HEADDIM=(32 64)
OFF_SEQ=(16 32 48 64 96 128 192 256)
OFF_SEQS=(1 2 3 4 6)
# Draws a whole number in 0..$1-1 into DRAW (a global, so that the generator's state OFF_STATE
# survives: a $(...) would draw in a subshell).
off_draw() {
    OFF_STATE=$(((OFF_STATE * 1103515245 + 12345) % 2147483648))
    DRAW=$(((OFF_STATE >> 8) % $1))
}
# Returns 0 when $1 is one of the remaining arguments.
off_in() { local v=$1 x; shift; for x in "$@"; do [ "$x" != "$v" ] || return 0; done; return 1; }
offgrid_points() {
    local n=$((10#$1)) seed=$((10#$2)) made=0 tries=0 kind m rc spec v stages d minb off grid
    grid=$(broad_points)
    OFF_STATE=$(((seed * 2654435761 + 1) % 2147483648))
    while [ "$made" -lt "$n" ]; do
        tries=$((tries + 1))
        [ "$tries" -le $((100 * n)) ] || { echo "offgrid_points: no new point after $tries draws" >&2; return 1; }
        off_draw ${#BROAD_KINDS[@]}; kind=${BROAD_KINDS[$DRAW]}
        off_draw 15; m=$((2 + DRAW))
        [ "$kind" != dualpipev ] || [ "$m" -ge 4 ] || continue
        off_draw 2; rc=none; [ "$DRAW" = 0 ] || rc=full
        v=1
        case "$kind" in interleaved|looped-bfs) off_draw 3; v=$((2 + DRAW)) ;; zbv|dualpipev) v=2 ;; esac
        stages=$((2 * v)); minb=$((stages > 4 ? stages : 4))
        off=0
        case "$kind" in interleaved|looped-bfs) [ "$v" = 2 ] || off=1 ;; esac
        off_in "$m" "${BROAD_M[@]}" || off=1
        off_draw 2
        if [ "$DRAW" = 1 ]; then
            local h hd s b
            off_draw ${#OFF_HIDDEN[@]}; h=${OFF_HIDDEN[$DRAW]}
            off_draw ${#OFF_HEADDIM[@]}; hd=${OFF_HEADDIM[$DRAW]}; [ "$hd" -le "$h" ] || hd=$h
            off_draw ${#OFF_SEQ[@]}; s=${OFF_SEQ[$DRAW]}
            off_draw ${#OFF_SEQS[@]}; b=${OFF_SEQS[$DRAW]}
            off_draw 11; d=$((2 + DRAW)); [ "$d" -ge "$stages" ] || d=$stages
            while [ $(((d + 1) / 2 * $(gpt_block_flops "$h" "$s" "$b"))) -gt "$BROAD_MAX_FLOPS" ]; do
                if [ "$b" -gt 1 ]; then b=$((b / 2)); elif [ "$s" -gt 32 ]; then s=$((s / 2))
                elif [ "$d" -gt "$minb" ]; then d=$((d / 2 > minb ? d / 2 : minb)); else break; fi
            done
            off_in "$h" "${BROAD_HIDDEN[@]}" && [ "$hd" = 64 ] && off_in "$s" "${BROAD_SEQ[@]}" && off_in "$b" "${BROAD_SEQS[@]}" \
                && off_in "$d" "${BROAD_LAYERS[@]}" || off=1
            spec="transformer:layers=$d,hidden=$h,heads=$((h / hd)),seq=$s,microbatch=$b"
        else
            local w mb f
            off_draw ${#OFF_WIDTH[@]}; w=${OFF_WIDTH[$DRAW]}
            off_draw ${#OFF_MBS[@]}; mb=${OFF_MBS[$DRAW]}
            off_draw ${#OFF_FFN[@]}; f=${OFF_FFN[$DRAW]}
            off_draw 15; d=$((2 + DRAW)); [ "$d" -ge "$stages" ] || d=$stages
            while [ $(((d + 1) / 2 * $(mlp_block_flops "$w" "$mb" "$f"))) -gt "$BROAD_MAX_FLOPS" ]; do
                if [ "$mb" -gt 4 ]; then mb=$((mb / 2)); elif [ "$d" -gt "$minb" ]; then d=$((d / 2 > minb ? d / 2 : minb)); else break; fi
            done
            off_in "$w" "${BROAD_WIDTH[@]}" && off_in "$mb" "${BROAD_MBS[@]}" && off_in "$d" "${BROAD_DEPTH[@]}" && [ "$f" = 4 ] || off=1
            spec="mlp:width=$w,depth=$d,microbatch=$mb"; [ "$f" = 4 ] || spec="$spec,ffn_mult=$f"
        fi
        [ "$off" = 1 ] || continue
        ! grep -qxF "$kind $m $rc $spec" <<< "$grid" || continue
        echo "$kind $m $rc $spec $v"
        made=$((made + 1))
    done
}
