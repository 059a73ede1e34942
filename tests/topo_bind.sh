#!/usr/bin/env bash
# topo_bind.sh BUILD_DIR XML [LAUNCHER]: hsr-run --bind auto with 2 ranks on a host
# described by XML (2 NUMA nodes: cpu 0 and cpu 1) must pin local rank 0 to
# cpu 0 and local rank 1 to cpu 1.
set -u
build=$1; xml=$2; launcher=${3:-mpirun}
if [ "$(nproc --all)" -lt 2 ]; then echo "needs 2 cpus"; exit 77; fi
out=$(HSR_TOPO_XML="$xml" "$build/hsr-run" --launcher "$launcher" -n 2 --bind auto -- \
  bash -c 'echo "lr=${OMPI_COMM_WORLD_LOCAL_RANK:-$SLURM_LOCALID} $(grep Cpus_allowed_list: /proc/self/status | tr -s "\t" " ")"' 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "topo_bind: hsr-run exited $rc"; exit 1; }
grep -q "^lr=0 Cpus_allowed_list: 0$" <<<"$out" || { echo "topo_bind: rank 0 not on cpu 0"; exit 1; }
grep -q "^lr=1 Cpus_allowed_list: 1$" <<<"$out" || { echo "topo_bind: rank 1 not on cpu 1"; exit 1; }
echo "topo_bind: OK"
