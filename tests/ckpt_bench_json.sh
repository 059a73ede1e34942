#!/usr/bin/env bash
# ckpt_bench_json.sh HSR_RUN HSR: hsr ckpt bench on 4 ranks as 2 nodes (2 x 2
# hybrid) at a small size: every figure of --json present, finite and
# positive where it is a time, the load read once, the async save's steps
# taken. No timing is asserted (speed is the benchmark's, docs/checkpoints.md).
set -u
run=$1; hsr=$2
t=$(mktemp -d /tmp/hsr-ckpt-bench-XXXXXX)
trap 'rm -rf "$t"' EXIT
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" ckpt bench --size 6M --units 4 --shard 2 --repeat 1 --steps 2 \
  --step-ms 20 --dir "$t" --json "$t/b.json" >"$t/out" 2>&1 || { cat "$t/out"; echo "ckpt_bench_json: the bench failed"; exit 1; }
cat "$t/out"
python3 - "$t/b.json" <<'PY' || { echo "ckpt_bench_json: bad JSON"; exit 1; }
import json, math, sys
o = json.load(open(sys.argv[1]))
assert o["ranks"] == 4 and o["replicate"] == 2 and o["shard"] == 2, o
times = ["disk_seq_write_s", "disk_parallel_write_s", "disk_share_write_s", "save_s", "save_blocked_s", "save_data_s",
         "disk_seq_read_s", "disk_parallel_read_s", "load_s", "load_data_s", "load_held_s", "load_held_data_s", "staging_copy_s", "async_blocked_s",
         "async_stage_s", "async_commit_s", "async_write_s", "step_s", "step_during_write_s"]
for k in times:
    assert k in o and math.isfinite(o[k]) and o[k] > 0, (k, o.get(k))
for k in ["async_blocked_vs_copy", "async_blocked_vs_stage", "async_step_slowdown", "async_write_vs_parallel_write", "load_vs_parallel_read",
          "load_held_vs_parallel_read"]:
    assert math.isfinite(o[k]), (k, o[k])
assert o["async_blocked_s"] >= o["async_stage_s"], o
assert o["load_reads"] == 1 and o["load_held_reads"] == 1 and o["steps"] == 2, o
assert o["step_s"] >= 0.02, o  # the waits are in the steps
PY
echo "ckpt_bench_json: ok"
