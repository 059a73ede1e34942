#!/usr/bin/env bash
# two_slurms.sh DIR PORT: a second test Slurm on this host (as another build
# tree starts) beside the running one ($SLURM_CONF): a step in each at the
# same time, both launch and run (before slurm-up.sh gave each its own job
# ids and PMIx folder, the second one's launch failed).
set -u
dir=$1; port=$2
here=$(cd "$(dirname "$0")" && pwd)
first=${SLURM_CONF:?two_slurms: needs the running test Slurm in SLURM_CONF}
"$here/slurm-up.sh" "$dir" "$port" >/dev/null || { echo "two_slurms: the second Slurm did not start"; exit 1; }
trap '"$here/slurm-down.sh" "$dir"' EXIT
out=$(mktemp -d "${TMPDIR:-/tmp}/hsr-two-slurms-XXXXXX")
trap '"$here/slurm-down.sh" "$dir"; rm -rf "$out"' EXIT
SLURM_CONF=$first srun --mpi=pmix -n 2 bash -c 'sleep 3; echo "ran $SLURM_PROCID"' >"$out/a" 2>&1 &
a=$!
sleep 1
SLURM_CONF=$dir/slurm.conf srun --mpi=pmix -n 2 bash -c 'echo "ran $SLURM_PROCID"' >"$out/b" 2>&1
wait "$a"
ok=1
for x in a b; do
  n=$(grep -c '^ran [01]$' "$out/$x")
  [ "$n" = 2 ] || { ok=0; echo "two_slurms: Slurm $x ran $n of 2 tasks:"; cat "$out/$x"; }
done
[ $ok = 1 ] && echo "two_slurms: both steps ran"
[ $ok = 1 ]
