#!/usr/bin/env bash
# megatron_table1.sh: Megatron-LM's Table 1 (Narayanan et al., "Efficient Large-Scale Language
# Model Training on GPU Clusters Using Megatron-LM", SC21, arXiv 2104.04473): ten GPT models from
# 1.7B to 1T parameters on 32 to 3,072 A100 GPUs of Selene. Simulates every row on the dgx-a100
# preset with the layout of NVIDIA's launch script for the table (tensor T, pipeline P, data
# D = GPUs / (T P), microbatch, global batch, interleaving where the script sets
# --num-layers-per-virtual-pipeline-stage, full activation recomputation, fp16), prints the
# predicted TFLOP/s per GPU beside the paper's with the signed error per row, the signed mean
# error, and, last, a line "MAPE X% max Y%"; draws results/out/figures/megatron_table1.png.
# About a second.
# Nothing here is fitted to the table: every constant comes from cost_models/hardware/dgx-a100.ini
# (its sources are cited there). Published numbers: experiments/published/megatron_sc21_table1.tsv.
# Flags: --plot-only, --db FILE (see experiments/lib.sh; the sweep is too short to shard).
# Environment: MEGATRON_TABLE1_SET="KEY=VALUE ..." passes --set overrides of the hardware to every
# row (for sensitivity studies; the headline uses none). Each row also prints pipeline rank 0's
# iteration by part: weight GEMMs, attention core, elementwise, TP collectives, DP gradient
# synchronization, optimizer, the blocking pipeline exchanges (each stage's transfer and
# all-gather, forward and backward), idle time (the bubble and waits for data) and the rest
# (embedding, the embedding all-reduce), as % of the iteration.
NAME=megatron_table1
source "$(dirname "$0")/lib.sh" "$@"
[ "$SHARDED$MERGE_N" = 00 ] || usage_error "the sweep takes about a second: no --shard or --merge"
TABLE=experiments/published/megatron_sc21_table1.tsv
ROWS=$OUT/$NAME.rows.tsv
SEQ=2048
VOCAB=51200
if [ "$PLOT_ONLY" = 0 ]; then
    printf 'params_B\tgpus\ttp\tpp\tdp\tchunks\tpaper_tflops\tpipelab_tflops\tmfu\tpeak_mem_gb\titeration_s\tgemm\tattention\telementwise\ttp_comm\tdp_sync\toptimizer\texchange\tidle\tother\n' > "$ROWS"
    grep -v '^#' "$TABLE" | while IFS=$'\t' read -r pb heads hidden layers tp pp gpus batch tflops pct agg mbs lpv; do
        dp=$((gpus / (tp * pp)))
        sets=()
        for kv in ${MEGATRON_TABLE1_SET:-}; do sets+=(--set "$kv"); done
        chunks=1
        [ "$lpv" = "-" ] || chunks=$((layers / (pp * lpv)))
        csv=$(point "$PL" simulate --model "transformer:layers=$layers,hidden=$hidden,heads=$heads,seq=$SEQ,vocab=$VOCAB" \
            --hardware dgx-a100 --tp "$tp" --pp "$pp" --gpus "$gpus" --chunks "$chunks" --microbatch-size "$mbs" \
            --global-batch "$batch" --recompute full ${sets[@]+"${sets[@]}"} --tag "$NAME" --db "$DB" --format csv)
        echo "$csv" | awk -F, -v OFS='\t' -v pb="$pb" -v g="$gpus" -v tp="$tp" -v pp="$pp" -v dp="$dp" -v v="$chunks" -v paper="$tflops" '
            NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
            NR == 2 { it = $col["iteration_time_s"]
                print pb, g, tp, pp, dp, v, paper, $col["tflops_per_gpu"], $col["mfu"], $col["peak_mem_bytes"] / 1e9, it,
                    100 * $col["rank0_gemm_s"] / it, 100 * $col["rank0_attention_s"] / it, 100 * $col["rank0_elementwise_s"] / it,
                    100 * $col["rank0_tp_comm_s"] / it, 100 * $col["rank0_dp_sync_s"] / it, 100 * $col["rank0_optimizer_s"] / it,
                    100 * $col["rank0_exchange_s"] / it, 100 * $col["rank0_idle_s"] / it, 100 * $col["rank0_other_s"] / it }' >> "$ROWS"
    done
fi
awk -F'\t' 'NR == 1 { next }
    { e = 100 * ($8 / $7 - 1); a = e < 0 ? -e : e; sum += a; signed += e; if (a > max) max = a; n++
      if (n == 1) printf "%9s %6s %3s %3s %4s %2s %6s %8s %7s %6s %7s | %% of iteration: %5s %5s %5s %5s %5s %5s %5s %5s %5s\n", "params_B", "GPUs", "T", "P", "D", "v", "paper", "pipelab", "error", "MFU", "mem GB", "gemm", "attn", "elem", "tp", "dp", "opt", "xchg", "idle", "other"
      printf "%9s %6d %3d %3d %4d %2d %6.0f %8.1f %+6.1f%% %6.3f %7.1f |                 %5.1f %5.1f %5.1f %5.1f %5.1f %5.1f %5.1f %5.1f %5.1f\n", $1, $2, $3, $4, $5, $6, $7, $8, e, $9, $10, $12, $13, $14, $15, $16, $17, $18, $19, $20 }
    END { printf "TFLOP/s per GPU: paper, pipelab (dgx-a100%s), signed error\n", ENVIRON["MEGATRON_TABLE1_SET"] == "" ? ", unfitted" : ", --set " ENVIRON["MEGATRON_TABLE1_SET"]
          printf "signed mean error %+.1f%%\n", signed / n
          printf "MAPE %.1f%% max %.1f%%\n", sum / n, max }' "$ROWS"
NOTE="unfitted"
[ -z "${MEGATRON_TABLE1_SET:-}" ] || NOTE="--set $MEGATRON_TABLE1_SET"
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 900,560 noenhanced
set output "$FIG/$NAME.png"
set title "Megatron-LM SC21 Table 1 on Selene (A100): TFLOP/s per GPU, paper and pipelab (dgx-a100, $NOTE)"
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
