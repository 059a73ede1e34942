#!/usr/bin/env bash
# init_mesh.sh HSR_RUN HSR: `hsr train --init` into sharded meshes equals the
# single-rank load, bit for bit, from a file laid out as other tools lay it
# out (tests/st_relayout.py: the header in one order, the bytes in another,
# some tensors BF16). Each run takes one step at lr 0 (AdamW then leaves the
# weights as they are) and exports; every export must hold the file's values
# (an independent reader, json + struct) and equal the single-rank one. The
# file comes from a run of another seed, so a rank that kept its own
# initialisation, or read a slice from the wrong place, shows up. The same
# weights in Hugging Face's sharded form (three shards, each laid out so,
# and the index) load the same, from the directory and from the index.
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/st_relayout.py" "$@"; }
t=$(mktemp -d "${TMPDIR:-/tmp}/hsr-init-mesh-XXXXXX")
trap 'rm -rf "$t"' EXIT
fail() { echo "init_mesh: $*"; exit 1; }
gpt=(--model gpt --layers 2 --heads 2 --dim 40 --seq 16 --batch 16 --no-progress --val-windows 2)

"$hsr" train "${gpt[@]}" --seed 7 --steps 2 --export "$t/src.safetensors" >"$t/src.out" 2>&1 \
  || { cat "$t/src.out"; fail "the source run failed"; }
py relayout "$t/src.safetensors" "$t/other.safetensors" --seed 3 --bf16-every 3 || fail "relayout"
# the same tensors (the same ones BF16) in Hugging Face's sharded form, each shard laid out so too
py shard "$t/src.safetensors" "$t/hf" --files 3 --seed 5 --bf16-every 3 || fail "shard"
py same "$t/other.safetensors" "$t/hf" >/dev/null || fail "the sharded form does not hold the file's values"

# name | launcher prefix | flags | --init
cases=(
  "1 rank|||other.safetensors"
  "fsdp 1x4|$run -n 4 --launcher mpirun --|--shard 4|other.safetensors"
  "hybrid 2x2, 2 nodes|$run -n 4 --nodes 2 --launcher mpirun --||other.safetensors"
  "fsdp 1x4 over 2 nodes, partial:2, bf16 compute|$run -n 4 --nodes 2 --launcher mpirun --|--shard 4 --reshard partial:2 --param-dtype bf16|other.safetensors"
  "zero2 1x2|$run -n 2 --launcher mpirun --|--strategy zero2|other.safetensors"
  "ddp 2x1|$run -n 2 --launcher mpirun --|--strategy ddp --shard 1|other.safetensors"
  "1 rank, 3 Hugging Face shards|||hf"
  "hybrid 2x2, 2 nodes, 3 Hugging Face shards (the index)|$run -n 4 --nodes 2 --launcher mpirun --||hf/model.safetensors.index.json"
)
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r name pre flags init <<<"$c"
  # shellcheck disable=SC2086
  $pre "$hsr" train "${gpt[@]}" $flags --init "$t/$init" --steps 1 --lr 0 --export "$t/out$i.safetensors" \
    >"$t/out$i.log" 2>&1 </dev/null || { cat "$t/out$i.log"; fail "$name: the run failed"; }
  py same "$t/other.safetensors" "$t/out$i.safetensors" >/dev/null || fail "$name: the weights are not the file's"
  cmp -s "$t/out0.safetensors" "$t/out$i.safetensors" || fail "$name: the export differs from the single-rank load's"
  echo "init_mesh: $name: the file's weights, as the single-rank load"
  i=$((i + 1))
done
echo "init_mesh: ok (${#cases[@]} meshes)"
