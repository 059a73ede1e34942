#!/usr/bin/env bash
# heal_bench.sh: heal time against the number of healers (docs/fault-tolerance.md,
# "Measured"). For each G in --groups: G replica groups of 2 ranks (hsr train
# --model mlp) on one host against a coordinator of their own; group 1 SIGKILLs
# itself at step 5 and is restarted with --join once group 0 is past step 10;
# it heals from the G - 1 live groups, each sending a slice. Prints one row
# per G: the healers, the state healed (MB, the group), the joiner's time (its
# slowest rank, first byte to installed), the rate, and whether every final
# state_hash is equal; then the same rows as JSON.
#
# usage: heal_bench.sh [--groups "2 3 4"] [--model D:L] [--steps N]
#   --groups  group counts (default "2 3 4 5 6"; each 2 to 12)
#   --model   MLP width:blocks (default 512:8: 204.8 MB of state a group)
#   --steps   steps per run (default 300, at least 16; the survivors must still train when
#             the joiner has started)
# Environment: HSR_BUILD (default ./build).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${HSR_BUILD:-$here/../../build}
hsr=$B/hsr run=$B/hsr-run
groups="2 3 4 5 6" model=512:8 steps=300
die() { echo "heal_bench.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) [ $# -ge 2 ] || die "--groups needs a value"; groups=$2; shift 2 ;;
    --model) [ $# -ge 2 ] || die "--model needs a value"; model=$2; shift 2 ;;
    --steps) [ $# -ge 2 ] || die "--steps needs a value"; steps=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (valid: --groups, --model, --steps)" ;;
  esac
done
for g in $groups; do [[ "$g" =~ ^[0-9]+$ ]] && [ "$g" -ge 2 ] && [ "$g" -le 12 ] || die "--groups: '$g' is not 2 to 12"; done
[[ "$model" =~ ^[0-9]+:[0-9]+$ ]] || die "--model: '$model' is not D:L (width:blocks)"
[[ "$steps" =~ ^[0-9]+$ ]] && [ "$steps" -ge 16 ] || die "--steps: '$steps' is not a whole number of at least 16"
[ -x "$hsr" ] && [ -x "$run" ] || die "$hsr or $run missing (build first)"
command -v etcd >/dev/null || die "etcd is not installed (apt-get install etcd-server)"
T=$(mktemp -d "${TMPDIR:-/tmp}/hsr-healb.XXXXXX")
export HSR_FT_TOKEN="healb-$$-$RANDOM" HSR_COMM_TIMEOUT=${HSR_COMM_TIMEOUT:-20} HSR_BOOT_TIMEOUT=120 OPENBLAS_NUM_THREADS=1
unset HSR_FAULT
cpid=
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null
      [ -n "$cpid" ] && kill -TERM $cpid 2>/dev/null; wait $cpid 2>/dev/null; rm -rf "$T"' EXIT
D=${model%:*} L=${model#*:}
echo "| groups | healers | state healed (MB, the group) | joiner's heal (s) | MB/s | every state_hash equal |"
echo "|---|---|---|---|---|---|"
for G in $groups; do
  d=$T/$G
  mkdir -p "$d"
  # a coordinator per case: the last case's records (their leases) do not meet this one's
  "$hsr" coordinator --listen 127.0.0.1:0 --addr-file "$d/addr" >"$d/coord.out" 2>&1 &
  cpid=$!
  for _ in $(seq 300); do [ -s "$d/addr" ] && break; sleep 0.1; done
  [ -s "$d/addr" ] || die "the coordinator did not start: $(cat "$d/coord.out")"
  addr=$(sed 's#http://##' "$d/addr")
  args=(--model mlp --dim "$D" --layers "$L" --steps "$steps" --batch $((G * 2 * 10)) --coordinator "$addr" --replicas "$G"
        --no-progress --hash-every 0)
  pids=()
  for ((g = 0; g < G; g++)); do
    e=(); [ $g = 1 ] && e=(HSR_FAULT=0:step:5:kill)
    ( env "${e[@]}" "$run" -n 2 -- "$hsr" train "${args[@]}" --replica-id $g --log "$d/g$g.log" >"$d/g$g.out" 2>&1 ) &
    pids+=($!)
  done
  for _ in $(seq 6000); do # group 0 past step 10, or gone
    { [ -f "$d/g0.log" ] && [ "$(wc -l <"$d/g0.log")" -ge 10 ]; } || ! kill -0 "${pids[0]}" 2>/dev/null && break
    sleep 0.1
  done
  ( "$run" -n 2 -- "$hsr" train "${args[@]}" --replica-id 1 --join --log "$d/g1j.log" >"$d/g1j.out" 2>&1 ) &
  pids+=($!)
  wait "${pids[@]}" 2>/dev/null
  pids=()
  kill -TERM $cpid 2>/dev/null; wait $cpid 2>/dev/null; cpid=
  python3 - "$d" "$G" "$steps" <<'EOF' | tee -a "$T/rows"
import re, sys
d, G, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(f"{d}/g1j.out").read()
m = re.search(r"healed from replica \d+ after \d+ steps: ([0-9.]+) MB over UCX in ([0-9.]+) s \(([0-9.]+) MB/s\)"
              r"(?: in slices from (\d+) healers)?", text)
outs = [f"{d}/g{g}.out" for g in range(G) if g != 1] + [f"{d}/g1j.out"]
eq = all(re.search(rf"state_hash [0-9a-f]+ after {steps} steps: equal on replicas ", open(f).read()) for f in outs)
k = int(m.group(4)) if m and m.group(4) else (1 if m else 0)
mb, s, r = (float(m.group(1)), float(m.group(2)), float(m.group(3))) if m else (float("nan"),) * 3
print(f"| {G} | {k} | {mb:.1f} | {s:.3f} | {r:.0f} | {'yes' if eq else 'NO'} |")
EOF
done
python3 - "$T/rows" <<'EOF'
import json, sys
rows = []
for l in open(sys.argv[1]):
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    num = lambda x: None if x == "nan" else float(x)  # no heal line: null (JSON has no NaN)
    rows.append({"groups": int(c[0]), "healers": int(c[1]), "state_mb": num(c[2]), "heal_s": num(c[3]),
                 "mb_per_s": num(c[4]), "state_hash_equal": c[5] == "yes"})
print(json.dumps(rows))
EOF
