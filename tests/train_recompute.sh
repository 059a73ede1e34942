#!/usr/bin/env bash
# train_recompute.sh HSR_RUN HSR: hsr train --recompute, 4 ranks as 2 simulated
# nodes, the GPT at test size:
#  - none, full and selective log bitwise the same losses and gradient norms;
#  - the activation row of the ledger (measured: the bytes the workspace
#    allocated) equals the prediction (the train report's, from the shapes)
#    and this script's own count from the shapes, per policy; full < selective
#    < none;
#  - every step recomputes each block once; the all-gathers per step equal the
#    schedule's prediction (reshard full: 2 per block, never 3; none: 1); the
#    trace has, per rank, one recompute span per block after that block's
#    backward gather and no third gather of any unit;
#  - the llama's three policies log bitwise the same too;
#  - bad input (an unknown policy, the mlp, --wrap linear): exit 2
#    with what would be valid, before any work.
set -u
run=$1; hsr=$2
dir=$(mktemp -d /tmp/hsr-rc-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "train_recompute: $*"; exit 1; }
L=3 C=32 H=4 T=16 B=8
small=(--model gpt --layers $L --heads $H --dim $C --seq $T --batch $B --steps 4 --val-every 100)

for rs in full none; do
  for rc in none full selective; do
    "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train "${small[@]}" --reshard $rs --recompute $rc \
      --log "$dir/$rs-$rc.log" --json "$dir/$rs-$rc.json" --trace "$dir/$rs-$rc.trace" >"$dir/$rs-$rc.out" 2>&1 \
      || { cat "$dir/$rs-$rc.out"; fail "reshard $rs recompute $rc: exit $?"; }
  done
done
python3 - "$dir" $L $C $H $T $B <<'PY' || fail "check"
import json, sys
d, L, C, H, T, B = sys.argv[1], *map(int, sys.argv[2:])
V, N = 256, (B // 4) * T  # every rank is data-parallel (FSDP and HSDP alike), one micro-batch each
def plan(rc):  # bytes, from the shapes: docs/memory.md's table
    per = dict(ln1=C, ln1m=1, ln1r=1, qkv=3*C, att=H*T, atty=C, mid=C, ln2=C, ln2m=1, ln2r=1, fch=4*C, fchg=4*C)
    kept = {"none": set(per), "full": set(),
            "selective": {"ln1m", "ln1r", "qkv", "atty", "mid", "ln2m", "ln2r", "fch"}}[rc]
    layer = C + sum(v for k, v in per.items() if k in kept)
    scratch = sum(v for k, v in per.items() if k not in kept)
    fixed = C + C + 2 + V + (2*C + 3*C + C + 4*C)
    return 4 * (N * (L * layer + scratch + fixed) + H * T * T) + 8 * N
act = {}
for rs in ("full", "none"):
    logs = {}
    for rc in ("none", "full", "selective"):
        tag = f"{rs}-{rc}"
        lines = [json.loads(l) for l in open(f"{d}/{tag}.log")]
        logs[rc] = [(l["loss"], l["grad_norm"]) for l in lines]
        want = L if rc != "none" else 0
        assert all(l["recomputes"] == want for l in lines), (tag, [l["recomputes"] for l in lines])
        s = json.load(open(f"{d}/{tag}.json"))
        meas = s["ledger"]["categories"]["activation"]["peak"]
        pred = s["activation_bytes_per_micro_batch"]
        assert meas == pred == plan(rc), f"{tag}: activations measured {meas}, predicted {pred}, from the shapes {plan(rc)}"
        act[rc] = meas
        w = s["wrap"]
        per_unit = 2 if rs == "full" else 1
        assert w["gathers_per_step"] == w["gathers_per_step_predicted"] == per_unit * L + 1, (tag, w)
        # the trace: per rank and step, gathers per unit and the recompute after the backward's gather
        tr = json.load(open(f"{d}/{tag}.trace"))
        ev = tr["traceEvents"] if isinstance(tr, dict) else tr
        for pid in {e["pid"] for e in ev if "pid" in e}:
            for step in (2, 3):
                g = [e for e in ev if e.get("pid") == pid and e.get("name") == "all_gather" and e["args"]["step"] == step]
                r = [e for e in ev if e.get("pid") == pid and e.get("name") == "recompute" and e["args"]["step"] == step]
                for u in [f"h.{l}" for l in range(L)]:
                    gu = sorted(e["ts"] for e in g if e["args"]["unit"] == u)
                    assert len(gu) == per_unit, f"{tag}: rank {pid} step {step}: unit {u} gathered {len(gu)} times"
                    ru = [e["ts"] for e in r if e["args"]["unit"] == u]
                    assert len(ru) == (1 if rc != "none" else 0), f"{tag}: rank {pid}: {len(ru)} recomputes of {u}"
                    assert all(t > gu[-1] for t in ru), f"{tag}: {u} recomputed before its backward gather"
    assert logs["none"] == logs["full"] == logs["selective"], f"reshard {rs}: losses/norms differ: {logs}"
assert act["full"] < act["selective"] < act["none"], act
print(f"train_recompute: activations none {act['none']} B, selective {act['selective']} B, full {act['full']} B; "
      f"losses and norms bitwise equal; gathers as predicted")
PY
grep -q "recompute $L" "$dir/full-full.out" || fail "the progress line does not show the recomputes"
for rc in none full selective; do
  "$run" -n 2 --launcher mpirun -- "$hsr" train --model llama --layers 2 --heads 4 --dim 32 --seq 16 --batch 4 \
    --steps 3 --no-progress --recompute $rc --log "$dir/llama-$rc.log" >"$dir/llama-$rc.out" 2>&1 \
    || { cat "$dir/llama-$rc.out"; fail "llama --recompute $rc"; }
done
python3 - "$dir" <<'PY' || fail "the llama's policies differ"
import json, sys
logs = {rc: [(l["loss"], l["grad_norm"]) for l in map(json.loads, open(f"{sys.argv[1]}/llama-{rc}.log"))]
        for rc in ("none", "full", "selective")}
assert logs["none"] == logs["full"] == logs["selective"], logs
PY

expect2() { # what, pattern, args...
  local what=$1 pat=$2; shift 2
  out=$("$hsr" train "$@" 2>&1); rc=$?
  [ "$rc" = 2 ] && grep -q -- "$pat" <<<"$out" || fail "$what: rc $rc: $out"
}
expect2 "unknown policy" "valid: none.full.selective" --model gpt --recompute some --steps 1
expect2 "mlp" "the mlp keeps every activation" --model mlp --recompute full --steps 1
expect2 "wrap linear" "needs block units" --model gpt --recompute full --wrap linear --steps 1
echo "train_recompute: ok"
