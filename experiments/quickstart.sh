#!/usr/bin/env bash
# quickstart.sh: the main job (the README's first command runs it). In about 30 s on a 2-core
# machine (under 2 minutes even when the cores are shared) it:
#   1. draws unit-time timelines of 1f1b and zb-h1 (4 ranks, 8 microbatches) and lowers 1f1b
#      with explicit communication to a .sched file and to PyTorch's CSV (checked back);
#   2. profiles this CPU: F, I, W and STEP of the executor's dense block (width 256, 8 blocks) on
#      both cores at once, as the 2-rank runs will use them, and the replicas' all-reduce (its
#      ring's latency and bandwidth, fitted to the executor's own all-reduce on 2 threads, and,
#      where mpirun runs, to MPI's between 2 processes);
#   3. partitions that model into 2 balanced stages from the profile, and plans it for 2 workers
#      with PipeDream's planner (stage split and replicas: on this machine's free links it picks
#      data parallelism, "2", or a pipeline "1-1");
#   4. simulates gpipe, 1f1b and zb-h1 on 2 ranks, 8 microbatches, with those costs (a RECV
#      posts and the compute that reads the data waits, as in the executor's workers), and the
#      planned configuration with 1F1B-RR and a flush per iteration (PipeDream-Flush);
#   5. runs the same four for real on 2 ranks (one CPU thread per rank or replica, real
#      training; a replicated stage's replicas all-reduce their gradients over the mailboxes),
#      each predicted again from the profile its own workers measure between its passes (this
#      machine's speed can drift within seconds: the profile of step 2 was measured earlier; a
#      replicated run times its all-reduce after its passes, so REDUCE_GRAD is predicted too),
#      and, where mpirun runs, the planned configuration again as MPI processes (predicted from
#      MPI's all-reduce, timed after its passes by its processes);
#   6. compares each run with its own prediction (iteration time, throughput, bubble, memory,
#      MAPE), and action class by action class (F, B, STEP, SEND/RECV, REDUCE_GRAD: predicted,
#      measured, signed error in percent and in ms);
#   7. draws zb-h1's predicted and measured timelines and the accuracy plot (gnuplot).
# Everything lands in results/out/quickstart.db (made afresh each run) and the figures in
# results/out/figures/. gnuplot is looked for first, as `pipelab plot` looks for it
# ($PIPELAB_GNUPLOT, a path or a program on PATH; else gnuplot on PATH): without it (setup.sh
# installs gnuplot-nox) steps 1-6 still run, step 7 is skipped with a note, and the exit status
# is 0 (`pipelab plot` draws the figures from the database later). Measured times depend on
# what else the cores are doing: other load stretches the measured runs, not the prediction (see
# experiments/validate_cpu.sh).
# PIPELAB may name the pipelab binary (default build/cli/pipelab).
set -euo pipefail
cd "$(dirname "$0")/.."
PL=${PIPELAB:-build/cli/pipelab}
# mpirun, when it is here and pipelab has the MPI transport (as root, Open MPI needs leave)
MPIRUN=$(command -v mpirun || true)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
OUT=results/out
FIG=$OUT/figures
DB=$OUT/quickstart.db
TAG=quickstart
mkdir -p "$FIG"
if [ ! -x "$PL" ]; then echo "$0: $PL not built (run ./setup.sh)" >&2; exit 1; fi
source experiments/cpu_share.sh
# gnuplot, found by pipelab plot's rule (results/plot.c, store_gnuplot_find): a value with a '/'
# is a path, a bare name a program on PATH (type -P: no functions, builtins or folders)
GNUPLOT=$(type -P "${PIPELAB_GNUPLOT:-gnuplot}" || true)
NO_GNUPLOT="no gnuplot (${PIPELAB_GNUPLOT:+PIPELAB_GNUPLOT=}${PIPELAB_GNUPLOT:-gnuplot} is not an executable program on PATH): install it (Debian/Ubuntu: apt-get install gnuplot-nox) or set PIPELAB_GNUPLOT"
[ -n "$GNUPLOT" ] || echo "$0: note: $NO_GNUPLOT; steps 1-6 run, the figures of step 7 are skipped" >&2
rm -f "$DB" "$DB-wal" "$DB-shm"
t0=$(date +%s)

echo "== 1. schedules in unit time: 1f1b and zb-h1, 4 ranks, 8 microbatches"
"$PL" schedule --kind 1f1b --ranks 4 --microbatches 8
echo
"$PL" schedule --kind zb-h1 --ranks 4 --microbatches 8
echo
echo "-- 1f1b lowered: explicit SEND/RECV, REDUCE_GRAD and STEP, as .sched and as PyTorch CSV"
"$PL" schedule --kind 1f1b --ranks 4 --microbatches 8 --lowered --to sched -o "$OUT/1f1b_p4_m8_lowered.sched"
"$PL" schedule --from "$OUT/1f1b_p4_m8_lowered.sched" --check
"$PL" schedule --from "$OUT/1f1b_p4_m8_lowered.sched" --to torch-csv -o "$OUT/1f1b_p4_m8_comms.csv"
"$PL" schedule --from "$OUT/1f1b_p4_m8_comms.csv" --check
echo "wrote $OUT/1f1b_p4_m8_lowered.sched and $OUT/1f1b_p4_m8_comms.csv"

H=256 L=8 M=8
PROF=$OUT/quickstart.profile.csv
PART=$OUT/quickstart.partition
PLAN=$OUT/quickstart.planned.partition
echo
echo "== 2. profile this CPU: the executor's block, width $H, $L blocks, microbatch 16"
if [ -n "$MPIRUN" ] && "$MPIRUN" -np 2 --oversubscribe "$PL" profile --width $H --depth $L --concurrency 2 \
        --transport mpi -o "$PROF"; then
    HAVE_MPI=1
else
    [ -z "$MPIRUN" ] || echo "(mpirun could not run pipelab's MPI profile: the MPI runs are left out)"
    HAVE_MPI=0
    "$PL" profile --width $H --depth $L --concurrency 2 -o "$PROF"
fi
echo
echo "== 3. partition it into 2 stages (balanced split of the profiled costs)"
"$PL" partition --profile "$PROF" --workers 2 --method balance -o "$PART"
echo
echo "-- and PipeDream's planner on 2 workers: stage split and replicas per stage"
"$PL" partition --profile "$PROF" --workers 2 --method pipedream -o "$PLAN"
# the plan's stages and its configuration (replicas per stage, e.g. 2 or 1-1)
PSTAGES=$(grep -c '^stage ' "$PLAN")
PCONF=$(awk '/^stage /{ printf "%s%s", sep, $6; sep = "-" }' "$PLAN")
PWORKERS=$(awk '/^stage /{ n += $6 } END { print n }' "$PLAN")
echo
echo "== 4. simulate gpipe, 1f1b and zb-h1 on 2 ranks, $M microbatches, with the profiled costs"
for kind in gpipe 1f1b zb-h1; do
    "$PL" simulate --kind $kind --ranks 2 --microbatches $M --model "$PROF" --partition "$PART" --trace \
        --tag $TAG-sim --db "$DB" --format csv >/dev/null
done
echo "-- the planned configuration $PCONF: 1f1b with 1F1B-RR, $PSTAGES stage(s)"
"$PL" simulate --kind 1f1b --ranks "$PSTAGES" --microbatches $M --model "$PROF" --partition "$PLAN" --trace \
    --tag $TAG-sim --db "$DB" --format csv >/dev/null
"$PL" db list --db "$DB" --tag $TAG-sim --limit 4
echo
echo "== 5. run them for real: 2 ranks (threads), width $H, $L blocks, $M microbatches of 16 rows;"
echo "   each predicted from the profile its workers measure between its passes"
run_all() {
    for kind in gpipe 1f1b zb-h1; do
        echo "-- $kind"
        "$PL" run --kind $kind --ranks 2 --microbatches $M --width $H --depth $L --timed 10 --profile-reps 40 --trace \
            --tag $TAG --db "$DB" | sed -n '/^ *measured/,/^  predicted from/p'
    done
    echo "-- the planned configuration $PCONF (--partition $PLAN, 1f1b, each replica a rank)"
    "$PL" run --kind 1f1b --ranks "$PSTAGES" --microbatches $M --width $H --depth $L --partition "$PLAN" --timed 10 \
        --profile-reps 40 --trace --tag $TAG --db "$DB" | sed -n '/^ *measured/,/^  predicted from/p'
    if [ "$HAVE_MPI" = 1 ]; then
        echo "-- the planned configuration $PCONF as $PWORKERS MPI processes (mpirun -np $PWORKERS)"
        "$MPIRUN" -np "$PWORKERS" --oversubscribe "$PL" run --transport mpi --kind 1f1b --ranks "$PSTAGES" \
            --microbatches $M --width $H --depth $L --partition "$PLAN" --timed 10 --profile-reps 40 --trace \
            --tag $TAG-mpi --db "$DB" | sed -n '/^ *measured/,/^  predicted from/p'
    fi
}
measure_others run_all
echo "(other processes used ${OTHERS}% of the CPUs meanwhile; their load stretches the measured times)"
echo
echo "== 6. compare each run with its own prediction, and action class by action class"
"$PL" compare --db "$DB" --tag $TAG --actions
if [ "$HAVE_MPI" = 1 ]; then
    echo "-- the MPI run"
    "$PL" compare --db "$DB" --tag $TAG-mpi --actions
fi
echo
if [ -z "$GNUPLOT" ]; then
    echo "== 7. figures: skipped, $NO_GNUPLOT; then draw them from $DB with pipelab plot (or rerun)"
    echo
    echo "quickstart done in $(($(date +%s) - t0)) s: database $DB, no figures (no gnuplot)"
    exit 0
fi
echo "== 7. figures"
run_of() { "$PL" db list --db "$DB" --tag "$1" --limit 0 --format csv | awk -F, -v k="$2" 'NR > 1 && $4 == k && $6 == "zb-h1" { print $2; exit }'; }
"$PL" plot timeline "$(run_of $TAG-sim simulated)" --db "$DB" -o "$FIG/timeline-$TAG-zb-h1-predicted.png" \
    --title "zb-h1 predicted from this CPU's profile: 2 ranks, $M microbatches, width $H"
"$PL" plot timeline "$(run_of $TAG measured)" --db "$DB" -o "$FIG/timeline-$TAG-zb-h1-measured.png" \
    --title "zb-h1 measured on this CPU: 2 ranks, $M microbatches, width $H (the median of 10 timed passes)"
"$PL" plot accuracy --db "$DB" --tag $TAG -o "$FIG/accuracy-$TAG.png" \
    --title "Predicted against measured iteration time (gpipe, 1f1b, zb-h1; 2 CPU ranks)"
echo
echo "quickstart done in $(($(date +%s) - t0)) s: database $DB, figures in $FIG/"
