#!/usr/bin/env bash
# pipedream_planner.sh: PipeDream's planner (Narayanan et al., "PipeDream: Generalized Pipeline
# Parallelism for DNN Training", SOSP 2019) on the profiles the paper's repository shipped
# (cost_models/profiles/pipedream). About 15 seconds.
#
# 1. Cluster A (4 servers x 4 V100) and Cluster B (2 x 8), 16 workers: the configuration
#    `pipelab partition` chooses and its predicted speedup over data parallelism. The paper's
#    Table 1 (its configurations, e.g. 15-1 for VGG-16 on Cluster A, and its measured speedups)
#    could not be checked against a stored copy of the paper, so its column reads "n/a (not
#    verified)"; its speedups are measured (epoch time, time to accuracy), not a predicted
#    throughput ratio, in any case.
# 2. Two levels, 4 servers x 4 devices, 4 GB/s inside a server and 1 GB/s between, no latency,
#    PipeDream's all-reduce formula (--allreduce pipedream): for the eleven profiles PipeDream's
#    optimizer takes as they are (its README has inception_v3 and the NASNets compressed first),
#    the plan of the exact program (--hierarchy exact) and PipeDream's level-by-level plan
#    (--hierarchy pipedream: the one optimizer_graph_hierarchical.py finds), each with its time
#    per stage, PipeDream's plan also rated by the exact program's cost model; then both plans
#    simulated (`pipelab simulate --kind pipedream`, asynchronous 1F1B with weight stashing,
#    16 microbatches per iteration, the simulator's ring all-reduce), time per minibatch, and
#    which is faster by how much. The simulations read copies of the profiles whose Input node
#    has no time: PipeDream's profiler stores the data-loading wait there (635.9 ms for AlexNet),
#    which the planners drop and the simulator would run on stage 0. A '*' marks a PipeDream plan
#    whose flat form (partition file, simulator: each stage on consecutive devices) is not
#    PipeDream's placement (4x(3-1) runs 3-1 on every server; the flat 12-4 puts stage 0 on
#    servers 0-2 and stage 1 on server 3): what is rated and simulated there is the flat form.
# Tables on stdout and in results/out/pipedream_planner.txt.
# Flags: --db FILE (unused: the planner and these simulations store nothing), --plot-only (no-op).
NAME=pipedream_planner
source "$(dirname "$0")/lib.sh" "$@"
PROFILES=cost_models/profiles/pipedream
WORK=$OUT/$NAME
mkdir -p "$WORK"
REPORT=$OUT/$NAME.txt
exec > >(tee "$REPORT")

echo "== PipeDream's planner, 16 workers of the paper's clusters"
printf "%-10s %-10s %-12s %-36s %s\n" model cluster workers "pipelab: config, predicted speedup" "paper (Table 1)"
for model in vgg16 alexnet resnet50 gnmt; do
    f=$PROFILES/$model.graph.txt
    for cluster in cluster-a cluster-b; do
        out=$("$PL" partition --graph "$f" --hardware "$cluster" --workers 16 2>&1)
        cfg=$(printf '%s\n' "$out" | awk '/^config/ { print $2; exit }')
        dp=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9.]*\)x data parallelism.*/\1/p' | head -1)
        printf "%-10s %-10s %-12s %-36s %s\n" "$model" "$cluster" 16 "$cfg, ${dp}x over DP" "n/a (not verified)"
    done
done

HW=(--hardware cluster-a --set link.intra.bandwidth=4e9 --set link.inter.bandwidth=1e9
    --set link.intra.latency=0 --set link.inter.latency=0)
MICROBATCHES=16
MODELS="alexnet vgg16 resnet18 resnet50 resnet101 resnext50 resnext101 densenet121 squeezenet1_0 gnmt gnmt_large"

# Plans model $1 with hierarchy $2 into $WORK/$1.$2.part; prints the partition's JSON. Memory is
# not planned for (PipeDream's optimizer ignores it by default): the notes that a plan needs more
# than a device holds are dropped, anything else on stderr stays.
plan() {
    "$PL" partition --graph "$WORK/$1.graph.txt" "${HW[@]}" --allreduce pipedream --workers 16 \
        --hierarchy "$2" --format json -o "$WORK/$1.$2.part" 2> >(grep -v '^pipelab partition: note:' >&2)
}

# Prints the simulated time per minibatch (ms) of the partition file $2 of model $1.
simulate_ms() {
    local stages
    stages=$(grep -c '^stage' "$2")
    "$PL" simulate --kind pipedream --ranks "$stages" --microbatches "$MICROBATCHES" --model "$WORK/$1.graph.txt" \
        "${HW[@]}" --partition "$2" --no-db --format json |
        jq -r --argjson m "$MICROBATCHES" '.iteration_time_s / $m * 1e3'
}

echo
echo "== two levels: 4 servers x 4 devices, 4 GB/s inside a server, 1 GB/s between, 16 workers"
echo "   exact, pipedream: each planner's time per stage in ms (pipedream: PipeDream's level-by-level cost"
echo "   model); rated: PipeDream's plan under the exact program's cost model; sim: simulated ms per minibatch"
printf "%-13s | %8s | %8s %8s | %8s %8s  %-19s | %-14s  %s\n" model exact pipedream rated "sim ex." "sim pd" \
    faster "exact plan" "pipedream plan (flat form)"
differ=0 pd_faster=0 n=0
for model in $MODELS; do
    sed -E 's/^(node[0-9]+ -- Input[^ ]* -- forward_compute_time=)[0-9.]+/\10.000/' \
        "$PROFILES/$model.graph.txt" > "$WORK/$model.graph.txt"
    ex=$(plan "$model" exact)
    pd=$(plan "$model" pipedream)
    ex_cfg=$(jq -r .config <<<"$ex")
    ex_ms=$(jq -r '.bottleneck_s * 1e3' <<<"$ex")
    pd_cfg=$(jq -r .hierarchy_config <<<"$pd")
    pd_flat=$(jq -r .config <<<"$pd")
    pd_ms=$(jq -r '.hierarchy_time_s * 1e3' <<<"$pd")
    pd_rated=$(jq -r '.bottleneck_s * 1e3' <<<"$pd")
    mark=$(jq -r 'if .hierarchy_consecutive then "" else "*" end' <<<"$pd")
    sim_ex=$(simulate_ms "$model" "$WORK/$model.exact.part")
    sim_pd=$(simulate_ms "$model" "$WORK/$model.pipedream.part")
    faster=$(awk -v a="$sim_ex" -v b="$sim_pd" 'BEGIN {
        if (a == b) print "same"; else if (a < b) printf "exact by %.1f%%", (b / a - 1) * 100;
        else printf "pipedream by %.1f%%", (a / b - 1) * 100 }')
    n=$((n + 1))
    [ "$ex_cfg" = "$pd_flat" ] || differ=$((differ + 1))
    case "$faster" in pipedream*) pd_faster=$((pd_faster + 1)) ;; esac
    printf "%-13s | %8.3f | %8.3f %8.3f | %8.3f %8.3f%-1s %-19s | %-14s  %s (%s)\n" "$model" "$ex_ms" "$pd_ms" \
        "$pd_rated" "$sim_ex" "$sim_pd" "$mark" "$faster" "$ex_cfg" "$pd_cfg" "$pd_flat"
done
echo "plans differ for $differ of $n profiles; PipeDream's plan simulates faster for $pd_faster"
echo "(* the flat form simulated is not PipeDream's placement; see the header of $0)"
