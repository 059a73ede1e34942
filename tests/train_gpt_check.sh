#!/usr/bin/env bash
# train_gpt_check.sh HSR_RUN HSR SRC: the GPT end to end at test size on the
# default data (the repository's text), 4 ranks as 2 simulated nodes:
#  - the loss falls below 4.0 (from ln 256 = 5.55) and the validation loss is
#    logged; the JSON summary has tokens/s, GFLOP/s and the GEMM probe;
#  - the export parses with an independent reader (tests/gpt_st_check.py:
#    json + struct) whose plain-Python GPT-2 forward gives the validation loss
#    hsr train printed;
#  - hsr eval of the export over the same windows equals it too;
#  - --init of the export on another mesh (1 rank) reproduces it bitwise (one
#    step at lr 0 leaves AdamW's weights unchanged);
#  - hsr sample generates the same text for the same seed;
#  - a file laid out like GPT-2's own (no hsr metadata, attention-mask buffers)
#    evaluates the same with --heads and loads with --init; an extra tensor fails;
#  - --wrap linear makes the wrap diagnostic fire, with the cost against block;
#  - a checkpointed GPT resumed from its middle: bitwise on the same mesh,
#    within tolerance on one rank;
#  - bad --init / --data / flags: exit 2 with what is wrong.
set -u
run=$1; hsr=$2; src=$3
dir=$(mktemp -d /tmp/hsr-gpt-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "train_gpt_check: $*"; exit 1; }
small=(--model gpt --layers 2 --heads 2 --dim 32 --seq 16 --batch 16)

out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 40 --lr 1e-2 --val-every 20 \
      --val-windows 6 --log "$dir/log" --json "$dir/run.json" --export "$dir/w.safetensors" 2>&1) || { echo "$out"; fail "train exit code $?"; }
echo "$out"
grep -q "mesh 2 x 2" <<<"$out" || fail "expected the default 2 x 2 hybrid mesh"
grep -q "^throughput: .* tokens/s" <<<"$out" || fail "no throughput line"
read -r val vstart vwin seq < <(python3 - "$dir/log" "$dir/run.json" <<'PY'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 40, len(lines)
vals = [l["val_loss"] for l in lines if "val_loss" in l]
assert len(vals) == 2 and all(math.isfinite(v) for v in vals), vals
last = sum(l["loss"] for l in lines[-5:]) / 5
assert lines[0]["loss"] > 5.0 and last < 4.0, f"loss {lines[0]['loss']:.3f} -> {last:.3f}: not below 4.0"
assert lines[0]["lr"] < lines[2]["lr"] and lines[-1]["lr"] < lines[10]["lr"], "no warm-up + cosine schedule"
s = json.load(open(sys.argv[2]))
for k in ("tokens_per_s", "gflops", "gemm_probe", "model_time_per_step_ms", "val_loss", "ledger", "wrap"):
    assert k in s, f"summary lacks {k}"
assert s["ledger"]["categories"]["activation"]["peak"] == s["activation_bytes_per_micro_batch"] > 0
d = s["data"]
print(repr(s["val_loss"]), d["val_start"], d["val_windows"], d["seq"])
PY
) || fail "log/summary check"
echo "train_gpt_check: validation loss $val over $vwin windows from byte $vstart"
data=$(grep -o "data '[^']*'" <<<"$out" | head -1 | sed "s/data '//; s/'$//")
python3 "$src/tests/gpt_st_check.py" "$dir/w.safetensors" "$data" "$vstart" "$vwin" "$seq" "$val" || fail "independent reader"

# hsr eval over the same windows (the held-out tail as its own file)
python3 -c "import sys; open(sys.argv[2],'wb').write(open(sys.argv[1],'rb').read()[int(sys.argv[3]):])" "$data" "$dir/tail" "$vstart"
ev=$("$hsr" eval --init "$dir/w.safetensors" --data "$dir/tail" --seq "$seq" --windows "$vwin" --json) || fail "eval: $ev"
python3 -c "
import json, sys
e = json.loads(sys.argv[1]); want = float(sys.argv[2])
assert e['windows'] == int(sys.argv[3]) and e['seq'] == int(sys.argv[4]), e
assert abs(e['loss'] - want) <= 1e-6 * want, f'hsr eval {e[\"loss\"]!r}, hsr train {want!r}'
print(f'train_gpt_check: hsr eval {e[\"loss\"]:.7f} = hsr train {want:.7f}')" "$ev" "$val" "$vwin" "$seq" || fail "eval != train"
# --logits: the logits whose cross-entropy is the loss it prints
evl=$("$hsr" eval --init "$dir/w.safetensors" --data "$dir/tail" --seq "$seq" --windows 2 --json --logits "$dir/logits.st") \
  || fail "eval --logits: $evl"
python3 - "$evl" "$dir/logits.st" "$dir/tail" "$seq" <<'PY' || fail "eval --logits: the logits do not give the loss"
import json, math, struct, sys
loss, T = json.loads(sys.argv[1])["loss"], int(sys.argv[4])
b = open(sys.argv[2], "rb").read()
(n,) = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n])
assert list(h) == ["logits"] and h["logits"]["shape"] == [2, T, 256] and h["logits"]["dtype"] == "F32", h
x = struct.unpack(f"<{2 * T * 256}f", b[8 + n:])
data = open(sys.argv[3], "rb").read()
tot = 0.0
for w in range(2):
    for t in range(T):
        row = x[(w * T + t) * 256:(w * T + t + 1) * 256]
        m = max(row)
        tot += m + math.log(sum(math.exp(v - m) for v in row)) - row[data[w * T + t + 1]]
assert abs(tot / (2 * T) - loss) <= 1e-5 * loss, (tot / (2 * T), loss)
PY

# --init on one rank, one step at lr 0: the same weights, bit for bit
"$hsr" train "${small[@]}" --steps 1 --lr 0 --init "$dir/w.safetensors" --export "$dir/w2.safetensors" --no-progress \
  >"$dir/init.out" 2>&1 || { cat "$dir/init.out"; fail "train --init"; }
# (byte for byte but for the metadata's hsr_step: the export of step 40, then of step 1 of the new run)
python3 - "$dir/w.safetensors" "$dir/w2.safetensors" <<'PY' || fail "--init + export does not reproduce the weights"
import json, struct, sys
def parts(p):
    b = open(p, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n], object_pairs_hook=lambda kv: kv)
    return dict(next(v for k, v in h if k == "__metadata__")), [kv for kv in h if kv[0] != "__metadata__"], b[8 + n:]
(m1, t1, b1), (m2, t2, b2) = parts(sys.argv[1]), parts(sys.argv[2])
assert t1 == t2 and b1 == b2, "the tensors (names, dtypes, shapes, offsets, bytes) differ"
assert m1["hsr_step"] == "40" and m2["hsr_step"] == "1", (m1, m2)
assert list(dict(m1, hsr_step="1").items()) == list(m2.items()), (m1, m2)
PY
echo "train_gpt_check: --init on 1 rank reproduces the 4-rank export bitwise"

s1=$("$hsr" sample --init "$dir/w.safetensors" --prompt "The " --tokens 40 --seed 5) || fail "sample"
s2=$("$hsr" sample --init "$dir/w.safetensors" --prompt "The " --tokens 40 --seed 5)
[ "$s1" = "$s2" ] && [ "${#s1}" -ge 40 ] || fail "sample is not deterministic or too short"

lin=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 4 --wrap linear --no-progress 2>&1) \
  || { echo "$lin"; fail "--wrap linear"; }
grep -q "WARNING: wrap granularity" <<<"$lin" || { echo "$lin"; fail "the wrap diagnostic did not fire for --wrap linear"; }
grep -q "per-linear wrapping: .* more than one unit per block" <<<"$lin" || fail "no cost against --wrap block"

# weights laid out like GPT-2's own file: no hsr metadata, its attention-mask buffers beside the parameters
python3 - "$dir/w.safetensors" "$dir/g2.safetensors" "$dir/extra.safetensors" "$dir/tf.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", b[:8])
h = json.loads(b[8:8 + n]); meta = h.pop("__metadata__"); buf = b[8 + n:]
def write(path, entries):  # entries: name -> (dtype, shape, bytes)
    hdr, data = {}, b""
    for k, (dt, shape, raw) in entries.items():
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    j = json.dumps(hdr, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + data)
e = {k: (v["dtype"], v["shape"], buf[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
write(sys.argv[4], {"transformer." + k: v for k, v in e.items()})  # save_pretrained's names
T = int(meta["n_ctx"])
for l in range(int(meta["n_layer"])):
    e[f"h.{l}.attn.bias"] = ("F32", [1, 1, T, T], struct.pack(f"<{T * T}f", *([1.0] * (T * T))))
write(sys.argv[2], e)
e["foo"] = ("F32", [1], struct.pack("<f", 1.0))
write(sys.argv[3], e)
PY
ev2=$("$hsr" eval --init "$dir/g2.safetensors" --heads 2 --data "$dir/tail" --seq "$seq" --windows "$vwin" --json) || fail "eval of a GPT-2 style file: $ev2"
[ "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['loss'] == json.loads(sys.argv[2])['loss'])" "$ev" "$ev2")" = True ] \
  || fail "the GPT-2 style file evaluates differently: $ev2 vs $ev"
"$hsr" train "${small[@]}" --steps 1 --lr 0 --init "$dir/g2.safetensors" --no-progress >/dev/null 2>&1 || fail "--init of a GPT-2 style file"
# transformers' save_pretrained names (transformer.wte.weight, ...): eval and --init read them
ev3=$("$hsr" eval --init "$dir/tf.safetensors" --heads 2 --data "$dir/tail" --seq "$seq" --windows "$vwin" --json) || fail "eval of transformers' names: $ev3"
[ "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['loss'] == json.loads(sys.argv[2])['loss'])" "$ev" "$ev3")" = True ] \
  || fail "transformers' names evaluate differently: $ev3 vs $ev"
"$hsr" train "${small[@]}" --steps 1 --lr 0 --init "$dir/tf.safetensors" --no-progress >/dev/null 2>&1 || fail "--init of transformers' names"
bad=$("$hsr" train "${small[@]}" --steps 1 --init "$dir/extra.safetensors" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "tensor 'foo' is not a parameter" <<<"$bad" || fail "an extra tensor: rc $rc: $bad"
bad=$("$hsr" eval --init "$dir/g2.safetensors" --data "$dir/tail" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "give --heads" <<<"$bad" || fail "no n_head: rc $rc: $bad"
bad=$("$hsr" train --model gpt --dim 48 --init "$dir/w.safetensors" --steps 1 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "dim 48, but --init" <<<"$bad" || fail "mismatched --init: rc $rc: $bad"
bad=$("$hsr" train --model gpt --data "$dir/none" --steps 1 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q -- "--data '$dir/none': No such file" <<<"$bad" || fail "missing --data: rc $rc: $bad"
bad=$("$hsr" eval --init "$dir/w.safetensors" --data "$dir/tail" --seq 16 --windows 100000 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "holds .* whole windows" <<<"$bad" || fail "too many --windows: rc $rc: $bad"
head -c 100 "$dir/w.safetensors" >"$dir/cut.safetensors"
bad=$("$hsr" eval --init "$dir/cut.safetensors" --data "$dir/tail" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "cut.safetensors" <<<"$bad" || fail "truncated file: rc $rc: $bad"
# checkpoints: the GPT's data position is the global sample index, so a run resumed from step 3 on the
# same mesh is bitwise the uninterrupted one (parameters, moments), and within tolerance on one rank
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 6 --ckpt "$dir/A" --save-every 3 \
  --no-progress >"$dir/A.out" 2>&1 || { cat "$dir/A.out"; fail "checkpointed run"; }
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 6 --ckpt "$dir/B" \
  --resume "$dir/A/step-00000003" --no-progress >"$dir/B.out" 2>&1 || { cat "$dir/B.out"; fail "resumed run"; }
python3 "$src/tests/ckpt_read.py" compare "$dir/A" "$dir/B" || fail "the resumed GPT differs from the uninterrupted one"
"$hsr" train "${small[@]}" --steps 6 --ckpt "$dir/C" --resume "$dir/A/step-00000003" --no-progress \
  >"$dir/C.out" 2>&1 || { cat "$dir/C.out"; fail "resumed on one rank"; }
python3 "$src/tests/ckpt_read.py" compare "$dir/A" "$dir/C" --tol 1e-4 || fail "the GPT resumed on one rank differs"
echo "train_gpt_check: ok"
