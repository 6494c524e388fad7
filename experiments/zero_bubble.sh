#!/usr/bin/env bash
# zero_bubble.sh: bubble rates of 1F1B, ZB-H1 and ZB-H2 (Qi, Wan, Huang, Lin, "Zero Bubble
# Pipeline Parallelism", ICLR 2024, arXiv 2401.10241) simulated from the per-stage F, B (input
# gradient, pipelab's I), W and communication times the paper profiled, for its four models and
# three microbatch counts each, beside the paper's Table 5. Bubble rate in the paper's definition
# (§5.3): (cost - m (TF + TB + TW)) / cost, cost = the iteration's span; computed here from
# `pipelab simulate`'s iteration time. Under a second.
# Inputs: Appendix D, Table 9 ("Profiled time of TF, TB, TW and Tcomm", milliseconds), one row per
# model and microbatch count. Published: Table 5 ("Bubble rates of 1F1B, 1F1B-I, ZB-H1, ZB-H2,
# ZB-1p, ZB-2p under different settings"), columns 1F1B, ZB-H1, ZB-H2. Both verified against a
# Markdown transcription of arXiv 2401.10241 in the public code index (search tool, find_string
# "| 28.3B |", file id 45548154975, which has Tables 3, 4, 5 and 9); one transcription only, no
# second independent copy was found. Table 5's numbers are themselves the paper's calculation
# ("based on theoretical calculations instead of real experiments"), not measurements.
# Flags: --shard I/N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=zero_bubble
source "$(dirname "$0")/lib.sh" "$@"
# model p m  TF     TB     TW     Tcomm (ms, Table 9)   1F1B   ZB-H1  ZB-H2 (Table 5)
CONFIGS="1.5B 8 24 18.522 18.086 9.337 0.601 0.2431 0.1585 0.1083
1.5B 8 32 18.513 18.086 9.331 0.626 0.1985 0.1242 0.0837
1.5B 8 64 18.546 18.097 9.321 0.762 0.1240 0.0674 0.0444
6.2B 8 24 29.718 29.444 19.927 0.527 0.2347 0.1323 0.0698
6.2B 8 32 29.802 29.428 19.530 0.577 0.1898 0.1045 0.0559
6.2B 8 64 29.935 29.621 19.388 0.535 0.1091 0.0554 0.0294
14.6B 16 48 11.347 11.248 8.132 0.377 0.2552 0.1397 0.0672
14.6B 16 64 11.307 11.254 8.101 0.379 0.2082 0.1088 0.0516
14.6B 16 128 11.325 11.308 8.109 0.378 0.1251 0.0576 0.0266
28.3B 32 96 10.419 10.207 7.715 0.408 0.2646 0.1421 0.0641
28.3B 32 128 10.408 10.204 7.703 0.408 0.2168 0.1106 0.0490
28.3B 32 256 10.402 10.248 7.698 0.460 0.1352 0.0594 0.0257"
while read -r model p m tf tb tw tc _; do
    for kind in 1f1b zb-h1 zb-h2; do
        point "$PL" simulate --kind "$kind" --ranks "$p" --microbatches "$m" --tf "${tf}e-3" --ti "${tb}e-3" \
            --tw "${tw}e-3" --tcomm "${tc}e-3" --tag "$NAME-$model" --db "$DB" --format csv >/dev/null
    done
done <<< "$CONFIGS"
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
echo "bubble rate (cost - m (TF+TB+TW)) / cost: pipelab (paper, Zero Bubble arXiv 2401.10241 Table 5)"
printf "%-6s %3s %4s  %17s %17s %17s\n" model p m 1f1b zb-h1 zb-h2
# the rates from the database (also a merged one: --plot-only --db MERGED.db)
while read -r model p m tf tb tw tc p1 h1 h2; do
    "$PL" db list --db "$DB" --tag "$NAME-$model" --limit 0 --format csv | awk -F, -v model="$model" -v p="$p" \
        -v m="$m" -v sum="$(awk -v a="$tf" -v b="$tb" -v c="$tw" 'BEGIN { print (a + b + c) * 1e-3 }')" \
        -v pub="1f1b $p1 zb-h1 $h1 zb-h2 $h2" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["microbatches"] == m && !($col["schedule"] in it) { it[$col["schedule"]] = $col["iteration_time_s"] }
        END { split(pub, q, " "); for (i = 1; i < 6; i += 2) paper[q[i]] = q[i + 1]
            printf "%-6s %3s %4s ", model, p, m
            n = split("1f1b zb-h1 zb-h2", s, " ")
            for (j = 1; j <= n; j++) {
                if (s[j] in it) printf " %7.4f", 1 - m * sum / it[s[j]]; else printf " %7s", "-"
                printf " (%7.4f)", paper[s[j]] } printf "\n" }'
done <<< "$CONFIGS"
