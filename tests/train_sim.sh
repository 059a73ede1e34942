#!/usr/bin/env bash
# train_sim.sh HSR_RUN HSR: hsr train --device sim with checkpoints, the
# stream-order check and delays on, against the host path:
#   A  host, 2 x 2 hybrid, 12 steps, a checkpoint every 6
#   S  sim, the same job with --async-save (staging on the device's streams):
#      its log lines and both checkpoints bitwise equal to A's
#   B  sim resumed from A's step 6 on 2 x 2, held and with HSR_CKPT_IN_PLACE=on
#      (device memory: a load always holds): steps 7-12 and the step-12
#      checkpoint bitwise equal to A's
#   C  sim on one rank resumed from S's step 6 (another mesh): A's losses
#      within tolerance
#   G  the GPT on sim, 2 x 2: its losses equal the host run's bitwise, its
#      ledger's runtime peak the predicted one
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-train-sim-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "train_sim: $*"; exit 1; }
export OPENBLAS_NUM_THREADS=1
sim=(env HSR_SIM_CHECK=1 HSR_SIM_DELAY=200:3)
train="train --layers 2 --dim 24 --classes 6 --steps 12 --batch 32 --warmup 3 --lr-min 3e-4 --clip 0.5 --no-progress"
r4() { "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train "$@"; }
nt() { sed 's/"step_ms":[^,]*,//; s/"tokens_per_s":[^,]*,//; s/"gflops":[^,]*,//'; } # drop the timings

r4 --ckpt "$t/A" --save-every 6 --log "$t/A.jsonl" >"$t/A.out" 2>&1 || { cat "$t/A.out"; fail "run A (host) failed"; }
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --device sim --ckpt "$t/S" --save-every 6 \
  --async-save --log "$t/S.jsonl" >"$t/S.out" 2>&1 || { cat "$t/S.out"; fail "run S (sim, async save) failed"; }
grep -q "^hsr train: 4 ranks, 2 node(s), sim, mesh 2 x 2" "$t/S.out" || fail "S did not report the sim device on 2 x 2"
diff <(nt <"$t/A.jsonl") <(nt <"$t/S.jsonl") >/dev/null || fail "S's log lines differ from A's (host)"
py compare "$t/A" "$t/S" || fail "S's step-12 checkpoint is not bitwise A's"
for ip in auto on; do
  HSR_CKPT_IN_PLACE=$ip "${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --device sim \
    --ckpt "$t/B$ip" --resume "$t/S/step-00000006" --log "$t/B$ip.jsonl" >"$t/B$ip.out" 2>&1 ||
    { cat "$t/B$ip.out"; fail "B ($ip) failed"; }
  grep -E "^resume: .*held" "$t/B$ip.out" || fail "B ($ip): the resume line does not say the load was held"
  py compare "$t/A" "$t/B$ip" || fail "B ($ip): the step-12 checkpoint is not bitwise A's"
  diff <(tail -n 6 "$t/A.jsonl" | nt) <(nt <"$t/B$ip.jsonl") >/dev/null || fail "B ($ip): steps 7-12 differ from A's"
done
"${sim[@]}" "$hsr" $train --device sim --ckpt "$t/C" --resume "$t/S/step-00000006" --log "$t/C.jsonl" >"$t/C.out" 2>&1 ||
  { cat "$t/C.out"; fail "C (one rank) failed"; }
python3 - "$t/A.jsonl" "$t/C.jsonl" <<'PY' || fail "C's losses are not A's"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][6:]
c = [json.loads(l) for l in open(sys.argv[2])]
assert [l["step"] for l in c] == list(range(7, 13)), [l["step"] for l in c]
worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, c))
assert worst < 1e-5, worst
print(f"train_sim: C (one rank, from a 2 x 2 sim checkpoint): steps 7-12 within {worst:.1e} of A's losses")
PY
gpt="train --model gpt --layers 2 --heads 2 --dim 32 --seq 16 --batch 8 --steps 4 --no-progress"
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $gpt --log "$t/G.jsonl" >"$t/G.out" 2>&1 || { cat "$t/G.out"; fail "G (host) failed"; }
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $gpt --device sim --log "$t/Gs.jsonl" >"$t/Gs.out" 2>&1 ||
  { cat "$t/Gs.out"; fail "G (sim) failed"; }
diff <(nt <"$t/G.jsonl") <(nt <"$t/Gs.jsonl") >/dev/null || fail "the GPT's log lines on sim differ from the host's"
# the ledger on the device path: measured = predicted to the byte (no init staging left held)
grep -E "^runtime peak .*\(predicted .*, \+0\.00%\)" "$t/Gs.out" || fail "the sim run's runtime peak is not the predicted one"
echo "train_sim: sim = host bitwise (MLP with async save and resumes, GPT); one-rank resume within tolerance"
