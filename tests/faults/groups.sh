#!/usr/bin/env bash
# groups.sh: the fault matrix of replica groups (docs/fault-tolerance.md).
# Three groups of 2 ranks train `hsr train --model mlp` against a coordinator
# of their own on loopback (hsr coordinator); a fault hits group 1: one rank
# SIGKILLs or SIGSTOPs itself at its Nth optimizer step or inside its Nth
# cross-group all-reduce (HSR_FAULT), or every rank of the group is SIGKILLed
# from outside. Every rank's output is timestamped (rank.sh). Recorded per
# scenario: the time from the fault to the survivors' line naming the dropped
# group and to their next committed step (the log's `time`), the steps lost
# (dropped and run again), each group's exit, and processes left. A scenario
# passes when both survivors print one line naming group 1, finish every step
# with equal state hashes, and the drop comes within the timeout + 15 s.
#
# usage: groups.sh [--only REGEX] [--list] [--md FILE] [--timeout S] [--out DIR]
#   --timeout S   HSR_COMM_TIMEOUT (default 4): a silent group is dropped after 3/4 of it (one whose
#                 stopped rank is waited for directly: after HSR_STOP_TIMEOUT, 2 s)
# Environment: HSR_BUILD (default ./build). Exit status 0 when every scenario passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${HSR_BUILD:-$root/build}
hsr=$build/hsr run=$build/hsr-run wrap=$here/rank.sh
only="" list=0 md="" tmo=4 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --list) list=1; shift ;;
    --md) md=$2; shift 2 ;;
    --timeout) tmo=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "groups.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$tmo" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "groups.sh: --timeout '$tmo' is not a number of seconds" >&2; exit 2; }
[ -x "$hsr" ] && [ -x "$run" ] || { echo "groups.sh: $hsr or $run missing (build first)" >&2; exit 2; }
command -v etcd >/dev/null || { echo "SKIP: etcd is not installed (apt-get install etcd-server)"; exit 77; }

# name | how | victim rank | phase | N
scen=(
  "kill-rank0-step|hook|0|step|20:kill"
  "kill-rank1-step|hook|1|step|20:kill"
  "kill-rank1-allreduce|hook|1|ft_allreduce|20:kill"
  "kill-all-step|all|-|step|20"
  "stop-rank1-step|hook|1|step|20:stop"
  "stop-rank0-allreduce|hook|0|ft_allreduce|20:stop"
)
if [ "$list" = 1 ]; then for s in "${scen[@]}"; do echo "${s%%|*}"; done; exit 0; fi
base=${out:-$(mktemp -d "${TMPDIR:-/tmp}/hsr-groups.XXXXXX")}
mkdir -p "$base"
export HSR_FT_TOKEN="groups-$$-$RANDOM$RANDOM" HSR_COMM_TIMEOUT=$tmo OPENBLAS_NUM_THREADS=1
"$hsr" coordinator --listen 127.0.0.1:0 --addr-file "$base/addr" >"$base/coord.out" 2>&1 &
cpid=$!
for _ in $(seq 300); do [ -s "$base/addr" ] && break; sleep 0.1; done
[ -s "$base/addr" ] || { echo "groups.sh: the coordinator did not start: $(cat "$base/coord.out")"; kill $cpid; exit 1; }
addr=$(sed 's#http://##' "$base/addr")
cleanup() {
  kill -TERM $cpid 2>/dev/null; wait $cpid 2>/dev/null
  [ -z "$out" ] && rm -rf "$base"
}
trap cleanup EXIT
steps=400
rows=() fails=0
first_ts() { grep -h "$1" "$2" 2>/dev/null | head -1 | awk '{print $1}'; } # PATTERN FILE -> its timestamp
for s in "${scen[@]}"; do
  IFS='|' read -r name how victim phase nth <<<"$s"
  [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
  d=$base/$name
  mkdir -p "$d/g0" "$d/g1" "$d/g2"
  pids=()
  for g in 0 1 2; do
    envs=()
    [ "$g" = 1 ] && [ "$how" = hook ] && envs=(HSR_FAULT="$victim:$phase:$nth")
    ( env "${envs[@]}" timeout 300 "$run" -n 2 -- "$wrap" "$d/g$g" "$hsr" train --steps $steps --batch 60 \
        --coordinator "$addr" --replica-id $g --replicas 3 --no-progress --log "$d/g$g.log" >"$d/g$g.run" 2>&1
      echo $? >"$d/g$g.rc" ) &
    pids+=($!)
  done
  tfault=""
  if [ "$how" = all ]; then # every rank of group 1, from outside, once it logged step N
    for _ in $(seq 1200); do [ -f "$d/g1.log" ] && [ "$(wc -l <"$d/g1.log")" -ge "$nth" ] && break; sleep 0.05; done
    tfault=$EPOCHREALTIME
    kill -KILL $(cat "$d/g1"/rank.*.pid 2>/dev/null) 2>/dev/null
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  [ -z "$tfault" ] && tfault=$(first_ts "HSR_FAULT:" "$d/g1/rank.$victim.log")
  tdrop=$(first_ts "replica(s) 1 dropped" "$d/g0/rank.0.log")
  tnext=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if 1 not in r["replicas"]: print(r["time"]); break' "$d/g0.log" 2>/dev/null)
  lost=$(grep -h "dropped on every replica" "$d/g0/rank.0.log" | wc -l)
  named=0
  for g in 0 2; do [ "$(grep -c "replica(s) 1 dropped" "$d/g$g/rank.0.log" 2>/dev/null)" = 1 ] && named=$((named + 1)); done
  equal=0
  for g in 0 2; do grep -q "after $steps steps: equal on replicas 0,2" "$d/g$g/rank.0.log" 2>/dev/null && equal=$((equal + 1)); done
  left=$(pgrep -f -- "--log $d/" | wc -l)
  rcs="$(cat "$d/g0.rc"),$(cat "$d/g1.rc"),$(cat "$d/g2.rc")"
  fmt() { [ -n "$1" ] && [ -n "$2" ] && python3 -c "print(f'{$1 - $2:.2f}')" || echo -; }
  dd=$(fmt "$tdrop" "$tfault") dn=$(fmt "$tnext" "$tfault")
  res=PASS
  [ "$named" = 2 ] && [ "$equal" = 2 ] && [ "$left" = 0 ] || res=FAIL
  [ "$dd" != - ] && python3 -c "import sys; sys.exit(not ($dd <= $tmo + 15))" || res=FAIL
  [ "$res" = FAIL ] && fails=$((fails + 1))
  rows+=("| $name | $dd | $dn | $lost | $named/2 | $equal/2 | $rcs | $left | $res |")
  echo "${rows[-1]}"
  if [ "$res" = FAIL ]; then # what the groups said, before the folder goes: errors and crash reports first
    for g in 0 1 2; do
      echo "  group $g (exit $(cat "$d/g$g.rc")):"
      grep -h -E "hsr (fatal|error)|HSR_ERR" "$d/g$g"/rank.*.log 2>/dev/null | head -30 | sed 's/^/    /'
      tail -n 3 "$d/g$g.run" 2>/dev/null | sed 's/^/    /'
    done
  fi
done
hdr="| scenario (group 1) | fault to the survivors' drop line (s) | fault to their next committed step (s) | steps dropped and run again | survivors naming it | survivors ending with equal state_hash | exits (groups 0,1,2) | processes left | result |"
sep="|---|---|---|---|---|---|---|---|---|"
if [ -n "$md" ]; then { echo "$hdr"; echo "$sep"; printf '%s\n' "${rows[@]}"; } >"$md"; fi
echo "groups.sh: $((${#rows[@]} - fails)) of ${#rows[@]} scenarios passed (HSR_COMM_TIMEOUT=$tmo)"
[ "$fails" = 0 ]
