#!/usr/bin/env bash
# topo_nccl_live.sh BUILD_DIR: on a GPU node, `hsr topo --compare-nccl` under
# hsr-run (one rank per GPU) makes NCCL dump its topology and compares it with
# hwloc's reading; the run must succeed and report per node. Exit 77 (skip)
# where hsr refuses with exit 2 because there is no GPU or no NCCL.
set -u
build=$1
n=1
if command -v nvidia-smi >/dev/null 2>&1; then
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || n=1
  [ "$n" -ge 1 ] || n=1
fi
out=$(env -u HSR_TOPO_XML "$build/hsr-run" -n "$n" -- "$build/hsr" topo --compare-nccl 2>&1)
rc=$?
echo "$out"
if [ "$rc" = 2 ] && grep -Eq "no NVIDIA GPU on this host|built without NCCL" <<<"$out"; then
  echo "topo_nccl_live: no GPU or no NCCL here (hsr refused with exit 2, as it should): skipped"
  exit 77
fi
[ "$rc" = 0 ] || { echo "topo_nccl_live: exit code $rc"; exit 1; }
grep -Eq "^node 0: hwloc .* vs NCCL .*: [0-9]+ difference" <<<"$out" || { echo "topo_nccl_live: no report for node 0"; exit 1; }
json=$(env -u HSR_TOPO_XML "$build/hsr-run" -n "$n" -- "$build/hsr" topo --compare-nccl --json 2>&1) || { echo "$json"; exit 1; }
python3 - "$json" <<'PY' || exit 1
import json, sys
o = json.loads(sys.argv[1].strip().splitlines()[-1])
node = o["nodes"][0]
assert node["b"]["source"] == "nccl-xml" and node["b"]["gpus"] >= 1, node["b"]
assert node["count"] == len(node["differences"])
print("topo_nccl_live: NCCL's dump read back, %d GPUs, %d differences" % (node["b"]["gpus"], node["count"]))
PY
