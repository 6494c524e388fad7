#!/usr/bin/env bash
# bench/sim_diff.sh: runs a grid of `pipelab simulate` and `pipelab schedule` commands with two
# binaries and compares their outputs (metrics, traces, errors) byte for byte.
# usage: bench/sim_diff.sh OLD_PIPELAB NEW_PIPELAB   (exit 1 when any output differs)
set -u
old=$1 new=$2
bad=0 n=0
dir=$(cd "$(dirname "$0")/.." && pwd)
run() { # runs one command with both binaries and compares stdout, stderr and the exit code
    n=$((n + 1))
    local a b
    a=$("$old" "$@" 2>&1; echo "rc=$?")
    b=$("$new" "$@" 2>&1; echo "rc=$?")
    if [ "$a" != "$b" ]; then
        bad=$((bad + 1))
        echo "DIFF: $*"
        diff <(echo "$a") <(echo "$b") | head -5
    fi
}
kinds="gpipe 1f1b pipedream 2bw interleaved looped-bfs zb-h1 zb-h2 zbv dualpipev"
for k in $kinds; do
    for pm in "2 2" "4 8" "3 7" "8 16"; do
        set -- $pm
        p=$1 m=$2
        base="simulate --kind $k --ranks $p --microbatches $m --no-db"
        [ "$k" = interleaved ] || [ "$k" = looped-bfs ] && base="$base --chunks 2"
        for cfg in "" "--tcomm 0.1" "--tcomm 0.1 --blocking-comm" "--tf 1 --ti 1 --tw 1 --tcomm 0.3 --tstep 0.5" \
            "--recompute full --stash-bytes 100 --param-bytes 10 --capacity 500" \
            "--replicas 2 --tcomm 0.2 --bytes 1e6 --bandwidth 1e9" "--replicas-stage 0=3 --tcomm 0.2" \
            "--bytes 1e6 --bandwidth 1e9 --inter-bandwidth 1e8 --ranks-per-node 2 --shared-inter-link" \
            "--bytes 1e6 --bandwidth 1e9 --inter-bandwidth 1e8 --ranks-per-node 2" \
            "--cv 0.3 --seed 7" "--tcomm 0.05 --tstep 0.2 --stash-bytes 7 --param-bytes 3"; do
            run $base $cfg --trace # the lowered schedule
            run $base $cfg --format json # compute-only where the flow engine serves it
        done
        run schedule --kind $k --ranks $p --microbatches $m --lowered --to sched $([ "$k" = interleaved ] || [ "$k" = looped-bfs ] && echo --chunks 2)
    done
done
for f in "$dir"/tests/bad/*.sched "$dir"/tests/bad/*.csv "$dir"/tests/golden/*.sched "$dir"/tests/golden/*.csv; do
    [ -e "$f" ] || continue
    run simulate --from "$f" --no-db --trace
    run simulate --from "$f" --no-db --trace --tcomm 0.1 --blocking-comm
    run simulate --from "$f" --no-db --format json --tcomm 0.1
done
run simulate --kind 1f1b --ranks 64 --microbatches 256 --no-db --tcomm 0.1 --trace
run simulate --kind zb-h1 --ranks 64 --microbatches 256 --no-db --tcomm 0.1 --format csv
run simulate --kind interleaved --chunks 4 --ranks 16 --microbatches 64 --iterations 3 --no-db --tcomm 0.1 --tstep 0.1 --format json
run simulate --kind 1f1b --ranks 8 --microbatches 16 --no-db --model uniform:layers=16,fwd_s=1e-3,param_bytes=1e6,out_bytes=1e5,stash_bytes=1e5 --hardware dgx-a100 --format json
echo "sim_diff: $n commands, $bad differ"
[ "$bad" = 0 ]
