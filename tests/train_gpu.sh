#!/usr/bin/env bash
# train_gpu.sh HSR: `hsr train --device cuda` for a few steps on one GPU
# (NCCL world of one rank, cuBLAS model), the MLP then the GPT; checks the
# exit code, the JSON log and that the loss falls. Exit 77 (skip) when no GPU is usable: then hsr
# train must refuse with exit 2 and say why.
set -u
hsr=$1
log=$(mktemp /tmp/hsr-train-gpu-XXXXXX.jsonl)
trap 'rm -f "$log"' EXIT
out=$("$hsr" train --device cuda --layers 3 --dim 64 --steps 20 --batch 64 --lr 3e-3 --log "$log" --no-progress 2>&1)
rc=$?
echo "$out"
if [ "$rc" = 2 ] && grep -Eq "no CUDA device|built without CUDA" <<<"$out"; then
  echo "train_gpu: no usable GPU (hsr train refused with exit 2, as it should): skipped"
  exit 77
fi
[ "$rc" = 0 ] || { echo "train_gpu: exit code $rc"; exit 1; }
grep -q "CUDA (NCCL)" <<<"$out" || { echo "train_gpu: the run did not report the CUDA device"; exit 1; }
python3 - "$log" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 20, f"{len(lines)} log lines, expected 20"
for i, l in enumerate(lines):
    assert l["step"] == i + 1, l
    assert math.isfinite(l["loss"]) and math.isfinite(l["grad_norm"]), l
first = sum(l["loss"] for l in lines[:3]) / 3
last = sum(l["loss"] for l in lines[-3:]) / 3
assert last < first, f"loss did not fall: {first:.4f} -> {last:.4f}"
print(f"train_gpu: loss {first:.4f} -> {last:.4f} over {len(lines)} steps")
PY
[ $? = 0 ] || exit 1
# the GPT on the GPU: cuBLAS, the layer kernels, the tied head through the root's view
out=$("$hsr" train --device cuda --model gpt --layers 2 --heads 2 --dim 64 --seq 32 --steps 30 --lr 1e-2 \
      --log "$log" --no-progress 2>&1) || { echo "$out"; echo "train_gpu: gpt exit code $?"; exit 1; }
echo "$out"
python3 - "$log" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 30 and all(math.isfinite(l["loss"]) for l in lines), len(lines)
first, last = lines[0]["loss"], sum(l["loss"] for l in lines[-5:]) / 5
assert last < first - 1.0, f"gpt loss did not fall: {first:.4f} -> {last:.4f}"
assert any("val_loss" in l for l in lines)
print(f"train_gpu: gpt loss {first:.4f} -> {last:.4f}")
PY
