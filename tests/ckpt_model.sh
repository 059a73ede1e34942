#!/usr/bin/env bash
# ckpt_model.sh HSR_RUN HSR: the model travels with the checkpoint, ROOT/latest
# is accepted wherever a checkpoint is, and Hugging Face's sharded layout,
# checked by an independent reader (tests/ckpt_read.py: json and struct only):
#  - a 2-rank GPT run's checkpoint records the model; hsr ckpt export of
#    ROOT/latest is byte for byte the run's own --export (the same
#    __metadata__: hsr.model, the config, hsr_step, hsr_version);
#  - --max-shard-size from hsr train --export and hsr ckpt export: the same
#    files; every tensor's bytes equal the single file's, the index's
#    total_size and weight_map right, every shard with the metadata, filled
#    in order; a size below every tensor gives a file per tensor;
#  - hsr eval and sample of the file, the index and the directory need no
#    flags and agree; --init of the directory reproduces the weights;
#  - --resume ROOT/latest continues; a run whose model differs only where the
#    shapes cannot tell (the heads) is refused, naming it;
#  - a checkpoint without a model (as hsr wrote them before) still loads and
#    exports, saying what is missing, and eval then asks for --heads;
#  - a format version 1 manifest (an object per range, a number per block
#    checksum) verifies, inspects, exports byte for byte alike and resumes
#    on another mesh;
#  - a missing shard, an index naming a tensor twice, a weight_map leaving
#    the directory: each refused, named.
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-ckpt-model-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_model: $*"; exit 1; }
small=(--model gpt --layers 2 --heads 2 --dim 32 --seq 16 --batch 16 --no-progress)
ver=$("$hsr" version | awk 'NR == 1 {print $2}')

"$run" -n 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 4 --ckpt "$t/A" --export "$t/w.st" \
  >"$t/A.out" 2>&1 || { cat "$t/A.out"; fail "the run failed"; }
"$run" -n 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 4 --export "$t/tw" --max-shard-size 20KB \
  >"$t/T.out" 2>&1 || { cat "$t/T.out"; fail "the sharded --export run failed"; }
grep -q "exported: $t/tw (safetensors, 28 tensors in 7 files, config.json)" "$t/T.out" || { cat "$t/T.out"; fail "sharded export line"; }
grep -q '"model_type":[[:space:]]*"gpt2"' "$t/tw/config.json" || fail "no GPT-2 config.json beside the shards"
py st-meta "$t/w.st" hsr.model=gpt n_layer=2 n_head=2 n_embd=32 n_ctx=16 vocab_size=256 hsr_step=4 \
  "hsr_version=$ver" || fail "train --export's metadata"
insp=$("$hsr" ckpt inspect "$t/A/latest") || fail "inspect ROOT/latest: $insp"
grep -q "^model gpt: n_layer 2, n_head 2, n_embd 32, n_ctx 16, vocab_size 256$" <<<"$insp" || fail "inspect: $insp"
"$hsr" ckpt inspect "$t/A/latest" --json | python3 -c "
import json, sys
m = json.load(sys.stdin)['model']
assert m == {'kind': 'gpt', 'config': {'n_layer': 2, 'n_head': 2, 'n_embd': 32, 'n_ctx': 16, 'vocab_size': 256}}, m" \
  || fail "inspect --json's model"
"$hsr" ckpt verify "$t/A/latest" >/dev/null || fail "verify ROOT/latest"

# the checkpoint's export is the run's, byte for byte; sharded, the same files from either command
"$hsr" ckpt export "$t/A/latest" --safetensors "$t/e.st" >/dev/null || fail "export of ROOT/latest"
cmp "$t/w.st" "$t/e.st" || fail "hsr ckpt export differs from hsr train --export"
"$hsr" ckpt export "$t/A/latest" --safetensors "$t/ew" --max-shard-size 20KB >"$t/E.out" || fail "sharded ckpt export"
grep -q "(7 files and model.safetensors.index.json, config.json)" "$t/E.out" || fail "$(cat "$t/E.out")"
py st-index "$t/ew" "$t/w.st" 20000 || fail "the sharded ckpt export"
py st-index "$t/tw" "$t/w.st" 20000 || fail "the sharded train export"
diff -r "$t/ew" "$t/tw" >/dev/null || fail "hsr ckpt export and hsr train --export wrote different shards"
"$hsr" ckpt export "$t/A" --safetensors "$t/each" --max-shard-size 1 >/dev/null || fail "export, 1-byte shards"
py st-index "$t/each" "$t/w.st" 1 || fail "a size below every tensor"
[ "$(ls "$t/each" | grep -c '^model-.*-of-00028\.safetensors$')" = 28 ] || fail "1-byte shards: not 28 files"
"$hsr" ckpt export "$t/A" --safetensors "$t/one" --max-shard-size 1GB >/dev/null || fail "export, one shard"
cmp "$t/one/model.safetensors" "$t/w.st" && [ "$(ls "$t/one" | tr '\n' ' ')" = "config.json model.safetensors " ] \
  || fail "one shard: not model.safetensors alone (and config.json)"

# eval and sample read every form without flags
head -c 4000 "$here/../README.md" >"$t/text"
e1=$("$hsr" eval --init "$t/w.st" --data "$t/text" --json) || fail "eval of the file: $e1"
for form in "$t/ew" "$t/ew/model.safetensors.index.json" "$t/each" "$t/one"; do
  e2=$("$hsr" eval --init "$form" --data "$t/text" --json) || fail "eval of $form: $e2"
  [ "$e1" = "$e2" ] || fail "eval of $form: $e2, of the file: $e1"
done
s1=$("$hsr" sample --init "$t/w.st" --prompt "ab" --tokens 30 --seed 3) || fail "sample of the file"
s2=$("$hsr" sample --init "$t/ew" --prompt "ab" --tokens 30 --seed 3) || fail "sample of the directory"
[ "$s1" = "$s2" ] || fail "sample differs between the file and the shards"
"$hsr" train --model gpt --init "$t/ew" --steps 1 --lr 0 --ckpt "$t/I" --no-progress >"$t/I.out" 2>&1 \
  || { cat "$t/I.out"; fail "--init of the shards (no model flags)"; }
py st-equal "$t/w.st" "$t/I" || fail "--init of the shards did not reproduce the weights"
echo "ckpt_model: eval, sample and --init read the file, the index and the directory alike, without flags"

# --resume ROOT/latest; a model that differs where the shapes agree is refused
"$run" -n 2 --launcher mpirun -- "$hsr" train "${small[@]}" --steps 6 --ckpt "$t/B" --resume "$t/A/latest" \
  >"$t/B.out" 2>&1 || { cat "$t/B.out"; fail "--resume ROOT/latest"; }
grep -q "resume: $t/A/step-00000004: step 4" "$t/B.out" || { cat "$t/B.out"; fail "--resume ROOT/latest: not step 4"; }
bad=$("$hsr" train --model gpt --layers 2 --heads 1 --dim 32 --seq 16 --batch 16 --steps 6 --resume "$t/A" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "the checkpoint's gpt model has n_head 2, this run's has n_head 1" <<<"$bad" \
  || fail "another head count: rc $rc: $bad"

# a checkpoint as hsr saved them before they recorded the model
cp -r "$t/A" "$t/O"
py drop-model "$t/O" >/dev/null || fail "drop-model"
out=$("$hsr" ckpt export "$t/O" --safetensors "$t/o.st" 2>&1) || fail "export of a checkpoint without a model: $out"
grep -q "records no model (saved by hsr $ver, before checkpoints carried their model)" <<<"$out" || fail "no note: $out"
py st-meta "$t/o.st" hsr_step=4 "hsr_version=$ver" || fail "the old checkpoint's export metadata"
grep -q "^model: none recorded" <<<"$("$hsr" ckpt inspect "$t/O" --no-verify)" || fail "inspect of the old checkpoint"
bad=$("$hsr" eval --init "$t/o.st" --data "$t/text" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "give --heads" <<<"$bad" || fail "eval without a model: rc $rc: $bad"
e3=$("$hsr" eval --init "$t/o.st" --heads 2 --data "$t/text" --json) && [ "$e3" = "$e1" ] || fail "eval --heads: $e3"
"$hsr" train "${small[@]}" --steps 5 --ckpt "$t/C" --resume "$t/O" >"$t/C.out" 2>&1 \
  || { cat "$t/C.out"; fail "--resume of a checkpoint without a model"; }

# a checkpoint in format version 1
cp -r "$t/A" "$t/V1"
py to-v1 "$t/V1" >/dev/null || fail "to-v1"
"$hsr" ckpt verify "$t/V1" >"$t/V1.out" 2>&1 || { cat "$t/V1.out"; fail "verify of a version 1 manifest"; }
grep -q "(format 1," <<<"$("$hsr" ckpt inspect "$t/V1/latest")" || fail "inspect of a version 1 manifest"
grep -q "(format 2," <<<"$insp" || fail "a new checkpoint is not format 2: $insp"
"$hsr" ckpt export "$t/V1" --safetensors "$t/v1.st" >/dev/null 2>&1 || fail "export of a version 1 manifest"
cmp -s "$t/v1.st" "$t/w.st" || fail "the version 1 manifest's export differs from the run's"
py compare "$t/A" "$t/V1" >/dev/null || fail "the version 1 manifest reads other values"
"$hsr" train "${small[@]}" --steps 5 --ckpt "$t/D" --resume "$t/V1" >"$t/D.out" 2>&1 \
  || { cat "$t/D.out"; fail "--resume of a version 1 manifest on 1 rank"; }
echo "ckpt_model: a format version 1 manifest verifies, inspects, exports and resumes"

# broken indexes, each named
cp -r "$t/ew" "$t/m1"
rm "$t/m1/model-00003-of-00007.safetensors"
bad=$("$hsr" eval --init "$t/m1" --data "$t/text" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "shard 'model-00003-of-00007.safetensors' (the weight_map puts .* there, e.g. 'h.0.mlp.c_fc.bias') is missing" <<<"$bad" \
  || fail "a missing shard: rc $rc: $bad"
bad=$("$hsr" train --model gpt --init "$t/m1" --steps 1 2>&1); rc=$?
# weights that are there but broken: exit 1, as docs/commands.md's table says (issue 27)
[ "$rc" = 1 ] && grep -q "is missing" <<<"$bad" || fail "--init with a missing shard: rc $rc: $bad"
cp -r "$t/ew" "$t/m2"
python3 - "$t/m2/model.safetensors.index.json" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace('"weight_map": {', '"weight_map": {\n    "wte.weight": "model-00002-of-00007.safetensors",', 1)
open(p, "w").write(s)
PY
bad=$("$hsr" eval --init "$t/m2" --data "$t/text" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "the weight_map names tensor 'wte.weight' twice" <<<"$bad" || fail "a tensor twice: rc $rc: $bad"
cp -r "$t/ew" "$t/m3"
sed -i 's|"wte.weight": "model-00001-of-00007.safetensors"|"wte.weight": "../ew/model-00001-of-00007.safetensors"|' \
  "$t/m3/model.safetensors.index.json"
bad=$("$hsr" sample --init "$t/m3" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "weight_map\['wte.weight'\] = '../ew/model-00001-of-00007.safetensors' is not a plain file name" <<<"$bad" \
  || fail "a path out of the directory: rc $rc: $bad"
echo "ckpt_model: ok"
