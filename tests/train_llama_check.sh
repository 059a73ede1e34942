#!/usr/bin/env bash
# train_llama_check.sh HSR_RUN HSR SRC: hsr train --model llama end to end at
# test size on the default data, 4 ranks as 2 simulated nodes:
#  - the loss falls below 4.0 (from ln 256 = 5.55); the summary's ledger has
#    the activations it predicted;
#  - the export in Hugging Face's directory layout (--max-shard-size: shards,
#    the index, config.json) read by an independent reader
#    (tests/llama_st_check.py: json + struct) whose plain-Python Llama forward,
#    configured from config.json alone, gives the validation loss hsr train
#    printed; hsr eval of the directory equals it too;
#  - --init of the directory on 1 rank reproduces it bitwise (one step at lr 0);
#  - hsr sample repeats for a seed;
#  - the same weights without hsr's metadata (transformers' own file) evaluate
#    the same with --heads, the key/value heads read from k_proj's shape;
#  - --wrap linear makes the wrap diagnostic fire;
#  - hsr ckpt export of a checkpoint writes the same names and config.json;
#  - a run resumed from a checkpoint equals the uninterrupted one, bitwise;
#  - a llama file given to --model gpt, and bad shapes: exit 2 saying what.
set -u
run=$1; hsr=$2; src=$3
dir=$(mktemp -d /tmp/hsr-llama-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "train_llama_check: $*"; exit 1; }
small=(--model llama --layers 2 --heads 4 --kv-heads 2 --dim 32 --seq 16 --batch 16)

out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 40 --lr 1e-2 --val-every 20 \
      --val-windows 6 --log "$dir/log" --json "$dir/run.json" --export "$dir/hf" --max-shard-size 40KB \
      --ckpt "$dir/ck" --save-every 40 2>&1) || { echo "$out"; fail "train exit code $?"; }
echo "$out"
grep -q "model: llama, 2 layers, 4 heads (2 key/value), width 32 (MLP 88)" <<<"$out" || fail "no model line"
grep -q "exported: $dir/hf (safetensors, 21 tensors in [0-9]* files, config.json)" <<<"$out" || fail "no export line"
read -r val vstart vwin seq < <(python3 - "$dir/log" "$dir/run.json" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 40, len(lines)
vals = [l["val_loss"] for l in lines if "val_loss" in l]
assert len(vals) == 2 and all(math.isfinite(v) for v in vals), vals
last = sum(l["loss"] for l in lines[-5:]) / 5
assert lines[0]["loss"] > 5.0 and last < 4.0, f"loss {lines[0]['loss']:.3f} -> {last:.3f}: not below 4.0"
s = json.load(open(sys.argv[2]))
assert s["ledger"]["categories"]["activation"]["peak"] == s["activation_bytes_per_micro_batch"] > 0
d = s["data"]
print(repr(s["val_loss"]), d["val_start"], d["val_windows"], d["seq"])
PY
) || fail "log/summary check"
ls "$dir/hf"/model-0000*-of-0000*.safetensors "$dir/hf/model.safetensors.index.json" "$dir/hf/config.json" >/dev/null \
  || fail "no sharded layout with config.json"
data=$(grep -o "data '[^']*'" <<<"$out" | head -1 | sed "s/data '//; s/'$//")
python3 "$src/tests/llama_st_check.py" "$dir/hf" "$data" "$vstart" "$vwin" "$seq" "$val" || fail "independent reader"

python3 -c "import sys; open(sys.argv[2],'wb').write(open(sys.argv[1],'rb').read()[int(sys.argv[3]):])" "$data" "$dir/tail" "$vstart"
ev=$("$hsr" eval --init "$dir/hf" --data "$dir/tail" --seq "$seq" --windows "$vwin" --json) || fail "eval: $ev"
python3 -c "
import json, sys
e = json.loads(sys.argv[1]); want = float(sys.argv[2])
assert abs(e['loss'] - want) <= 1e-6 * want, f'hsr eval {e[\"loss\"]!r}, hsr train {want!r}'
print(f'train_llama_check: hsr eval {e[\"loss\"]:.7f} = hsr train {want:.7f}')" "$ev" "$val" || fail "eval != train"

# --init on one rank, one step at lr 0: the same tensors, bit for bit
"$hsr" train "${small[@]}" --steps 1 --lr 0 --init "$dir/hf" --export "$dir/hf2" --max-shard-size 40KB --no-progress \
  >"$dir/init.out" 2>&1 || { cat "$dir/init.out"; fail "train --init"; }
python3 - "$src/tests" "$dir/hf" "$dir/hf2" <<'PY' || fail "--init + export does not reproduce the weights"
import sys
sys.path.insert(0, sys.argv[1])
from llama_st_check import read_dir
(m1, t1), (m2, t2) = read_dir(sys.argv[2]), read_dir(sys.argv[3])
assert t1 == t2, "the tensors differ"
assert open(sys.argv[2] + "/config.json").read() == open(sys.argv[3] + "/config.json").read()
PY
echo "train_llama_check: --init on 1 rank reproduces the 4-rank export bitwise"

s1=$("$hsr" sample --init "$dir/hf" --prompt "The " --tokens 40 --seed 5) || fail "sample"
s2=$("$hsr" sample --init "$dir/hf" --prompt "The " --tokens 40 --seed 5)
[ "$s1" = "$s2" ] && [ "${#s1}" -ge 40 ] || fail "sample is not deterministic or too short"

# transformers' own file: the same tensors without hsr's __metadata__
python3 - "$src/tests" "$dir/hf" "$dir/plain.safetensors" <<'PY'
import json, struct, sys
sys.path.insert(0, sys.argv[1])
from llama_st_check import read_dir
_, t = read_dir(sys.argv[2])
hdr, data = {}, b""
for k, (shape, vals) in t.items():
    raw = struct.pack(f"<{len(vals)}f", *vals)
    hdr[k] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
j = json.dumps(hdr, separators=(",", ":")).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[3], "wb").write(struct.pack("<Q", len(j)) + j + data)
PY
ev2=$("$hsr" eval --init "$dir/plain.safetensors" --heads 4 --data "$dir/tail" --seq "$seq" --windows "$vwin" --json) \
  || fail "eval of a file without metadata: $ev2"
[ "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['loss'] == json.loads(sys.argv[2])['loss'])" "$ev" "$ev2")" = True ] \
  || fail "the file without metadata evaluates differently: $ev2 vs $ev"
"$hsr" train "${small[@]}" --steps 1 --lr 0 --init "$dir/plain.safetensors" --no-progress >/dev/null 2>&1 \
  || fail "--init of a file without metadata"
bad=$("$hsr" eval --init "$dir/plain.safetensors" --data "$dir/tail" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "give --heads" <<<"$bad" || fail "no n_head: rc $rc: $bad"
bad=$("$hsr" train --model gpt --init "$dir/hf" --steps 1 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "holds a llama model: give --model llama" <<<"$bad" || fail "llama weights for a gpt: rc $rc: $bad"
bad=$("$hsr" train --model llama --kv-heads 4 --init "$dir/hf" --steps 1 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "kv-heads 4, but --init" <<<"$bad" || fail "mismatched --kv-heads: rc $rc: $bad"

lin=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 4 --wrap linear --no-progress 2>&1) \
  || { echo "$lin"; fail "--wrap linear"; }
grep -q "WARNING: wrap granularity" <<<"$lin" || { echo "$lin"; fail "the wrap diagnostic did not fire for --wrap linear"; }
grep -q "per-linear wrapping: .* more than one unit per block" <<<"$lin" || fail "no cost against --wrap block"

# hsr ckpt export of the run's last checkpoint: the same names, the same config.json
"$hsr" ckpt export "$dir/ck" --safetensors "$dir/ckx" --max-shard-size 40KB >"$dir/ckx.out" 2>&1 \
  || { cat "$dir/ckx.out"; fail "ckpt export"; }
grep -q "config.json" "$dir/ckx.out" || fail "ckpt export wrote no config.json: $(cat "$dir/ckx.out")"
python3 - "$src/tests" "$dir/hf" "$dir/ckx" <<'PY' || fail "ckpt export differs from --export"
import sys
sys.path.insert(0, sys.argv[1])
from llama_st_check import read_dir
(m1, t1), (m2, t2) = read_dir(sys.argv[2]), read_dir(sys.argv[3])
assert t1 == t2, "the tensors differ"
assert open(sys.argv[2] + "/config.json").read() == open(sys.argv[3] + "/config.json").read(), "config.json differs"
PY
# a checkpointed llama resumed from its middle equals the uninterrupted run, bitwise
tiny=(--model llama --layers 1 --heads 2 --dim 16 --seq 8 --batch 4 --steps 4 --no-progress)
"$hsr" train "${tiny[@]}" --ckpt "$dir/A" --save-every 2 >"$dir/A.out" 2>&1 || { cat "$dir/A.out"; fail "checkpointed run"; }
"$hsr" train "${tiny[@]}" --ckpt "$dir/B" --resume "$dir/A/step-00000002" >"$dir/B.out" 2>&1 \
  || { cat "$dir/B.out"; fail "resumed run"; }
python3 "$src/tests/ckpt_read.py" compare "$dir/A" "$dir/B" || fail "the resumed llama differs from the uninterrupted one"
echo "train_llama_check: ok"
