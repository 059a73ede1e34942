#!/usr/bin/env bash
# train_check.sh HSR_RUN HSR: the README's main job (docs/install.md) at test size on 4 ranks as
# 2 simulated nodes; checks the exit code, the per-step JSON log (one line per
# step, counts per group) and that the loss falls.
set -u
run=$1; hsr=$2
log=$(mktemp /tmp/hsr-train-XXXXXX.jsonl)
trap 'rm -f "$log"' EXIT
out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train --layers 3 --dim 32 --steps 30 --batch 64 \
      --log "$log" 2>&1); rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "train_check: exit code $rc"; exit 1; }
grep -q "mesh 2 x 2" <<<"$out" || { echo "train_check: expected the default 2 x 2 hybrid mesh"; exit 1; }
python3 - "$log" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 30, f"{len(lines)} log lines, expected 30"
for i, l in enumerate(lines):
    assert l["step"] == i + 1, l
    for k in ("loss", "grad_norm", "lr", "step_ms"):
        assert k in l, f"missing {k}"
    c = l["calls"]
    # hybrid 2 x 2, reshard full, root kept: 4 units -> 4 + 3 gathers, 4 reduce-scatters,
    # 4 replicate all-reduces and the norm all-reduce
    assert c["shard"]["all_gather"] == 7, c
    assert c["shard"]["reduce_scatter"] == 4, c
    assert c["replicate"]["all_reduce"] == 4, c
    assert c["shard"]["all_reduce"] == 1, c
first = sum(l["loss"] for l in lines[:3]) / 3
last = sum(l["loss"] for l in lines[-3:]) / 3
assert last < 0.9 * first, f"loss did not fall: {first} -> {last}"
print(f"train_check: ok, loss {first:.4f} -> {last:.4f}")
PY
