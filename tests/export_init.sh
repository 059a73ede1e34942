#!/usr/bin/env bash
# export_init.sh HSR-RUN HSR: hsr train --export-init writes the weights the
# run starts from. On 2 ranks, one GPT step at learning rate 0 (AdamW then
# leaves every weight as it is) with --export-init A and --export B: every
# tensor of A equals B's bit for bit, A's __metadata__ says hsr_step 0 and B's
# 1, the rest of the metadata is equal; hsr train --init A reproduces the same
# first loss as the run from the seed.
set -u
run=$1 hsr=$2
T=$(mktemp -d /tmp/hsr-export-init.XXXXXX)
trap 'rm -rf "$T"' EXIT
small=(--model gpt --layers 2 --dim 32 --heads 2 --seq 16 --batch 4 --no-progress)
"$run" -n 2 -- "$hsr" train "${small[@]}" --steps 1 --lr 0 --export-init "$T/a.safetensors" --export "$T/b.safetensors" \
  --log "$T/a.jsonl" >"$T/a.out" 2>&1 || { cat "$T/a.out"; exit 1; }
grep -q "exported: $T/a.safetensors (safetensors, .* the initial weights)" "$T/a.out" || { cat "$T/a.out"; exit 1; }
"$run" -n 1 -- "$hsr" train "${small[@]}" --steps 1 --init "$T/a.safetensors" --log "$T/c.jsonl" >"$T/c.out" 2>&1 ||
  { cat "$T/c.out"; exit 1; }
python3 - "$T" <<'PY'
import json, struct, sys
T = sys.argv[1]
def read(p):
    b = open(p, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__")
    return {k: b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]] for k, v in h.items()}, meta
a, ma = read(f"{T}/a.safetensors")
b, mb = read(f"{T}/b.safetensors")
assert sorted(a) == sorted(b) and len(a) > 0, "the two files name different tensors"
diff = [k for k in a if a[k] != b[k]]
assert not diff, f"tensors differ after a step at lr 0: {diff[:3]}"
assert ma.pop("hsr_step") == "0" and mb.pop("hsr_step") == "1", "hsr_step: 0 for --export-init, 1 after one step"
assert ma == mb, f"metadata differ: {ma} vs {mb}"
la = json.loads(open(f"{T}/a.jsonl").readline())["loss"]
lc = json.loads(open(f"{T}/c.jsonl").readline())["loss"]
assert abs(la - lc) <= 1e-6 * abs(la), f"first loss from the seed {la} and from --init {lc}"
print(f"export_init: {len(a)} tensors equal, hsr_step 0 / 1, first loss {la:.6f} from the seed and from --init")
PY
