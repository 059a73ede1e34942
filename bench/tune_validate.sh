#!/usr/bin/env bash
# tune_validate.sh: hsr tune checked against measurement across an emulated
# second tier, at several link rates.
#
# For each rate: `hsr-run -n 8 --nodes 2 --emulate-net RATE -- hsr tune
# --validate` (calibration benches, three probe runs, then the top layouts
# and a few deliberately bad ones through hsr bench step), its table, and
# from its validate.json the figures the targets name: the worst step and
# communication error, the recommended layout against the fastest measured
# one, and the link (cross-node over intra-node all-gather time). Then the
# ranking across rates: the predicted and measured step time of the flat
# fsdp layout over both nodes against the hybrid one of one node per shard
# group, which physics says must move toward hybrid as the link slows.
set -euo pipefail

prog=tune_validate.sh
usage() {
  cat <<TXT
usage: $prog [--rates LIST] [--rounds N] [--build DIR] [--out DIR] [--steps N] [--units U]
             [--unit-size BYTES] [--compute-ms X] [-- EXTRA hsr tune --validate OPTIONS]

  --rates LIST      comma-separated tc rates (default 10gbit,3gbit: a cross-node all-gather
                    about 5x and 20x slower than inside the node on the 2-core VM)
  --rounds N        measure every run N times, interleaved, keep each one's fastest (default 2)
  --build DIR       build tree (./build)
  --out DIR         keep every rate's files in DIR/RATE (default: a temporary directory)
  --steps N         timed steps per hsr bench step run (4)
  --units U, --unit-size BYTES, --compute-ms X   hsr bench step's model (8, 8M, 10)
Needs what hsr-run --emulate-net needs (root, ip, tc) and jq. Run it on a quiet
machine: the 8 ranks share the cores with the emulated link, and other work
on them shows up as error.
TXT
}
die() { echo "$prog: $*" >&2; echo "(see '$prog --help')" >&2; exit 2; }

rates=10gbit,3gbit; rounds=2; build="$(pwd)/build"; out=""; steps=4; units=8; usize=8M; cms=10; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rates) rates="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --units) units="$2"; shift 2 ;;
    --unit-size) usize="$2"; shift 2 ;;
    --compute-ms) cms="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown option '$1'" ;;
  esac
done
for v in steps units rounds; do [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "--$v must be a positive integer"; done
command -v jq >/dev/null || die "jq is not installed (scripts/setup.sh installs it)"
hsr="$build/hsr"; run="$build/hsr-run"
for x in "$hsr" "$run"; do [ -x "$x" ] || die "$x not found (build first)"; done
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"

IFS=, read -r -a rl <<<"$rates"
echo "# $prog: 8 ranks, 2 simulated nodes; rates ${rl[*]}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in "${rl[@]}"; do
  d="$out/$r"
  mkdir -p "$d"
  echo
  echo "## $r: $run -n 8 --nodes 2 --emulate-net $r -- $hsr tune --validate --units $units --unit-size $usize" \
       "--compute-ms-per-unit $cms --validate-steps $steps --validate-rounds $rounds --validate-keep $d ${extra[*]}"
  "$run" -n 8 --nodes 2 --emulate-net "$r" -- "$hsr" tune --validate --units "$units" --unit-size "$usize" \
    --compute-ms-per-unit "$cms" --validate-steps "$steps" --validate-rounds "$rounds" --validate-keep "$d" \
    "${extra[@]}" | tee "$d/table.txt"
  jq -r '"# targets at '"$r"': link \(.link_ratio * 10 | round / 10)x; worst step error \(.worst_step_error_pct * 10 | round / 10)% (target 15);" +
         " worst communication error \(.worst_comm_error_pct * 10 | round / 10)% (target 20);" +
         " recommended vs fastest measured \(.recommended_vs_fastest_pct * 10 | round / 10)% (target 10)"' "$d/validate.json"
done

# The ranking across rates: flat fsdp over both nodes against hybrid with one node per shard group, the two
# layouts every rate measures (--validate's probes).
a="fsdp 1x8 full p1"; b="hybrid 2x4 none p1"
echo
echo "# ranking across rates: $a against $b, predicted and measured at each rate"
printf '%-10s %8s %12s %12s %8s %12s %12s %8s\n' rate link "fsdp pred" "hybrid pred" ratio "fsdp meas" "hybrid meas" ratio
for r in "${rl[@]}"; do
  jq -r --arg r "$r" --arg a "$a" --arg b "$b" '
    def f(x): if x == null then "-" else (x * 10 | round / 10 | tostring) end;
    def g(x): if x == null then "-" else (x * 1000 | round / 1000 | tostring) end;
    def run(l): [.runs[] | select(.label == l)][0];
    (run($a)) as $x | (run($b)) as $y |
    "\($r) \(f(.link_ratio))x \(f($x.predicted.step_ms)) \(f($y.predicted.step_ms)) \(g($x.predicted.step_ms / $y.predicted.step_ms)) \(f($x.measured.step_ms)) \(f($y.measured.step_ms)) \(g($x.measured.step_ms / $y.measured.step_ms))"' \
    "$out/$r/validate.json" | awk '{printf "%-10s %8s %12s %12s %8s %12s %12s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
done
echo "# physics: the fsdp / hybrid ratio grows as the link slows (per step fsdp over both nodes sends 3P across"
echo "# the node boundary, hybrid 2P; P = the parameters' bytes)"
