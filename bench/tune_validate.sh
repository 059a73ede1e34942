#!/usr/bin/env bash
# tune_validate.sh: hsr tune checked against measurement across an emulated
# second tier, at several link rates, several runs each.
#
# For each rate and run: `hsr-run -n 8 --nodes 2 --emulate-net RATE -- hsr
# tune --validate --compute MODE --json` (calibration benches, three probe
# runs, then the top layouts, a few deliberately bad ones and the physics
# pair through hsr bench step). From each run's JSON: the mean absolute and
# worst error of the predicted step and communication over the validated
# layouts (top and bad), and the recommended layout against the fastest
# measured one. Then, over all runs of each rate and of every rate, the
# accuracy table; the physics check (flat fsdp over both nodes against hybrid
# with a node per shard group: the rate at which they swap places, measured
# and predicted); and, from the first run of the fastest rate, the overlap
# check (exposed communication of the recommended layout).
set -euo pipefail

prog=tune_validate.sh
usage() {
  cat <<TXT
usage: $prog [--rates LIST] [--runs N] [--rounds N] [--compute cpu|wait] [--build DIR] [--out DIR | --summarize DIR]
             [--steps N] [--units U] [--unit-size BYTES] [--compute-ms X] [-- EXTRA hsr tune --validate OPTIONS]

  --rates LIST      comma-separated tc rates (default 300mbit,1gbit,10gbit)
  --runs N          independent runs of hsr tune --validate per rate (default 5)
  --rounds N        --validate-rounds: every layout measured N times per run, the fastest kept (default 1)
  --compute MODE    hsr bench step's compute: wait (default; device-like) or cpu (GEMMs on the ranks' cores)
  --build DIR       build tree (./build)
  --out DIR         keep every run's files in DIR/RATE/runN (default: a temporary directory)
  --summarize DIR   run nothing: the tables from the runs kept in DIR/RATE/run*/out.json (and
                    DIR/overlap.json), e.g. runs of several sittings gathered into one folder
  --steps N         timed steps per hsr bench step run (6)
  --units U, --unit-size BYTES, --compute-ms X   hsr bench step's model (8, 8M, 10)
Needs what hsr-run --emulate-net needs (root, ip, tc) and jq. Run it on a quiet
machine: the 8 ranks share the cores with the emulated link, and other work
on them shows up as error.
TXT
}
. "$(dirname "$0")/../scripts/argcheck.sh"

rates=300mbit,1gbit,10gbit; runs=5; rounds=1; mode=wait; build="$(pwd)/build"; out=""; steps=6; units=8; only_sum=0
usize=8M; cms=10; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rates) ac_need "$1" $# "${2:-}"; rates="$2"; shift 2 ;;
    --runs) ac_need "$1" $# "${2:-}"; ac_int "$1" "$2" 1 100; runs="$2"; shift 2 ;;
    --rounds) ac_need "$1" $# "${2:-}"; ac_int "$1" "$2" 1 20; rounds="$2"; shift 2 ;;
    --compute) ac_need "$1" $# "${2:-}"; ac_choice "$1" "$2" 'cpu|wait'; mode="$2"; shift 2 ;;
    --build) ac_need "$1" $# "${2:-}"; ac_dir "$1" "$2"; build="$2"; shift 2 ;;
    --out) ac_need "$1" $# "${2:-}"; ac_newdir "$1" "$2"; out="$2"; shift 2 ;;
    --summarize) ac_need "$1" $# "${2:-}"; ac_dir "$1" "$2"; out="$2"; only_sum=1; shift 2 ;;
    --steps) ac_need "$1" $# "${2:-}"; ac_int "$1" "$2" 1 1000; steps="$2"; shift 2 ;;
    --units) ac_need "$1" $# "${2:-}"; ac_int "$1" "$2" 1 4096; units="$2"; shift 2 ;;
    --unit-size) ac_need "$1" $# "${2:-}"; ac_size "$1" "$2"; usize="$2"; shift 2 ;;
    --compute-ms) ac_need "$1" $# "${2:-}"; ac_num "$1" "$2"; cms="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) ac_die "unknown option '$1'" ;;
  esac
done
IFS=, read -r -a rl <<<"$rates"
[ ${#rl[@]} -ge 1 ] || ac_die "--rates is empty"
for r in "${rl[@]}"; do ac_rate --rates "$r"; done
command -v jq >/dev/null || ac_die "jq is not installed (scripts/setup.sh installs it)"
hsr="$build/hsr"; run="$build/hsr-run"
[ "$only_sum" = 1 ] || for x in "$hsr" "$run"; do [ -x "$x" ] || ac_die "$x not found (build first)"; done
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"

if [ "$only_sum" = 1 ]; then
  echo "# $prog --summarize $out: the runs kept there, rates ${rl[*]}, compute $mode (as they were run:)"
else
  echo "# $prog: 8 ranks, 2 simulated nodes, compute $mode; rates ${rl[*]}, $runs run(s) each," \
       "--validate-rounds $rounds --validate-steps $steps; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo "# each run: $run -n 8 --nodes 2 --emulate-net RATE -- $hsr tune --validate --compute $mode --json" \
     "--units $units --unit-size $usize --compute-ms-per-unit $cms --validate-steps $steps --validate-rounds $rounds" \
     "--validate-keep DIR ${extra[*]}"
printf '%-9s %4s %7s %9s %9s %9s %9s %10s  %s\n' rate run link "step mean" "worst" "comm mean" "worst" "rec-fast" recommended
failed=0
for r in "${rl[@]}"; do
  if [ "$only_sum" = 1 ]; then # the runs kept there, by their number
    ks=$(find "$out/$r" -mindepth 2 -maxdepth 2 -path "*/run*/out.json" 2>/dev/null | sed 's|.*/run\([0-9]*\)/out.json|\1|' | sort -n)
  else
    ks=$(seq 1 "$runs")
  fi
  for k in $ks; do
    d="$out/$r/run$k"
    mkdir -p "$d"
    if [ "$only_sum" = 0 ] && ! "$run" -n 8 --nodes 2 --emulate-net "$r" -- "$hsr" tune --validate --compute "$mode" --json \
        --units "$units" --unit-size "$usize" --compute-ms-per-unit "$cms" --validate-steps "$steps" \
        --validate-rounds "$rounds" --validate-keep "$d" "${extra[@]}" >"$d/out.json" 2>"$d/err.txt"; then
      # one failed run (a timeout on a loaded host) does not discard the others: it is counted and left out
      echo "$prog: the run at $r ($k) failed; see $d/err.txt (left out of the table)" >&2
      mv "$d/out.json" "$d/failed.json" 2>/dev/null || true
      failed=$((failed + 1))
      continue
    fi
    jq -r --arg r "$r" --arg k "$k" '"\($r) \($k) \(.link_ratio * 10 | round / 10)x \(.errors.all.step.mean_abs_pct * 10 | round / 10)% \(.errors.all.step.worst_pct * 10 | round / 10)% \(.errors.all.comm.mean_abs_pct * 10 | round / 10)% \(.errors.all.comm.worst_pct * 10 | round / 10)% \(.recommended_vs_fastest_pct * 10 | round / 10)% \(.recommended | gsub(" "; "_"))"' \
      "$d/out.json" | awk '{printf "%-9s %4s %7s %9s %9s %9s %9s %10s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
  done
done

# ---- the accuracy table: per rate and over every run ----
summary() { # files...: mean of the runs' mean errors, worst of the worsts, runs with rec within 5%
  jq -s -r '
    def r1: . * 10 | round / 10;
    (map(.errors.all.step.mean_abs_pct) | add / length | r1) as $sm |
    (map(.errors.all.step.worst_pct) | max | r1) as $sw |
    (map(.errors.all.comm.mean_abs_pct) | add / length | r1) as $cm |
    (map(.errors.all.comm.worst_pct) | max | r1) as $cw |
    (map(select(.recommended_vs_fastest_pct <= 5)) | length) as $ok |
    (map(.recommended_vs_fastest_pct) | max | r1) as $rw |
    "\($sm)% | \($sw)% | \($cm)% | \($cw)% | \($ok) of \(length) (worst \($rw)%)"' "$@"
}
echo
echo "# accuracy over every validated layout (top and deliberately bad), compute $mode"
echo "| rate | link | step mean abs | step worst | comm mean abs | comm worst | recommended within 5% of fastest |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
all=()
for r in "${rl[@]}"; do
  files=("$out/$r"/run*/out.json)
  [ -e "${files[0]}" ] || ac_die "every run at $r failed"
  all+=("${files[@]}")
  link=$(jq -s -r 'map(.link_ratio) | add / length * 10 | round / 10' "${files[@]}")
  echo "| $r | ${link}x | $(summary "${files[@]}") |"
done
echo "| all | | $(summary "${all[@]}") |"
[ "$failed" = 0 ] || echo "# $failed run(s) failed and are left out (see their err.txt under $out)"
echo "# targets (wait): step mean <= 5%, worst <= 15%; comm mean <= 10%, worst <= 20%; recommended within 5% in every run"

# ---- the physics check: flat fsdp against hybrid (one node per shard group) ----
a="fsdp 1x8 full p1"; b="hybrid 2x4 full p1"
echo
echo "# physics: $a over $b at each rate (mean over runs); > 1: hybrid is faster"
printf '%-9s %8s %12s %12s\n' rate link predicted measured
pts=()
for r in "${rl[@]}"; do
  line=$(jq -s -r --arg a "$a" --arg b "$b" '
    def lay(l): [.layouts[] | select(.label == l)][0];
    (map(lay($a).predicted.step_ms / lay($b).predicted.step_ms) | add / length) as $p |
    (map(lay($a).measured.step_ms / lay($b).measured.step_ms) | add / length) as $m |
    "\($p) \($m)"' "$out/$r"/run*/out.json)
  bits=$(echo "$r" | awk '{ v = $1; u = v; gsub(/[0-9.]/, "", u); gsub(/[a-z]/, "", v);
    m = (u ~ /^k/) ? 1e3 : (u ~ /^m/) ? 1e6 : (u ~ /^g/) ? 1e9 : (u ~ /^t/) ? 1e12 : 1;
    if (u ~ /bps$/) m *= 8; printf "%.0f", v * m }')
  link=$(jq -s -r 'map(.link_ratio) | add / length * 10 | round / 10' "$out/$r"/run*/out.json)
  printf '%-9s %7sx %12.3f %12.3f\n' "$r" "$link" $line
  pts+=("$bits $line")
done
# the rate where each ratio crosses 1, interpolated in log(rate) between neighbouring rates
printf '%s\n' "${pts[@]}" | sort -n | awk '
  function cross(col, name,   i, x) {
    for (i = 2; i <= n; i++)
      if ((y[col, i - 1] - 1) * (y[col, i] - 1) <= 0 && y[col, i - 1] != y[col, i]) {
        x = log(r[i - 1]) + (1 - y[col, i - 1]) * (log(r[i]) - log(r[i - 1])) / (y[col, i] - y[col, i - 1]);
        c[col] = exp(x);
        printf "# %s: they swap places at about %.0f Mbit/s (between the rates measured)\n", name, exp(x) / 1e6;
        return;
      }
    printf "# %s: no swap between %.0f and %.0f Mbit/s (all %s 1)\n", name, r[1] / 1e6, r[n] / 1e6,
           (y[col, 1] > 1 ? "above" : "below");
  }
  { n++; r[n] = $1; y[1, n] = $2; y[2, n] = $3 }
  END {
    cross(1, "predicted"); cross(2, "measured");
    if (c[1] && c[2]) printf "# predicted crossover / measured = %.2f (target within 2x)\n", c[1] / c[2];
  }'

# ---- overlap: flat fsdp, prefetch 1, compute raised to about twice its communication ----
# (twice the validation model's units: the first gather of a step and its last reduce-scatter have nothing to
# hide under but AdamW, so the fewer the units, the larger their share)
fast="${rl[${#rl[@]}-1]}"
first=("$out/$fast"/run*/out.json)
comm=$(jq -r --arg a "$a" '[.layouts[] | select(.label == $a)][0].measured.comm_ms' "${first[0]}")
cms2=$(awk -v c="$comm" -v u="$units" -v m="$cms" 'BEGIN { x = 2 * c / (u * 3); if (x < m) x = m; printf "%.0f", x + 0.5 }')
u2=$((units * 2))
echo
echo "# overlap at $fast: $a with $u2 units, compute raised to about twice its communication:"
echo "#   $run -n 8 --nodes 2 --emulate-net $fast -- $hsr bench step --compute $mode --units $u2 --unit-size $usize" \
     "--compute-ms $cms2 --shard 8 --reshard full --prefetch 1 --steps $steps --json $out/overlap.json"
if [ "$only_sum" = 0 ]; then
  "$run" -n 8 --nodes 2 --emulate-net "$fast" -- "$hsr" bench step --compute "$mode" --units "$u2" --unit-size "$usize" \
    --compute-ms "$cms2" --shard 8 --reshard full --prefetch 1 --steps "$steps" --json "$out/overlap.json" >/dev/null
fi
[ -f "$out/overlap.json" ] || { echo "#   (no $out/overlap.json)"; exit 0; }
jq -r '.results[0] | "#   compute \(.compute_ms * 10 | round / 10) ms = \(.compute_ms / .comm_ms * 100 | round / 100)x communication \(.comm_ms * 10 | round / 10) ms; exposed \(.exposed_comm_ms * 10 | round / 10) ms = \(.exposed_comm_ms / .comm_ms * 1000 | round / 10)% of it (target <= 10% with compute >= 1.5x)"' \
  "$out/overlap.json"
