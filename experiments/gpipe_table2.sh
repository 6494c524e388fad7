#!/usr/bin/env bash
# gpipe_table2.sh: the setting of the GPipe paper's Table 2 (Huang et al., 2019): K = 2, 4, 8
# partitions and M = 1, 4, 32 microbatches for a Transformer-48-like model (hidden 1024, 16 heads,
# sequence 512, vocabulary 32000; a minibatch of 32 sequences split into M microbatches) on the
# TPU-like preset tpu-v3 in bf16, GPipe schedule, balanced split. Prints throughput normalized to
# K = 2, M = 1 beside the published Transformer row. A few seconds.
# Flags: --shard I/N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=gpipe_table2
source "$(dirname "$0")/lib.sh" "$@"
BATCH=32
MODEL="transformer:layers=48,hidden=1024,heads=16,seq=512,vocab=32000"
for K in 2 4 8; do
    for M in 1 4 32; do
        point "$PL" simulate --kind gpipe --ranks $K --microbatches $M --model "$MODEL,microbatch=$((BATCH / M))" \
            --hardware tpu-v3 --precision bf16 --balance --tag "$NAME" --db "$DB" --format csv >/dev/null
    done
done
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
"$PL" plot throughput --db "$DB" --tag $NAME -o "$FIG/throughput-$NAME.png" \
    --title "GPipe, Transformer-48 on tpu-v3 (bf16), batch $BATCH: throughput against partitions K" >/dev/null
# Published (GPipe paper, Table 2, Transformer on TPU; normalized to K = 2, M = 1).
"$PL" db list --db "$DB" --tag $NAME --limit 0 --format csv | awk -F, '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { t[$col["ranks"], $col["microbatches"]] = $col["throughput_samples_s"] }
    END {
        paper[2,1] = 1;    paper[4,1] = 1.07; paper[8,1] = 1.3
        paper[2,4] = 1.7;  paper[4,4] = 3.2;  paper[8,4] = 4.8
        paper[2,32] = 1.8; paper[4,32] = 3.4; paper[8,32] = 6.3
        base = t[2,1]
        printf "normalized throughput, pipelab (paper)   Transformer-48-like, tpu-v3\n"
        printf "%-6s %18s %18s %18s\n", "", "K = 2", "K = 4", "K = 8"
        split("1 4 32", ms, " ")
        for (j = 1; j <= 3; j++) { m = ms[j]; printf "M = %-2d", m
            for (k = 2; k <= 8; k *= 2) printf " %10.2f (%5.2f)", t[k, m] / base, paper[k, m]; printf "\n" }
    }'
echo "figure: $FIG/throughput-$NAME.png"
