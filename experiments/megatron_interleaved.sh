#!/usr/bin/env bash
# megatron_interleaved.sh: Megatron-LM's interleaved 1F1B (Narayanan et al., SC 2021) against
# 1F1B as the chunks per rank v and the microbatches m vary, p = 8 ranks, a layer stack of
# uniform cost split into p*v stages (per-stage tF = 1/v, tB = 2/v) with a fixed 0.05 per transfer
# (interleaving sends v times as many messages). Prints bubble and throughput; draws
# results/out/figures/bubble-megatron_interleaved.png and throughput-megatron_interleaved.png.
# A few seconds. Flags: --shard I/N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=megatron_interleaved
source "$(dirname "$0")/lib.sh" "$@"
P=8
for m in 8 16 32 64; do
    point "$PL" simulate --kind 1f1b --ranks $P --microbatches $m --tf 1 --tb 2 --tcomm 0.05 --tag $NAME --db "$DB" --format csv >/dev/null
    for v in 2 4 8; do
        tf=$(awk -v v=$v 'BEGIN { printf "%.9g", 1 / v }')
        tb=$(awk -v v=$v 'BEGIN { printf "%.9g", 2 / v }')
        point "$PL" simulate --kind interleaved --chunks $v --ranks $P --microbatches $m --tf "$tf" --tb "$tb" \
            --tcomm 0.05 --tag $NAME --db "$DB" --format csv >/dev/null
    done
done
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
"$PL" plot bubble --db "$DB" --tag $NAME -o "$FIG/bubble-$NAME.png" --title "Interleaved 1F1B against 1F1B, p = $P, transfer 0.05 tF" >/dev/null
"$PL" plot throughput --db "$DB" --tag $NAME --x microbatches -o "$FIG/throughput-$NAME.png" --title "Interleaved 1F1B against 1F1B, p = $P" >/dev/null
echo "p = $P; bubble fraction (analytic (p-1)/(v m + p-1)) and throughput (microbatches per unit time)"
"$PL" db list --db "$DB" --tag $NAME --limit 0 --format csv | awk -F, -v p=$P '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { v = $col["chunks"]; m = $col["microbatches"]; b[v, m] = $col["bubble_fraction"]; t[v, m] = $col["throughput_samples_s"] }
    END {
        printf "%-4s %-3s %10s %10s %12s\n", "m", "v", "bubble", "analytic", "throughput"
        for (m = 8; m <= 64; m *= 2) for (v = 1; v <= 8; v *= 2) if ((v, m) in b)
            printf "%-4d %-3d %10.4f %10.4f %12.4f\n", m, v, b[v, m], (p - 1) / (v * m + p - 1), t[v, m]
    }'
echo "figures: $FIG/bubble-$NAME.png $FIG/throughput-$NAME.png"
