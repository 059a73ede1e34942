#!/usr/bin/env bash
# verdict.sh [--only REGEX] [--list] [--timeout S]: what the survivors call a
# dead or stopped peer, and so which detection path saw it: the kind of the
# verdict, never a time. Each scenario runs `hsr bench all_gather` under
# hsr-run (mpirun), rank 1 SIGKILLs or SIGSTOPs itself (HSR_FAULT), and every
# survivor's first verdict line must be of the expected kind:
#   exit    "was killed or crashed: its process ended without leaving hsr":
#           the node-local exit watch (its pidfd), or that rank's notice
#   died    exit, or "is unreachable: its UCX endpoint failed" (UCX peer
#           errors), or "terminated (launcher event" (PMIx)
#   stop    "is stopped (SIGSTOP"
#   silent  "stopped responding": only where nothing could know more (the
#           victim alone on its node, UCX peer errors off; there UCX's TCP
#           lane may still report the reset connection to the endpoint's
#           handler before the timeout, and the verdict is then died:
#           silent|died, whichever comes first)
# A victim reaped late is a zombie for 10 s, longer than the timeout
# (tests/faults/rank_late_reap.py): a watch that waits for the reap names it
# only when the timeout fires, and then by another path.
# Environment: HSR_BUILD (default ./build). Exit 0 when every scenario passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${HSR_BUILD:-$root/build}
hsr=$build/hsr; run=$build/hsr-run
only=""; list=0; tmo=4
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --list) list=1; shift ;;
    --timeout) tmo=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "verdict.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$hsr" ] && [ -x "$run" ] || { echo "verdict.sh: $hsr or $run missing (build first)" >&2; exit 2; }

# name ranks nodes peer_errors action reap_delay node-peers' kind other-nodes' kind
scen=(
  "kill-1n-reaped         4 1 off kill 0  exit -"
  "kill-1n-zombie         4 1 off kill 10 exit -"
  "kill-2n-zombie-ucxoff  4 2 off kill 10 exit exit"
  "kill-2n-zombie-ucxon   4 2 on  kill 10 exit died"
  "kill-alone-ucxon       2 2 on  kill 10 -    died"
  "kill-alone-ucxoff      2 2 off kill 10 -    silent|died"
  "stop-2n-ucxoff         4 2 off stop 0  stop stop"
)
pick=()
for s in "${scen[@]}"; do
  n=${s%% *}
  [ -n "$only" ] && ! [[ "$n" =~ $only ]] && continue
  pick+=("$s")
done
if [ "$list" = 1 ]; then for s in "${pick[@]}"; do echo "${s%% *}"; done; exit 0; fi
[ ${#pick[@]} -gt 0 ] || { echo "verdict.sh: no scenario matches" >&2; exit 2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/hsr-verdict-XXXXXX")
trap 'rm -rf "$out"' EXIT

kind_of() { # a verdict line -> its kind
  case "$1" in
    *"was killed or crashed: its process ended without leaving hsr"*) echo exit ;;
    *"is unreachable: its UCX endpoint failed"* | *"terminated (launcher event"* | *"was killed or crashed"*) echo died ;;
    *"is stopped (SIGSTOP"*) echo stop ;;
    *"stopped responding"*) echo silent ;;
    "") echo none ;;
    *) echo other ;;
  esac
}
fits() { # got want (want: a kind, or kinds joined by |)
  local w
  for w in ${2//|/ }; do
    [ "$1" = "$w" ] || { [ "$w" = died ] && [ "$1" = exit ]; } && return 0
  done
  return 1
}

fails=0
for s in "${pick[@]}"; do
  # shellcheck disable=SC2086
  set -- $s
  name=$1 np=$2 nodes=$3 pe=$4 act=$5 delay=$6 kmate=$7 kfar=$8
  d=$out/$name; mkdir -p "$d"
  wrap=("$here/rank.sh" "$d")
  [ "$delay" != 0 ] && wrap=("$here/rank_late_reap.py" "$d" "$delay")
  HSR_UCX_PEER_ERRORS=$pe HSR_COMM_TIMEOUT=$tmo HSR_BOOT_TIMEOUT=60 HSR_FAULT="1:all_gather:200:$act" \
    timeout -k 5 $((tmo + 40)) "$run" -n "$np" --nodes "$nodes" --launcher mpirun -- "${wrap[@]}" \
    "$hsr" bench all_gather -b 1M -e 1M -n 300 -w 5 >"$d/launcher.log" 2>&1 </dev/null
  # a stopped victim outlives its job: end it
  p=$(cat "$d/rank.1.pid" 2>/dev/null) && [ -d "/proc/$p" ] && kill -KILL "$p" 2>/dev/null
  per=$((np / nodes)) ok=1 seen=""
  for ((r = 0; r < np; r++)); do
    [ $r = 1 ] && continue
    want=$kfar; [ $((r / per)) = $((1 / per)) ] && want=$kmate
    line=$(grep -m1 "hsr error: rank 1 (node" "$d/rank.$r.log" 2>/dev/null | sed 's/.*hsr error: //')
    got=$(kind_of "$line")
    seen+=" $r:$got"
    fits "$got" "$want" || { ok=0; echo "  rank $r: expected a verdict of kind '$want', got '$got': ${line:-(none)}"; }
  done
  if [ $ok = 1 ]; then
    printf 'verdict %-24s PASS (survivor:kind%s)\n' "$name" "$seen"
  else
    printf 'verdict %-24s FAIL\n' "$name"; fails=$((fails + 1))
    grep -h "hsr error\|HSR_FAULT" "$d"/rank.*.log | head -8 | cut -c1-300 | sed 's/^/  /'
  fi
done
echo "verdict.sh: ${#pick[@]} scenario(s), $fails failed (HSR_COMM_TIMEOUT=$tmo)"
[ "$fails" = 0 ]
