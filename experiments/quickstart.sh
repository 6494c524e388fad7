#!/usr/bin/env bash
# quickstart.sh: the main job. Generates, validates and draws a few pipeline schedules
# (gpipe, 1f1b, interleaved, zb-h1, dualpipev), lowers one with explicit communication and
# converts it to PyTorch's CSV; when the simulator is built it also simulates them into
# results/out/pipelab.db. Takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PL=${PIPELAB:-build/cli/pipelab}
OUT=results/out
mkdir -p "$OUT"

for kind in gpipe 1f1b zb-h1; do
    echo "== $kind, 4 ranks, 8 microbatches"
    "$PL" schedule --kind "$kind" --ranks 4 --microbatches 8
    echo
done
echo "== interleaved, 4 ranks, 8 microbatches, 2 chunks per rank"
"$PL" schedule --kind interleaved --ranks 4 --microbatches 8 --chunks 2
echo
echo "== dualpipev, 4 ranks, 10 microbatches (V placement, overlapped F and B)"
"$PL" schedule --kind dualpipev --ranks 4 --microbatches 10
echo

echo "== 1f1b lowered: explicit SEND/RECV, REDUCE_GRAD and STEP"
"$PL" schedule --kind 1f1b --ranks 4 --microbatches 8 --lowered --to sched -o "$OUT/1f1b_p4_m8_lowered.sched"
"$PL" schedule --from "$OUT/1f1b_p4_m8_lowered.sched" --check
"$PL" schedule --from "$OUT/1f1b_p4_m8_lowered.sched" --to torch-csv -o "$OUT/1f1b_p4_m8_comms.csv"
"$PL" schedule --from "$OUT/1f1b_p4_m8_comms.csv" --check
echo "wrote $OUT/1f1b_p4_m8_lowered.sched and $OUT/1f1b_p4_m8_comms.csv"

if "$PL" --help | grep -q '^  simulate'; then
    echo
    echo "== simulate gpipe, 1f1b and zb-h1 (tF=1ms, tI=tW=1ms, 4 ranks, 8 microbatches)"
    for kind in gpipe 1f1b zb-h1; do
        "$PL" simulate --kind "$kind" --ranks 4 --microbatches 8 --tf 0.001 --ti 0.001 --tw 0.001 \
            --tag quickstart --db "$OUT/pipelab.db"
    done
fi
if "$PL" --help | grep -q '^  db'; then
    echo
    echo "== runs recorded in $OUT/pipelab.db"
    "$PL" db list --db "$OUT/pipelab.db" --tag quickstart --limit 10
fi
