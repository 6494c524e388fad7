#!/usr/bin/env bash
# sweep_bubble.sh: bubble fraction against microbatches m in {1,...,64} for p in {2,4,8,16} ranks,
# every schedule kind (gpipe, 1f1b, interleaved v=2, looped-bfs v=2, zb-h1, zb-h2, zbv,
# dualpipev, pipedream, 2bw) with tF = tI = tW = 1 (B = 2), no communication cost. Draws
# results/out/figures/bubble-sweep_bubble.png (the analytic curves dashed). Points a generator
# refuses (e.g. interleaved needs m divisible by p) are skipped. About 20 s on one core.
# Flags: --shard I/N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=sweep_bubble
source "$(dirname "$0")/lib.sh" "$@"
sim() { "$PL" simulate "$@" --tf 1 --ti 1 --tw 1 --tag $NAME --db "$DB" --format csv >/dev/null 2>&1 || true; }
for p in 2 4 8 16; do
    for m in 1 2 4 8 16 32 64; do
        for kind in gpipe 1f1b zb-h1 zb-h2 zbv dualpipev pipedream 2bw; do
            point sim --kind $kind --ranks $p --microbatches $m
        done
        for kind in interleaved looped-bfs; do
            point sim --kind $kind --ranks $p --microbatches $m --chunks 2
        done
    done
done
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
echo "runs in $DB: $("$PL" db list --db "$DB" --limit 0 --format csv | tail -n +2 | wc -l)"
"$PL" plot bubble --db "$DB" --tag $NAME -o "$FIG/bubble-$NAME.png" \
    --title "Bubble fraction against microbatches (tF = tI = tW, no communication)"
echo
echo "p = 8: bubble fraction by schedule and m (simulated; analytic gpipe/1f1b (p-1)/(m+p-1))"
"$PL" db list --db "$DB" --tag $NAME --limit 0 --format csv | awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["ranks"] == 8 { k = $col["schedule"]; m = $col["microbatches"]; v[k, m] = $col["bubble_fraction"]; ks[k] = 1; ms[m] = 1 }
    END {
        printf "%-12s", "m"; for (m = 1; m <= 64; m *= 2) if (m in ms) printf " %7d", m; printf "\n"
        printf "%-12s", "analytic"; for (m = 1; m <= 64; m *= 2) if (m in ms) printf " %7.4f", 7 / (m + 7); printf "\n"
        n = split("gpipe 1f1b interleaved looped-bfs zb-h1 zb-h2 zbv dualpipev pipedream 2bw", order, " ")
        for (j = 1; j <= n; j++) { k = order[j]; if (!(k in ks)) continue
            printf "%-12s", k; for (m = 1; m <= 64; m *= 2) if (m in ms) { if ((k, m) in v) printf " %7.4f", v[k, m]; else printf " %7s", "-" } printf "\n" }
    }'
