#!/usr/bin/env bash
# ckpt_train.sh HSR_RUN HSR: hsr train --ckpt / --resume across meshes.
#   A  2 x 2 hybrid, 12 steps (warm-up + cosine LR, clipping), a checkpoint every 6
#   B  resumed from A's step 6 on the same mesh: steps 7-12 and the step-12
#      checkpoint (master, m, v) bitwise equal to A's, loss and grad norm too
#   E  A again with --async-save: the same log lines and step-6 and step-12
#      checkpoints bitwise; F resumed from E's step 6 with --async-save: = A
#   C  resumed on one rank, D on 2 x 4 (8 ranks) with partial:2: within tolerance
#   G  one rank, 12 steps; H resumed from G's step 6 on 2 x 2: within tolerance
#   --keep 2 leaves the newest two; hsr ckpt inspect / verify; a corrupted
#   checkpoint refused by hsr ckpt verify (exit 1) and by --resume on every rank.
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-ckpt-train-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_train: $*"; exit 1; }
train="train --layers 2 --dim 24 --classes 6 --steps 12 --batch 32 --warmup 3 --lr-min 3e-4 --clip 0.5 --no-progress"
r4() { "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train "$@"; }

r4 --ckpt "$t/A" --save-every 6 --log "$t/A.jsonl" >"$t/A.out" 2>&1 || { cat "$t/A.out"; fail "run A failed"; }
grep -q "mesh 2 x 2" "$t/A.out" || fail "A is not on the 2 x 2 mesh"
py latest "$t/A" step-00000012 || fail "A's latest"
r4 --ckpt "$t/B" --resume "$t/A/step-00000006" --log "$t/B.jsonl" >"$t/B.out" 2>&1 || { cat "$t/B.out"; fail "B failed"; }
grep -E "^resume: " "$t/B.out"
py compare "$t/A" "$t/B" || fail "B is not bitwise equal to A"
nt() { sed 's/"step_ms":[^,]*,//; s/"tokens_per_s":[^,]*,//; s/"gflops":[^,]*,//'; } # drop the timings
diff <(tail -n 6 "$t/A.jsonl" | nt) <(nt <"$t/B.jsonl") >/dev/null \
  || fail "steps 7-12 of B (loss, grad norm, lr, counts) differ from A's"
echo "ckpt_train: B = A bitwise (parameters, moments, loss, grad norm)"

r4 --ckpt "$t/E" --save-every 6 --async-save --log "$t/E.jsonl" >"$t/E.out" 2>&1 || { cat "$t/E.out"; fail "E (--async-save) failed"; }
grep -q "^checkpoint: step 6 -> .*writing in the background" "$t/E.out" || { cat "$t/E.out"; fail "E did not save step 6 in the background"; }
[ "$(grep -c "committed in the background" "$t/E.out")" = 2 ] || { cat "$t/E.out"; fail "E: not two commits reported"; }
diff <(nt <"$t/A.jsonl") <(nt <"$t/E.jsonl") >/dev/null || fail "E's steps (loss, grad norm, lr, counts) differ from A's"
py latest "$t/E" step-00000012 || fail "E's latest"
for s in step-00000006 step-00000012; do
  py compare "$t/A/$s" "$t/E/$s" || fail "E's $s is not bitwise equal to A's"
done
"$hsr" ckpt verify "$t/E" >/dev/null || fail "E's checkpoint does not verify"
r4 --ckpt "$t/F" --async-save --resume "$t/E/step-00000006" >"$t/F.out" 2>&1 || { cat "$t/F.out"; fail "F failed"; }
py compare "$t/A" "$t/F" || fail "F (resumed from an async save, saving async) is not bitwise equal to A"
echo "ckpt_train: E (--async-save) = A bitwise, F resumed from E = A bitwise"

"$hsr" $train --ckpt "$t/C" --resume "$t/A/step-00000006" >"$t/C.out" 2>&1 || { cat "$t/C.out"; fail "C (one rank) failed"; }
py compare "$t/A" "$t/C" --tol 2e-5 || fail "C (one rank) differs from A"
"$run" -n 8 --nodes 2 --launcher mpirun -- "$hsr" $train --shard 4 --reshard partial:2 --ckpt "$t/D" \
  --resume "$t/A/step-00000006" >"$t/D.out" 2>&1 || { cat "$t/D.out"; fail "D (2 x 4, partial:2) failed"; }
grep -q "mesh 2 x 4" "$t/D.out" || fail "D is not on the 2 x 4 mesh"
py compare "$t/A" "$t/D" --tol 2e-5 || fail "D differs from A"

"$hsr" $train --ckpt "$t/G" --save-every 6 >"$t/G.out" 2>&1 || { cat "$t/G.out"; fail "G (one rank) failed"; }
r4 --ckpt "$t/H" --resume "$t/G/step-00000006" >"$t/H.out" 2>&1 || { cat "$t/H.out"; fail "H failed"; }
py compare "$t/G" "$t/H" --tol 2e-5 || fail "H (2 x 2 from one rank) differs from G"

"$hsr" $train --steps 8 --ckpt "$t/K" --save-every 2 --keep 2 >"$t/K.out" 2>&1 || fail "--keep run failed"
[ "$(ls "$t/K" | tr '\n' ' ')" = "latest step-00000006 step-00000008 " ] || fail "--keep 2 left: $(ls "$t/K")"

"$hsr" ckpt inspect "$t/A" --json >"$t/insp.json" || fail "inspect failed"
python3 - "$t/insp.json" <<'PY' || fail "inspect --json"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["ok"] and o["verified"] and o["step"] == 12, o
assert o["mesh"]["replicate"] == 2 and o["mesh"]["shard"] == 2 and o["mesh"]["strategy"] == "hybrid", o["mesh"]
assert o["program"]["data.sample_index"] == 12 * 32 and o["program"]["data.batch"] == 32, o["program"]
names = [t["name"] for t in o["tensors"]]
assert names[:4] == ["embed.w", "embed.b", "head.w", "head.b"] and len(names) == 12, names
PY
"$hsr" ckpt verify "$t/B" || fail "verify of a good checkpoint failed"
# corrupted: a flipped byte in one data file
f=$(ls "$t/B/step-00000012"/data-*-00002.bin)
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0x40; open(p,'wb').write(b)" "$f"
out=$("$hsr" ckpt verify "$t/B" 2>&1); rc=$?
echo "$out"
[ "$rc" = 1 ] && grep -q "corrupted" <<<"$out" || fail "verify of a corrupted checkpoint: exit $rc"
out=$(r4 --resume "$t/B" --steps 14 2>&1); rc=$?
[ "$rc" != 0 ] || fail "--resume of a corrupted checkpoint succeeded"
n=$(grep -c "hsr train: HSR_ERR_IO: rank [0-9]: checkpoint .*corrupted" <<<"$out")
[ "$n" = 1 ] || { echo "$out"; fail "expected the refusal every rank agreed on once for the job, saw $n"; }
echo "ckpt_train: ok"
