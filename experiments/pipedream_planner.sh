#!/usr/bin/env bash
# pipedream_planner.sh: PipeDream's planner (Narayanan et al., "PipeDream: Generalized Pipeline
# Parallelism for DNN Training", SOSP 2019) on the profiles the paper's repository shipped
# (../shared/data/pipedream-profiles): the configuration `pipelab partition` chooses for 16 workers
# of Cluster A (4 servers x 4 V100) and of Cluster B (2 x 8), with the predicted speedup over data
# parallelism. Under a second. Skips (exit 0) when the profiles are absent.
# Published numbers: none printed. The paper's Table 1 (the configurations PipeDream chose, e.g.
# "15-1" for VGG-16 on Cluster A as issue 7 recalls, and the measured speedups over data
# parallelism) could not be verified against a stored copy of the paper with the search tool
# (pages, docs and code corpora; the stored copies of the paper hold its first page only, and the
# arXiv 1806.03377 summaries found describe a different, earlier table). Rather than keep figures
# written from memory, the paper column reads "n/a (not verified)". Note also that Table 1's
# speedups are measured (epoch time and time to accuracy), while pipelab prints the planner's
# predicted throughput ratio: not the same quantity even once verified.
# Flags: --db FILE (unused: the planner stores nothing), --plot-only (no-op).
NAME=pipedream_planner
source "$(dirname "$0")/lib.sh" "$@"
PROFILES=${PIPEDREAM_PROFILES:-../shared/data/pipedream-profiles}
if [ ! -d "$PROFILES" ]; then echo "$0: $PROFILES not found: skipped"; exit 0; fi
printf "%-10s %-10s %-12s %-36s %s\n" model cluster workers "pipelab: config, predicted speedup" "paper (Table 1)"
for model in vgg16 alexnet resnet50 gnmt; do
    f=$PROFILES/$model.graph.txt
    [ -f "$f" ] || { echo "$model: $f missing, skipped"; continue; }
    for cluster in cluster-a cluster-b; do
        out=$("$PL" partition --graph "$f" --hardware "$cluster" --workers 16 2>&1) || { echo "$model $cluster: $out"; continue; }
        cfg=$(printf '%s\n' "$out" | awk '/^config/ { print $2; exit }')
        dp=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9.]*\)x data parallelism.*/\1/p' | head -1)
        printf "%-10s %-10s %-12s %-36s %s\n" "$model" "$cluster" 16 "$cfg, ${dp}x over DP" "n/a (not verified)"
    done
done
