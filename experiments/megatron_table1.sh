#!/usr/bin/env bash
# megatron_table1.sh: Megatron-LM's Table 1 (Narayanan et al., "Efficient Large-Scale Language
# Model Training on GPU Clusters Using Megatron-LM", SC21, arXiv 2104.04473): ten GPT models from
# 1.7B to 1T parameters on 32 to 3,072 A100 GPUs of Selene. Simulates every row on the dgx-a100
# preset with the layout of NVIDIA's launch script for the table (tensor T, pipeline P, data
# D = GPUs / (T P), microbatch, global batch, interleaving where the script sets
# --num-layers-per-virtual-pipeline-stage, full activation recomputation, fp16), prints the
# predicted TFLOP/s per GPU beside the paper's with the signed error per row, and, last, a line
# "MAPE X% max Y%"; draws results/out/figures/megatron_table1.png. About a second.
# Nothing here is fitted to the table: every constant comes from cost_models/hardware/dgx-a100.ini
# (its sources are cited there). Published numbers: experiments/published/megatron_sc21_table1.tsv.
# Flags: --plot-only, --db FILE (see experiments/lib.sh; the sweep is too short to shard).
NAME=megatron_table1
source "$(dirname "$0")/lib.sh" "$@"
TABLE=experiments/published/megatron_sc21_table1.tsv
ROWS=$OUT/$NAME.rows.tsv
SEQ=2048
VOCAB=51200
if [ "$PLOT_ONLY" = 0 ]; then
    printf 'params_B\tgpus\ttp\tpp\tdp\tchunks\tpaper_tflops\tpipelab_tflops\tmfu\tpeak_mem_gb\titeration_s\n' > "$ROWS"
    grep -v '^#' "$TABLE" | while IFS=$'\t' read -r pb heads hidden layers tp pp gpus batch tflops pct agg mbs lpv; do
        dp=$((gpus / (tp * pp)))
        chunks=1
        [ "$lpv" = "-" ] || chunks=$((layers / (pp * lpv)))
        csv=$(point "$PL" simulate --model "transformer:layers=$layers,hidden=$hidden,heads=$heads,seq=$SEQ,vocab=$VOCAB" \
            --hardware dgx-a100 --tp "$tp" --pp "$pp" --gpus "$gpus" --chunks "$chunks" --microbatch-size "$mbs" \
            --global-batch "$batch" --recompute full --tag "$NAME" --db "$DB" --format csv)
        echo "$csv" | awk -F, -v OFS='\t' -v pb="$pb" -v g="$gpus" -v tp="$tp" -v pp="$pp" -v dp="$dp" -v v="$chunks" -v paper="$tflops" '
            NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
            NR == 2 { print pb, g, tp, pp, dp, v, paper, $col["tflops_per_gpu"], $col["mfu"], $col["peak_mem_bytes"] / 1e9, $col["iteration_time_s"] }' >> "$ROWS"
    done
fi
awk -F'\t' 'NR == 1 { next }
    { e = 100 * ($8 / $7 - 1); a = e < 0 ? -e : e; sum += a; if (a > max) max = a; n++
      if (n == 1) printf "%9s %6s %3s %3s %4s %2s %14s %15s %8s %6s %10s\n", "params_B", "GPUs", "T", "P", "D", "v", "paper TFLOP/s", "pipelab TFLOP/s", "error", "MFU", "memory GB"
      printf "%9s %6d %3d %3d %4d %2d %14.0f %15.1f %+7.1f%% %6.3f %10.1f\n", $1, $2, $3, $4, $5, $6, $7, $8, e, $9, $10 }
    END { printf "MAPE %.1f%% max %.1f%%\n", sum / n, max }' "$ROWS"
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced
set output "$FIG/$NAME.png"
set title "Megatron-LM SC21 Table 1 on Selene (A100): TFLOP/s per GPU, paper and pipelab (dgx-a100, unfitted)"
set xlabel "model (billion parameters)"
set ylabel "TFLOP/s per GPU"
set yrange [0:*]
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
plot "$ROWS" using 7:xtic(1) title "paper", "" using 8 title "pipelab"
GP
    echo "figure: $FIG/$NAME.png"
fi
