#!/usr/bin/env bash
# pipedream_planner.sh: PipeDream's planner (Narayanan et al., SOSP 2019) on the profiles the paper
# shipped (../shared/data/pipedream-profiles): the configuration chosen for 16 workers of Cluster A
# (4 servers x 4 V100) and of Cluster B (2 x 8), with the predicted speedup over data parallelism,
# beside the paper's Table 1 choices. Under a second. Skips (exit 0) when the profiles are absent.
# Flags: --db FILE (unused: the planner stores nothing), --plot-only (no-op).
NAME=pipedream_planner
source "$(dirname "$0")/lib.sh" "$@"
PROFILES=${PIPEDREAM_PROFILES:-../shared/data/pipedream-profiles}
if [ ! -d "$PROFILES" ]; then echo "$0: $PROFILES not found: skipped"; exit 0; fi
# model  cluster  paper's config  paper's speedup over DP (Table 1)
while read -r model cluster paper_cfg paper_speedup; do
    f=$PROFILES/$model.graph.txt
    [ -f "$f" ] || { echo "$model: $f missing, skipped"; continue; }
    out=$("$PL" partition --graph "$f" --hardware "$cluster" --workers 16 2>&1) || { echo "$model $cluster: $out"; continue; }
    cfg=$(printf '%s\n' "$out" | awk '/^config/ { print $2; exit }')
    dp=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9.]*\)x data parallelism.*/\1/p' | head -1)
    printf "%-10s %-10s pipelab %-10s %6sx over DP   paper %-8s %sx\n" "$model" "$cluster" "$cfg" "$dp" "$paper_cfg" "$paper_speedup"
done <<'TABLE'
vgg16 cluster-a 15-1 5.28
vgg16 cluster-b 15-1 2.98
alexnet cluster-a 15-1 4.92
alexnet cluster-b 15-1 2.04
resnet50 cluster-a 16 1
resnet50 cluster-b 16 1
gnmt cluster-a straight 1.46
TABLE
