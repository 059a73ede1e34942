#!/usr/bin/env bash
# boot_absent.sh RUN HSR mpirun|srun: rank 1 of 4 exits 0 before it joins the
# job (no PMIx at all). Under mpirun the others name it at once from the
# launcher's process table (HSR_BOOT_TIMEOUT is 300 s: CTest's bound fails a
# run that waits for it); srun has no such table: the rank that did not arrive
# is named when HSR_BOOT_TIMEOUT (5 s here) ends, by every rank that waited
# (mpirun ends the others as soon as the first one exits). The job exits 1.
set -u
run=$1 hsr=$2 l=$3
if [ "$l" = mpirun ]; then
  export HSR_BOOT_TIMEOUT=300
  want='boot allgather: rank 1 \(host [^,]+, pid [0-9]+\) exited without joining the job'
else
  export HSR_BOOT_TIMEOUT=5
  want='boot allgather: rank 1 \(1 of 4\) did not arrive within HSR_BOOT_TIMEOUT=5 s'
fi
# shellcheck disable=SC2016
out=$("$run" --launcher "$l" -n 4 -- bash -c '[ "${PMIX_RANK:-$SLURM_PROCID}" = 1 ] && exit 0; exec "$0" info' "$hsr" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 1 ] || { echo "boot_absent: exit $rc, expected 1"; exit 1; }
n=$(grep -cE "$want" <<<"$out")
need=1; [ "$l" = srun ] && need=3
[ "$n" -ge "$need" ] || { echo "boot_absent: $n of the 3 waiting ranks said /$want/ (expected $need)"; exit 1; }
echo "boot_absent: $l: $n waiting rank(s) named rank 1"
