#!/usr/bin/env bash
# ckpt_plan.sh HSR_RUN HSR: the engine-less planner (hsr ckpt plan) is the
# plan a real save uses. Three 4-rank saves (2 x 2 hybrid, the same with
# the outer shard, 1 x 4 fsdp): --against rebuilds each checkpoint's layout
# and mesh from its manifest, plans the save, and every tensor's ranges
# (elements, offsets, the rank's file) equal the manifest's, the outer shard
# read from the manifest; a version 1 manifest (which does not record it)
# planned with the wrong strategy (no outer shard) differs (exit 1); the load on the
# saving mesh, planned against the real manifest, reads every saved byte
# once, each rank its part from one file. Then a 64-rank
# mesh of gpt2-124m saved and loaded on 64 and on 128 ranks, and 8 -> 16
# ranks of llama3-8b: what each rank plans to read is what it holds, from
# one file, the saved ranges tile the model. No timing is asserted.
set -u
run=$1; hsr=$2
t=$(mktemp -d /tmp/hsr-ckpt-plan-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_plan: $*"; exit 1; }
train="train --model gpt --layers 2 --steps 1 --no-progress"
save() { # NAME ARGS...
  local n=$1; shift
  "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --ckpt "$t/$n" "$@" >"$t/$n.out" 2>&1 \
    || { cat "$t/$n.out"; fail "the save $n failed"; }
}
save H --strategy hybrid --shard 2
save O --strategy hybrid --shard 2 --outer-shard optim
save F --strategy fsdp --shard 4
for c in "H" "O --outer-shard optim" "F"; do
  set -- $c
  d=$1; shift
  "$hsr" ckpt plan --against "$t/$d" "$@" --json >"$t/$d.json" 2>"$t/$d.err" || { cat "$t/$d.err"; fail "$d: the plan differs"; }
  python3 - "$t/$d.json" <<'PY' || fail "$d: bad --against JSON"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["same"] is True and o["ranks"] == 4 and o["tensors"] > 0 and o["ranges"] >= o["tensors"], o
assert o["load_bytes"] == o["data_bytes"] > 0 and o["load_files_max"] == 1, o
PY
done
"$hsr" ckpt plan --against "$t/O" >"$t/O1.out" 2>&1 || { cat "$t/O1.out"; fail "the outer shard not read from the manifest"; }
cp -r "$t/O" "$t/V1"
python3 "$(dirname "$0")/ckpt_read.py" to-v1 "$t/V1" >/dev/null || fail "to-v1"
"$hsr" ckpt plan --against "$t/V1" --outer-shard optim >"$t/V1.out" 2>&1 || { cat "$t/V1.out"; fail "the version 1 manifest differs"; }
"$hsr" ckpt plan --against "$t/V1" >"$t/O2.out" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$t/O2.out"; fail "the outer-shard checkpoint planned without it: exit $rc, expected 1"; }
grep -q "the plan differs from the checkpoint: tensor" "$t/O2.out" || { cat "$t/O2.out"; fail "no difference named"; }

plan() { # NAME ARGS...
  local n=$1; shift
  "$hsr" ckpt plan "$@" --json >"$t/$n.json" 2>"$t/$n.err" || { cat "$t/$n.err"; fail "hsr ckpt plan $* failed"; }
}
plan p64 --ranks 64 --arch gpt2-124m
plan p128 --ranks 64 --arch gpt2-124m --load-ranks 128
plan p816 --ranks 8 --arch llama3-8b --load-ranks 16
plan h64 --shard 8 --replicate 8 --arch gpt2-124m --outer-shard optim
python3 - "$t" <<'PY' || fail "bad plan JSON"
import json, math, sys
d = sys.argv[1]
def load(n): return json.load(open(f"{d}/{n}.json"))
p = load("p64")
assert p["ranks"] == 64 and p["shard"] == 64 and p["replicate"] == 1, p
# gpt2-124m: 124,439,808 parameters, 12 x 12 + 4 tensors
assert p["params"] == 124439808, p
assert [r["rank"] for r in p["rows"]] == [0, 32, 63], p
for r in p["rows"]:
    # the same mesh: a rank reads back exactly what it wrote, from its own file
    assert r["load_pieces"] == r["save_pieces"] and r["load_files"] == 1, r
    assert r["load_spans"] == 3 * r["load_pieces"], r
    for k in ("save_plan_s", "load_plan_s"):
        assert math.isfinite(r[k]) and r[k] >= 0, r
assert p["manifest_ranges"] >= 148 and p["manifest_bytes"] > 0, p
q = load("p128")
assert q["load_ranks"] == 128 and [r["load_rank"] for r in q["rows"]] == [0, 64, 127], q
assert q["manifest_bytes"] == p["manifest_bytes"], (p, q)  # the same save
for r in q["rows"]:
    assert r["load_files"] == 1 and r["load_spans"] == 3 * r["load_pieces"], r
e = load("p816")
assert e["load_ranks"] == 16 and [r["load_rank"] for r in e["rows"]] == [0, 8, 15], e
for r in e["rows"]:
    assert 1 <= r["load_files"] <= 2 and r["load_pieces"] > 0, r
h = load("h64")
assert h["replicate"] == 8 and h["shard"] == 8 and h["outer_shard"] is True, h
for r in h["rows"]:
    assert r["save_pieces"] == r["load_pieces"] and r["load_files"] == 1, r
PY
echo "ckpt_plan: ok"
