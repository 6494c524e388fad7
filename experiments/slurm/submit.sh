#!/usr/bin/env bash
# submit.sh: submits a sharded sweep to Slurm: a job array of N tasks, each one shard of SCRIPT
# (shard.sbatch), and a merge job (merge.sbatch) that starts once every task has succeeded
# (afterok). Prints both job ids. Run it from the directory the jobs should start in (the
# repository root for the default paths); FLAGS go to SCRIPT, SBATCH_* variables to sbatch.
#   experiments/slurm/submit.sh 8 experiments/sweep_bubble.sh
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N SCRIPT [FLAGS...]" >&2; exit 2; }
[[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "$0: N wants a whole number >= 1, got '$1'" >&2; exit 2; }
here=$(dirname "$0")
shards=$1
shift
array=$(sbatch --parsable --array="0-$((shards - 1))" "$here/shard.sbatch" "$@")
array=${array%%;*} # --parsable prints "id" or "id;cluster"
merge=$(sbatch --parsable --dependency="afterok:$array" "$here/merge.sbatch" "$shards" "$@")
echo "shards: job array ${array} (${shards} tasks); merge: job ${merge%%;*} after all succeed"
