#!/usr/bin/env bash
# recompute.sh: what activation recompute buys and costs on the GPT, the
# policies interleaved (none, selective, full, none, ...) so that load on the
# machine falls on all alike. Prints per policy the activation peak (the
# ledger's, bytes per rank), the median ms per step and both as ratios
# against none, as a table and as JSON.
set -euo pipefail
prog=recompute.sh
usage() {
  cat <<TXT
usage: $prog [--build DIR] [--ranks N] [--rounds N] [--steps N] [--json FILE] [-- HSR_TRAIN_FLAGS...]

  --build DIR   the build tree with hsr and hsr-run (default build)
  --ranks N     ranks (default 1; more run under hsr-run on one node)
  --rounds N    interleaved rounds of the three policies (default 3)
  --steps N     hsr train steps per run (default 5; the first 2 are not counted)
  --json FILE   also write the results as JSON
  HSR_TRAIN_FLAGS  the model and batch (default: --model gpt --layers 8 --dim 512 --heads 8
                --seq 512 --batch 2 --micro-batches 1)
Each run is hsr train FLAGS --recompute POLICY --steps N --val-every 1000000; ms per step is the
mean of the counted steps' step_ms, the activation peak the JSON summary's ledger row.
TXT
}
. "$(dirname "$0")/../scripts/argcheck.sh"
build=build ranks=1 rounds=3 steps=5 json=
flags=(--model gpt --layers 8 --dim 512 --heads 8 --seq 512 --batch 2 --micro-batches 1)
while [ $# -gt 0 ]; do
  case $1 in
  -h|--help) usage; exit 0 ;;
  --build) ac_need "$1" $# "${2:-}"; build=$2; shift 2 ;;
  --ranks) ac_need "$1" $# "${2:-}"; ac_int --ranks "$2" 1 8; ranks=$2; shift 2 ;;
  --rounds) ac_need "$1" $# "${2:-}"; ac_int --rounds "$2" 1 100; rounds=$2; shift 2 ;;
  --steps) ac_need "$1" $# "${2:-}"; ac_int --steps "$2" 3 10000; steps=$2; shift 2 ;;
  --json) ac_need "$1" $# "${2:-}"; json=$2; shift 2 ;;
  --) shift; flags=("$@"); break ;;
  *) ac_die "unknown argument '$1'" ;;
  esac
done
[ -x "$build/hsr" ] && [ -x "$build/hsr-run" ] || ac_die "$build has no hsr and hsr-run (build it first)"
t=$(mktemp -d /tmp/hsr-rc-XXXXXX)
trap 'rm -rf "$t"' EXIT
export OPENBLAS_NUM_THREADS=1
one() { # POLICY ROUND
  local cmd=("$build/hsr" train "${flags[@]}" --recompute "$1" --steps "$steps" --val-every 1000000 --no-progress
             --log "$t/$1-$2.jsonl" --json "$t/$1-$2.json")
  [ "$ranks" = 1 ] || cmd=("$build/hsr-run" -n "$ranks" -- "${cmd[@]}")
  "${cmd[@]}" >"$t/$1-$2.out" 2>&1 || { cat "$t/$1-$2.out"; ac_die "hsr train --recompute $1 failed"; }
}
for r in $(seq "$rounds"); do
  for p in none selective full; do
    echo "round $r/$rounds: --recompute $p" >&2
    one "$p" "$r"
  done
done
python3 - "$t" "$rounds" "$json" "${flags[*]}" "$ranks" <<'PY'
import json, statistics, sys
t, rounds, out, flags, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
res = {}
for p in ("none", "selective", "full"):
    ms, act, loss = [], None, None
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{t}/{p}-{r}.jsonl")]
        ms.append(sum(l["step_ms"] for l in lines[2:]) / len(lines[2:]))
        s = json.load(open(f"{t}/{p}-{r}.json"))
        act = s["ledger"]["categories"]["activation"]["peak"]
        loss = [l["loss"] for l in lines]
    res[p] = {"ms_per_step": ms, "median_ms": statistics.median(ms), "activation_bytes": act, "losses": loss}
base = res["none"]
print(f"{'recompute':<10} {'activations':>14} {'cut':>6} {'ms/step':>10} {'time':>7}")
for p, v in res.items():
    v["activation_cut"] = base["activation_bytes"] / v["activation_bytes"]
    v["time_ratio"] = v["median_ms"] / base["median_ms"]
    print(f"{p:<10} {v['activation_bytes'] / 2**20:11.2f} MiB {v['activation_cut']:5.2f}x {v['median_ms']:10.1f} "
          f"{v['time_ratio']:6.3f}x")
same = all(v["losses"] == base["losses"] for v in res.values())
print(f"losses bitwise equal across policies: {same}")
if out:
    json.dump({"tool": "recompute.sh", "flags": flags, "ranks": ranks, "rounds": rounds, "policies": res,
               "losses_equal": same}, open(out, "w"), indent=1)
PY
