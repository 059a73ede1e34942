#!/usr/bin/env bash
# nccl_check.sh HSR_RUN MR_NCCL: the NCCL backend test on as many ranks as there
# are GPUs, up to 4 (NCCL allows one rank per GPU: four ranks on a one-GPU box
# would fail to create the communicator, not test it). Without a GPU mr_nccl
# exits 77 (skipped).
set -u
run=$1; prog=$2
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${n:-0}" -ge 1 ] || n=1
[ "$n" -le 4 ] || n=4
echo "nccl_check: $n rank(s), one per GPU"
exec "$run" --launcher mpirun -n "$n" -- "$prog"
