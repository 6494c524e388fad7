#!/usr/bin/env bash
# gpipe_table2.sh: the setting of the GPipe paper's Table 2 (Huang et al., "GPipe: Efficient
# Training of Giant Neural Networks using Pipeline Parallelism", arXiv 1811.06965v5): K = 2, 4, 8
# partitions and M = 1, 4, 32 microbatches for Transformer-48, GPipe schedule, balanced split, on
# the TPU-like preset tpu-v3 in bf16. Prints the throughput normalized to K = 2, M = 1 beside the
# paper's Transformer columns and draws results/out/figures/throughput-gpipe_table2.png.
# Under a second.
# Model: Table 2 names only "Transformer-48"; its layer shape here is the one §3 gives for the
# Transformer of Table 1 (model dimension 2048, feed-forward 8192, 32 heads, sequence length 1024,
# vocabulary 32k, batch size 32), an assumption, as is the tpu-v3 preset's speed. The paper also
# says "batch size was adjusted to fit memory if necessary", which is not reproduced.
# Published numbers: experiments/published/gpipe_table2.tsv (where they were checked is there).
# Cells that cannot be reproduced are named, with the reason, computed rather than assumed: at one
# batch size, GPipe's K partitions with M microbatches run at most K M / (M + K - 1) times the
# throughput of K = 2, M = 1 (every stage busy except the (K-1)/(M+K-1) bubble). A published cell
# above that bound needs the larger batch the paper's caption allows ("batch size was adjusted to
# fit memory"), which a fixed-batch simulation cannot give; such a cell is marked "> bound".
# Flags: --shard I/N, --merge N, --plot-only, --db FILE (see experiments/lib.sh).
NAME=gpipe_table2
source "$(dirname "$0")/lib.sh" "$@"
BATCH=32
MODEL="transformer:layers=48,hidden=2048,heads=32,seq=1024,vocab=32000"
for K in 2 4 8; do
    for M in 1 4 32; do
        point "$PL" simulate --kind gpipe --ranks $K --microbatches $M --model "$MODEL,microbatch=$((BATCH / M))" \
            --hardware tpu-v3 --precision bf16 --balance --tag "$NAME" --db "$DB" --format csv >/dev/null
    done
done
summarize || { echo "shard $SHARD_I/$SHARD_N written to $DB"; exit 0; }
"$PL" plot throughput --db "$DB" --tag $NAME -o "$FIG/throughput-$NAME.png" \
    --title "GPipe, Transformer-48 on tpu-v3 (bf16), batch $BATCH: throughput against partitions K" >/dev/null
# The published cells beside pipelab's, with the signed error and the fixed-batch bound.
"$PL" db list --db "$DB" --tag $NAME --limit 0 --format csv | awk -F, -v table=experiments/published/gpipe_table2.tsv '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { t[$col["ranks"], $col["microbatches"]] = $col["throughput_samples_s"] }
    END {
        while ((getline line < table) > 0) { if (line ~ /^#/) continue; split(line, f, "\t"); paper[f[1], f[2]] = f[3] }
        printf "normalized throughput: pipelab, paper (GPipe Table 2, arXiv 1811.06965v5), signed error; Transformer-48, tpu-v3\n"
        printf "%-6s %26s %26s %26s\n", "", "K = 2", "K = 4", "K = 8"
        split("1 4 32", ms, " ")
        for (j = 1; j <= 3; j++) { m = ms[j]; printf "M = %-2d", m
            for (k = 2; k <= 8; k *= 2) {
                bound = k * m / (m + k - 1) / (2 * 1 / (1 + 2 - 1))
                mine = t[k, m] / t[2, 1]; p = paper[k, m]
                if (p > bound * 1.0005) { note = "> bound"; out[++n] = sprintf("K = %d, M = %-2d: paper %.2f > fixed-batch bound %.2f", k, m, p, bound) }
                else note = sprintf("%+5.0f%%", 100 * (mine / p - 1))
                printf "   %5.2f %5.2f %-8s", mine, p, note }
            printf "\n" }
        printf "\n%d of 9 cells cannot be reproduced at one batch size (the paper adjusted the batch to fit memory):\n", n
        for (i = 1; i <= n; i++) print "  " out[i]
    }'
echo "figure: $FIG/throughput-$NAME.png"
