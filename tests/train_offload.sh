#!/usr/bin/env bash
# train_offload.sh HSR_RUN HSR: hsr train --offload optim on the sim device
# (the stream-order check and delays on) against the host path, with
# checkpoints saved and loaded across the setting:
#   A  host, 2 x 2 hybrid, 12 steps, a checkpoint every 6
#   O  sim with --offload optim, the same job (async saves): its log lines (losses, norms)
#      and both checkpoints bitwise A's; its ledger puts master, m, v and the
#      accumulator in host memory, predicted to the byte
#   P  sim without offload, resumed from O's step 6: steps 7-12 and the
#      step-12 checkpoint bitwise A's (saved with offload, loaded without)
#   H  the host path resumed from O's step 6: the same
#   Q  sim with offload resumed from A's step 6, held and in place (the
#      state is host memory): bitwise A's (saved without, loaded with)
#   F  fsdp on 4 ranks and on one: sim with offload bitwise the host run
#   G  the GPT with --recompute full and offload: bitwise the host run
#   bad input: --offload optim on the host device and a bad value exit 2
#      before any work, said once per job
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-train-offload-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "train_offload: $*"; exit 1; }
export OPENBLAS_NUM_THREADS=1
sim=(env HSR_SIM_CHECK=1 HSR_SIM_DELAY=200:5)
train="train --layers 2 --dim 24 --classes 6 --steps 12 --batch 32 --warmup 3 --lr-min 3e-4 --clip 0.5 --no-progress"
r4() { "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train "$@"; }
nt() { sed 's/"step_ms":[^,]*,//; s/"tokens_per_s":[^,]*,//; s/"gflops":[^,]*,//'; } # drop the timings

r4 --ckpt "$t/A" --save-every 6 --log "$t/A.jsonl" >"$t/A.out" 2>&1 || { cat "$t/A.out"; fail "run A (host) failed"; }
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --device sim --offload optim --ckpt "$t/O" \
  --save-every 6 --async-save --log "$t/O.jsonl" --json "$t/O.json" >"$t/O.out" 2>&1 || { cat "$t/O.out"; fail "run O failed"; }
grep -q "^hsr train: 4 ranks, 2 node(s), sim, mesh 2 x 2 .*offload optim" "$t/O.out" || fail "O did not report offload"
diff <(nt <"$t/A.jsonl") <(nt <"$t/O.jsonl") >/dev/null || fail "O's log lines differ from A's (host)"
py compare "$t/A" "$t/O" || fail "O's step-12 checkpoint is not bitwise A's"
python3 - "$t/O.json" <<'PY' || fail "O's ledger"
import json, sys
s = json.load(open(sys.argv[1]))
m, p = s["ledger"], s["ledger_predicted"]
for c in ("master", "moment_m", "moment_v", "grad_shard"):
    assert m["categories"][c]["peak"] == 0, (c, "on the device")
    assert m["categories"]["host_" + c]["peak"] > 0, ("host_" + c, "missing")
for c, v in m["categories"].items():
    if c not in ("staging", "ckpt_staging", "activation"):  # one-off staging (init, saves), the program's
        assert v["peak"] == p["categories"][c]["peak"], (c, v["peak"], p["categories"][c]["peak"])
assert m["host"] == p["host"] > 0, (m["host"], p["host"])
assert s["offload"] == "optim"
print(f"train_offload: O's ledger: {m['host']} bytes in host memory, "
      f"{s['persistent_bytes_per_param_times_S']:.2f}/S device bytes per parameter")
PY
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --device sim --ckpt "$t/P" \
  --resume "$t/O/step-00000006" --log "$t/P.jsonl" >"$t/P.out" 2>&1 || { cat "$t/P.out"; fail "P failed"; }
py compare "$t/A" "$t/P" || fail "P (offloaded save, loaded without): the step-12 checkpoint is not bitwise A's"
diff <(tail -n 6 "$t/A.jsonl" | nt) <(nt <"$t/P.jsonl") >/dev/null || fail "P: steps 7-12 differ from A's"
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --ckpt "$t/H" --resume "$t/O/step-00000006" \
  --log "$t/H.jsonl" >"$t/H.out" 2>&1 || { cat "$t/H.out"; fail "H failed"; }
py compare "$t/A" "$t/H" || fail "H (offloaded save, loaded on the host path): the step-12 checkpoint is not A's"
diff <(tail -n 6 "$t/A.jsonl" | nt) <(nt <"$t/H.jsonl") >/dev/null || fail "H: steps 7-12 differ from A's"
for ip in off on; do
  HSR_CKPT_IN_PLACE=$ip "${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --device sim \
    --offload optim --ckpt "$t/Q$ip" --resume "$t/A/step-00000006" --log "$t/Q$ip.jsonl" >"$t/Q$ip.out" 2>&1 ||
    { cat "$t/Q$ip.out"; fail "Q ($ip) failed"; }
  want=held; [ "$ip" = on ] && want="in place"
  grep -E "^resume: .*$want" "$t/Q$ip.out" || fail "Q ($ip): the resume line does not say '$want'"
  py compare "$t/A" "$t/Q$ip" || fail "Q ($ip): the step-12 checkpoint is not bitwise A's"
  diff <(tail -n 6 "$t/A.jsonl" | nt) <(nt <"$t/Q$ip.jsonl") >/dev/null || fail "Q ($ip): steps 7-12 differ from A's"
done
f="train --layers 2 --dim 24 --classes 6 --steps 6 --batch 32 --strategy fsdp --no-progress"
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $f --log "$t/F.jsonl" >"$t/F.out" 2>&1 || fail "F (host) failed"
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $f --device sim --offload optim --param-dtype bf16 \
  --log "$t/Fb.jsonl" >/dev/null 2>&1 || fail "F (sim, offload, bf16) failed"
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $f --param-dtype bf16 --log "$t/Fh.jsonl" >/dev/null 2>&1 ||
  fail "F (host, bf16) failed"
diff <(nt <"$t/Fh.jsonl") <(nt <"$t/Fb.jsonl") >/dev/null || fail "F: fsdp 1 x 4 bf16 with offload differs from the host"
"${sim[@]}" "$hsr" $f --device sim --offload optim --log "$t/F1.jsonl" >/dev/null 2>&1 || fail "F (one rank) failed"
"$hsr" $f --log "$t/F1h.jsonl" >/dev/null 2>&1 || fail "F (one rank, host) failed"
diff <(nt <"$t/F1h.jsonl") <(nt <"$t/F1.jsonl") >/dev/null || fail "F: one rank with offload differs from the host"
g="train --model gpt --layers 2 --heads 2 --dim 32 --seq 16 --batch 8 --steps 4 --no-progress --recompute full"
"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $g --log "$t/G.jsonl" >/dev/null 2>&1 || fail "G (host) failed"
"${sim[@]}" "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $g --device sim --offload optim --log "$t/Go.jsonl" \
  >/dev/null 2>&1 || fail "G (sim, offload, recompute) failed"
diff <(nt <"$t/G.jsonl") <(nt <"$t/Go.jsonl") >/dev/null || fail "G: the GPT with recompute and offload differs from the host"
# bad input: once per job, exit 2, before any work (no log written)
out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --offload optim --log "$t/bad.jsonl" 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "--offload optim on the host device: exit $rc, expected 2: $out"
[ "$(grep -c 'all state already lives in host memory' <<<"$out")" = 1 ] ||
  fail "--offload optim on the host device: not said once per job: $out"
grep -q -- "--device sim or --device cuda" <<<"$out" || fail "the error does not say what is valid: $out"
[ ! -e "$t/bad.jsonl" ] || fail "--offload optim on the host device: work started (a log was written)"
out=$("$hsr" $train --device sim --offload host 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "valid: none|optim" <<<"$out" || fail "--offload host: exit $rc, $out"
echo "train_offload: offload optim = host bitwise (hybrid 2 x 2, fsdp 1 x 4 bf16, one rank, the GPT with recompute); checkpoints across the" \
  "setting bitwise; bad input exit 2"
