#!/usr/bin/env bash
# ab_host_path.sh: two builds of hsr on the host path, interleaved: the
# README's main job (the GPT, 4 ranks as 2 nodes, hybrid 2 x 2) and hsr bench
# step (--compute wait), alternating A, B, A, B, ... so that load on the
# machine falls on both alike. Prints ms per step of each round and the ratio
# of medians (B / A), as a table and as JSON.
set -euo pipefail
prog=ab_host_path.sh
usage() {
  cat <<TXT
usage: $prog A_BUILD B_BUILD [--rounds N] [--steps N] [--json FILE]

  A_BUILD, B_BUILD  two build trees (each with hsr and hsr-run), e.g. before and after a change
  --rounds N        interleaved rounds (default 5)
  --steps N         hsr train steps per round (default 12; the first 2 are not counted)
  --json FILE       also write the results as JSON
Measures: hsr train --model gpt (ms per step, mean of the counted steps) and
hsr bench step --units 8 --unit-size 1M --compute-ms 2 --compute wait
--reshard full --prefetch 1 (step_ms).
TXT
}
. "$(dirname "$0")/../scripts/argcheck.sh"
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { usage; exit 0; }
[ $# -ge 2 ] || ac_die "two build trees are needed"
A=$1 B=$2; shift 2
rounds=5 steps=12 json=
while [ $# -gt 0 ]; do
  case $1 in
  --rounds) ac_need "$1" $# "${2:-}"; ac_int --rounds "$2" 1 100; rounds=$2; shift 2 ;;
  --steps) ac_need "$1" $# "${2:-}"; ac_int --steps "$2" 3 10000; steps=$2; shift 2 ;;
  --json) ac_need "$1" $# "${2:-}"; json=$2; shift 2 ;;
  *) ac_die "unknown argument '$1'" ;;
  esac
done
for d in "$A" "$B"; do [ -x "$d/hsr" ] && [ -x "$d/hsr-run" ] || ac_die "$d has no hsr and hsr-run (build it first)"; done
t=$(mktemp -d /tmp/hsr-ab-XXXXXX)
trap 'rm -rf "$t"' EXIT
export OPENBLAS_NUM_THREADS=1
one() { # BUILD TAG ROUND
  "$1/hsr-run" -n 4 --nodes 2 -- "$1/hsr" train --model gpt --steps "$steps" --no-progress --log "$t/$2-$3.jsonl" \
    >"$t/$2-$3.out" 2>&1 || { cat "$t/$2-$3.out"; echo "$prog: hsr train ($2) failed" >&2; exit 1; }
  "$1/hsr-run" -n 4 --nodes 2 -- "$1/hsr" bench step --units 8 --unit-size 1M --compute-ms 2 --compute wait \
    --reshard full --prefetch 1 --steps 5 --json "$t/$2-$3-step.json" >/dev/null 2>&1 ||
    { echo "$prog: hsr bench step ($2) failed" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  one "$A" A "$r"
  one "$B" B "$r"
done
python3 - "$t" "$rounds" "$json" "$A" "$B" <<'PY'
import json, statistics, sys
t, rounds, out, a_dir, b_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def train_ms(tag, r):
    lines = [json.loads(l) for l in open(f"{t}/{tag}-{r}.jsonl")][2:]
    return sum(l["step_ms"] for l in lines) / len(lines)
def step_ms(tag, r):
    return json.load(open(f"{t}/{tag}-{r}-step.json"))["results"][0]["step_ms"]
res = {}
print(f"{'round':>5} {'train A':>9} {'train B':>9} {'step A':>9} {'step B':>9}   (ms per step)")
for r in range(1, rounds + 1):
    row = [train_ms("A", r), train_ms("B", r), step_ms("A", r), step_ms("B", r)]
    for k, v in zip(("train_A", "train_B", "step_A", "step_B"), row):
        res.setdefault(k, []).append(v)
    print(f"{r:>5} " + " ".join(f"{v:9.2f}" for v in row))
med = {k: statistics.median(v) for k, v in res.items()}
ratio = {"train": med["train_B"] / med["train_A"], "bench_step": med["step_B"] / med["step_A"]}
print(f"median train: A {med['train_A']:.2f} B {med['train_B']:.2f} ms/step, B/A {ratio['train']:.3f}")
print(f"median bench step: A {med['step_A']:.2f} B {med['step_B']:.2f} ms/step, B/A {ratio['bench_step']:.3f}")
if out:
    json.dump({"tool": "ab_host_path.sh", "a": a_dir, "b": b_dir, "rounds": rounds, "ms_per_step": res,
               "median": med, "ratio_b_over_a": ratio}, open(out, "w"), indent=1)
PY
