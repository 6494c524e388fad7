#!/usr/bin/env bash
# zero_bubble.sh: bubble rates of 1F1B, ZB-H1 and ZB-H2 (Qi et al., ICLR 2024) from per-stage
# F, B (input gradient, pipelab's I), W and communication times profiled in the paper, for its
# four model sizes and microbatch counts, in the paper's definition
# bubble rate = max over ranks of (span - busy) / busy (pipelab simulate's "bubble_rate").
# The profiled times below are the paper's Table 4 as recalled (milliseconds); the published
# bubble rates of Table 5 are not filled in yet (printed as "?"): see the README section.
# A few seconds. Flags: --shard I/N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=zero_bubble
source "$(dirname "$0")/lib.sh" "$@"
# model p  TF     TB     TW     Tcomm (ms)  microbatches
CONFIGS="1.5B 8 18.522 18.086 9.337 0.601 24,32,64
6.2B 8 29.310 29.264 15.716 0.893 24,32,64
14.6B 16 38.252 38.214 20.586 1.052 48,64,128
28.3B 32 49.215 49.141 26.556 1.104 96,128,256"
RATES=$OUT/$NAME.rates
[ "$PLOT_ONLY" = 1 ] || : > "$RATES.$SHARD_I"
while read -r model p tf tb tw tc ms; do
    for m in ${ms//,/ }; do
        for kind in 1f1b zb-h1 zb-h2; do
            run_one() {
                r=$("$PL" simulate --kind "$kind" --ranks "$p" --microbatches "$m" --tf "${tf}e-3" --ti "${tb}e-3" \
                    --tw "${tw}e-3" --tcomm "${tc}e-3" --tag "$NAME" --db "$DB" --format json |
                    sed -n 's/.*"bubble_rate":\([^,]*\),.*/\1/p')
                echo "$model $p $m $kind $r" >> "$RATES.$SHARD_I"
            }
            point run_one
        done
    done
done <<< "$CONFIGS"
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB and $RATES.$SHARD_I"; exit 0; }
echo "bubble rate (max over ranks of (span - busy)/busy); paper = Table 5 (not filled: ?)"
printf "%-6s %3s %4s  %10s %10s %10s\n" model p m 1f1b zb-h1 zb-h2
cat "$RATES".* 2>/dev/null | awk '
    { r[$1, $2, $3, $4] = $5; if (!(($1, $2, $3) in seen)) { seen[$1, $2, $3] = 1; order[++n] = $1 " " $2 " " $3 } }
    END { for (i = 1; i <= n; i++) { split(order[i], k, " ")
        printf "%-6s %3s %4s ", k[1], k[2], k[3]
        split("1f1b zb-h1 zb-h2", s, " ")
        for (j = 1; j <= 3; j++) printf " %6.4f (?)", r[k[1], k[2], k[3], s[j]]; printf "\n" } }'
