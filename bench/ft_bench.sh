#!/usr/bin/env bash
# ft_bench.sh: the figures of docs/fault-tolerance.md, measured. For each
# model size: three replica groups of 2 ranks (hsr train --model mlp) on one
# host against a coordinator of their own; group 1 SIGKILLs itself at step 20
# and is restarted with --join once group 0 is past step 40. Reports the
# state that heals (bytes over UCX, the whole group), the healing time (the
# joiner's ranks, the slowest; healer side too), the time from the kill to the
# survivors' next committed step, and the step time of the groups beside one
# hybrid 3 x 2 job on the same data (what the cross-group all-reduce over UCX
# and the vote through etcd cost per step).
#
# usage: ft_bench.sh [--sizes "D:L D:L ..."] [--steps N] [--timeout S]
#   --sizes   MLP width:blocks per case (default "64:4 256:8 512:8")
#   --steps   steps per run (default 300)
# Environment: HSR_BUILD (default ./build). Prints a Markdown table.
set -u
here=$(cd "$(dirname "$0")" && pwd)
prog=ft_bench.sh
. "$here/../scripts/argcheck.sh"
ac_env dir HSR_BUILD
build=${HSR_BUILD:-$here/../build}
hsr=$build/hsr run=$build/hsr-run wrap=$here/../tests/faults/rank.sh
sizes="64:4 256:8 512:8" steps=300 tmo=10
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes|--steps|--timeout) ac_need "$1" $# "${2:-}" ;;&
    --sizes) sizes=$2; shift 2 ;;
    --steps) ac_int --steps "$2" 60 100000000; steps=$2; shift 2 ;;
    --timeout) ac_num --timeout "$2"; tmo=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) ac_die "unknown argument '$1'" ;;
  esac
done
for c in $sizes; do [[ "$c" =~ ^[0-9]+:[0-9]+$ ]] || ac_die "--sizes: '$c' is not D:L (width:blocks)"; done
[ -x "$hsr" ] && [ -x "$run" ] || { echo "ft_bench.sh: $hsr or $run missing (build first)" >&2; exit 2; }
command -v etcd >/dev/null || { echo "ft_bench.sh: etcd is not installed (apt-get install etcd-server)" >&2; exit 2; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hsr-ftb.XXXXXX")
export HSR_FT_TOKEN="bench-$$-$RANDOM" HSR_COMM_TIMEOUT=$tmo OPENBLAS_NUM_THREADS=1
"$hsr" coordinator --listen 127.0.0.1:0 --addr-file "$T/addr" >"$T/coord.out" 2>&1 &
cpid=$!
trap 'kill -TERM $cpid 2>/dev/null; wait $cpid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 300); do [ -s "$T/addr" ] && break; sleep 0.1; done
addr=$(sed 's#http://##' "$T/addr")
echo "| model (mlp D:L, parameters) | state healed (MB, the group) | healing: joiner (s) | healer (s) | kill to the survivors' next committed step (s) | step, 3 groups (ms) | step, one hybrid 3 x 2 job (ms) |"
echo "|---|---|---|---|---|---|---|"
for c in $sizes; do
  D=${c%:*} L=${c#*:}
  d=$T/$D-$L
  mkdir -p "$d"/g0 "$d"/g1 "$d"/g1j "$d"/g2
  args=(--model mlp --dim "$D" --layers "$L" --steps "$steps" --batch 60 --coordinator "$addr" --replicas 3
        --no-progress --hash-every 0)
  pids=()
  for g in 0 1 2; do
    e=(); [ $g = 1 ] && e=(HSR_FAULT=0:step:20:kill)
    ( env "${e[@]}" "$run" -n 2 -- "$wrap" "$d/g$g" "$hsr" train "${args[@]}" --replica-id $g --log "$d/g$g.log" \
        >"$d/g$g.run" 2>&1 ) &
    pids+=($!)
  done
  for _ in $(seq 6000); do [ -f "$d/g0.log" ] && [ "$(wc -l <"$d/g0.log")" -ge 40 ] && break; sleep 0.1; done
  ( "$run" -n 2 -- "$wrap" "$d/g1j" "$hsr" train "${args[@]}" --replica-id 1 --join --log "$d/g1j.log" >"$d/g1j.run" 2>&1 ) &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; done
  "$run" -n 6 --nodes 3 -- "$hsr" train --model mlp --dim "$D" --layers "$L" --steps 60 --batch 60 --replicate 3 \
    --shard 2 --no-progress --log "$d/hy.log" >"$d/hy.out" 2>&1
  python3 - "$d" "$D" "$L" <<'EOF'
import json, re, sys
d, D, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
params = D * D + D + L * (8 * D * D + 5 * D) + 8 * D + 8  # embedding, blocks, head: weights and biases
def line(f, pat):
    for l in open(f):
        m = re.search(pat, l)
        if m: return l.split()[0], m
    return None, None
_, hm = line(f"{d}/g1j/rank.0.log", r"healed from replica (\d+) after (\d+) steps: ([0-9.]+) MB over UCX in ([0-9.]+) s")
# every live group heals a slice (" (a slice: one of 2 healers)"): the slowest healer's time
sent = r"sent this group's state to replica 1 after (\d+) steps(?: \([^)]*\))?: ([0-9.]+) MB in ([0-9.]+) s"
sm = max((m for m in (line(f"{d}/g{g}/rank.0.log", sent)[1] for g in (0, 2)) if m),
         key=lambda m: float(m.group(3)), default=None)
tk, _ = line(f"{d}/g1/rank.0.log", r"HSR_FAULT:")
nxt = None
for l in open(f"{d}/g0.log"):
    r = json.loads(l)
    if 1 not in r["replicas"]: nxt = r["time"]; break
def ms(f, skip):
    rows = [json.loads(l) for l in open(f)]
    v = sorted(r["step_ms"] for r in rows[skip:skip + 100] if 1 in r.get("replicas", [1]))
    return v[len(v) // 2] if v else float("nan")
print(f"| {D}:{L}, {params/1e6:.2f}M | {float(hm.group(3)) if hm else float('nan'):.1f} | "
      f"{float(hm.group(4)) if hm else float('nan'):.3f} | {float(sm.group(3)) if sm else float('nan'):.3f} | "
      f"{(nxt - float(tk)) if (nxt and tk) else float('nan'):.2f} | {ms(f'{d}/g0.log', 1):.2f} | {ms(f'{d}/hy.log', 1):.2f} |")
EOF
done
