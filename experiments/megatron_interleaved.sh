#!/usr/bin/env bash
# megatron_interleaved.sh: Megatron-LM's interleaved 1F1B (Narayanan et al., SC 2021) against
# 1F1B as the chunks per rank v and the microbatches m vary, p = 8 ranks. One model throughout:
# a rank's share costs tF = 1, tB = 2 (simulate --time-per rank: each of its v chunks gets 1/v).
# Every point runs twice:
#   - without communication, where the simulated bubble must lie on Megatron's analytic line,
#     the bubble-to-compute ratio (p-1)/(v m) as a fraction of the iteration, (p-1)/(v m + p-1);
#   - with a fixed 0.05 tF per transfer. Interleaving sends v times as many messages (each
#     microbatch crosses p v - 1 stage boundaries forward and back, 2(p v - 1) transfers), and
#     a transfer is 0.05 v of a chunk's forward, so its bubble lies above the line by what
#     communication costs, the more so the larger v.
# Prints both bubbles beside the analytic one, and the throughput; draws
# results/out/figures/bubble-megatron_interleaved.png (a panel per case: the formula on the left,
# the cost of communication on the right) and throughput-megatron_interleaved.png (with
# communication). About a second.
# Flags: --shard I/N, --merge N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=megatron_interleaved
source "$(dirname "$0")/lib.sh" "$@"
P=8
TCOMM=0.05
NOCOMM="no communication"
COMM="transfer $TCOMM tF"
for m in 8 16 32 64; do
    for v in 1 2 4 8; do
        if [ $v = 1 ]; then shape=(--kind 1f1b); else shape=(--kind interleaved --chunks $v); fi
        point "$PL" simulate "${shape[@]}" --ranks $P --microbatches $m --time-per rank --tf 1 --tb 2 \
            --tag "$NOCOMM" --db "$DB" --format csv >/dev/null
        point "$PL" simulate "${shape[@]}" --ranks $P --microbatches $m --time-per rank --tf 1 --tb 2 \
            --tcomm $TCOMM --tag "$COMM" --db "$DB" --format csv >/dev/null
    done
done
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
"$PL" plot bubble --db "$DB" -o "$FIG/bubble-$NAME.png" \
    --title "Interleaved 1F1B (v chunks per rank) against 1F1B, p = $P, one model (tF = 1 per rank)" >/dev/null
"$PL" plot throughput --db "$DB" --tag "$COMM" --x microbatches -o "$FIG/throughput-$NAME.png" \
    --title "Interleaved 1F1B against 1F1B, p = $P, one model (tF = 1, tB = 2 per rank), $TCOMM tF per transfer" >/dev/null
echo "p = $P, one model (tF = 1, tB = 2 per rank). Bubble fraction: simulated without communication,"
echo "Megatron's analytic (p-1)/(v m + p-1), simulated with $TCOMM tF per transfer; throughput in"
echo "microbatches per unit of time, with communication."
"$PL" db list --db "$DB" --limit 0 --format csv | awk -F, -v p=$P -v nocomm="$NOCOMM" -v comm="$COMM" -v tc=$TCOMM '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { v = $col["chunks"]; m = $col["microbatches"]; t = $col["tag"]
      if (t == nocomm) b0[v, m] = $col["bubble_fraction"]
      if (t == comm) { b1[v, m] = $col["bubble_fraction"]; thr[v, m] = $col["throughput_samples_s"] } }
    END {
        printf "%-4s %-3s %9s %9s %9s %9s %11s\n", "m", "v", "no comm", "analytic", "comm", "excess", "throughput"
        worst = 0; n = 0
        for (m = 8; m <= 64; m *= 2) for (v = 1; v <= 8; v *= 2) if ((v, m) in b0) {
            a = (p - 1) / (v * m + p - 1); d = b0[v, m] - a; if (d < 0) d = -d; if (d > worst) worst = d; n++
            printf "%-4d %-3d %9.4f %9.4f %9.4f %+9.4f %11.4f\n", m, v, b0[v, m], a, b1[v, m], b1[v, m] - a, thr[v, m]
        }
        printf "\nWithout communication the simulation lies on the analytic line: largest difference %.2g over %d points.\n", worst, n
        printf "With %s tF per transfer it lies above it by the excess: each microbatch makes 2(p v - 1) transfers\n", tc
        printf "(v = 1: %d, v = 8: %d), and a transfer costs %s v of a chunk'"'"'s forward.\n", 2 * (p - 1), 2 * (8 * p - 1), tc
    }'
echo "figures: $FIG/bubble-$NAME.png $FIG/throughput-$NAME.png"
