#!/usr/bin/env bash
# zero_bubble.sh: bubble rates of 1F1B, ZB-H1 and ZB-H2 (Qi, Wan, Huang, Lin, "Zero Bubble
# Pipeline Parallelism", ICLR 2024, arXiv 2401.10241) simulated from the per-stage F, B (input
# gradient, pipelab's I), W and communication times the paper profiled, for its four models and
# three microbatch counts each, beside the paper's Table 5. Under a second.
# Two bubble figures per schedule:
#   span  the paper's bubble rate (§5.3), the one Table 5 uses: (cost - m (TF + TB + TW)) / cost,
#         cost = the largest execution time of a stage, from its first compute to its last, so the
#         staggered start of the pipeline is no bubble (`pipelab simulate`'s zb_bubble_rate);
#   iter  the same numerator over the whole iteration's time instead (1 - m (TF+TB+TW) / iteration
#         time), which counts the stagger and so differs where the last stage starts late (ZB-H2).
# Table 5 and the profiled times (Table 9) are read from experiments/published/, which names
# where they were checked. Ends with how many of the 36 cells match the paper to 4 decimals.
# Flags: --shard I/N, --merge N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=zero_bubble
source "$(dirname "$0")/lib.sh" "$@"
TABLE=experiments/published/zero_bubble_tables_5_9.tsv
KINDS="1f1b zb-h1 zb-h2"
# Prints the table's rows: model p m TF TB TW Tcomm (ms) and the paper's 1f1b zb-h1 zb-h2 rates.
rows() { grep -v '^#' "$TABLE"; }
while read -r model p m tf tb tw tc _; do
    for kind in $KINDS; do
        point "$PL" simulate --kind "$kind" --ranks "$p" --microbatches "$m" --tf "${tf}e-3" --ti "${tb}e-3" \
            --tw "${tw}e-3" --tcomm "${tc}e-3" --tag "$NAME-$model" --db "$DB" --format csv >/dev/null
    done
done < <(rows)
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
echo "Bubble rates, Zero Bubble (arXiv 2401.10241) Table 5 settings. Per schedule: iter = over the"
echo "iteration time; span = the paper's own metric, over each stage's span (Table 5 uses this one);"
echo "paper = Table 5. A cell matches when span rounds to the paper's 4 decimals."
printf "%-6s %3s %4s" model p m
for kind in $KINDS; do printf "  %-6s %6s %6s %6s" "$kind" iter span paper; done
printf "\n"
# The rates from the database (also a merged one: --plot-only --db MERGED.db), one row per setting.
while read -r model p m tf tb tw tc p1 h1 h2; do
    "$PL" db list --db "$DB" --tag "$NAME-$model" --limit 0 --format csv | awk -F, -v model="$model" -v p="$p" \
        -v m="$m" -v sum="$(awk -v a="$tf" -v b="$tb" -v c="$tw" 'BEGIN { print (a + b + c) * 1e-3 }')" \
        -v kinds="$KINDS" -v pub="$p1 $h1 $h2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["microbatches"] == m && !($col["schedule"] in it) {
            it[$col["schedule"]] = $col["iteration_time_s"]; zb[$col["schedule"]] = $col["zb_bubble_rate"] }
        END { n = split(kinds, s, " "); split(pub, paper, " ")
            printf "%-6s %3s %4s", model, p, m
            for (j = 1; j <= n; j++) {
                k = s[j]
                if (k in it) {
                    span = sprintf("%.4f", zb[k]); hit = (span + 0 == paper[j] + 0)
                    printf "  %-6s %6.4f %6s %6.4f", hit ? "" : "differ", 1 - m * sum / it[k], span, paper[j]
                    matched += hit
                } else printf "  %-6s %6s %6s %6.4f", "", "-", "-", paper[j] }
            printf "  %d\n", matched }'
done < <(rows) | awk '{ n += $NF; cells += 3; sub(/ +[0-9]+$/, ""); print }
    END { printf "%d/%d cells match to 4 decimals\n", n, cells }'
