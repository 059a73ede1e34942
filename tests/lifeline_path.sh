#!/usr/bin/env bash
# lifeline_path.sh HSR_RUN MR_BOOT: which path ends a rank when its launcher
# is SIGKILLed (mpirun: its PMIx server goes with it). Two ranks of mr_boot
# hold inside the job; mpirun gets SIGKILL; each rank must then name the
# path that ended it, by its lines and its exit status, not by a time:
#   plain:      "the launcher is gone (the connection to its PMIx server was
#               lost)", then its own SIGTERM's default action: exit 143, and
#               never the fallback line ("did not end 5 s after SIGTERM");
#   keep-term:  the program keeps SIGTERM (a handler of its own), so the
#               same line, then the fallback: "did not end 5 s after SIGTERM:
#               killing this rank", exit 137.
# Each wait is bounded (60 s); the ranks run under tests/faults/rank.sh,
# which records their output and exit status.
set -u
run=$1 boot=$2
here=$(cd "$(dirname "$0")" && pwd)
wrap=$here/faults/rank.sh
t=$(mktemp -d "${TMPDIR:-/tmp}/hsr-lifeline.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$t"
}
trap cleanup EXIT
fail=0
lost='the launcher is gone \(the connection to its PMIx server was lost\): this rank ends'
fallback='did not end 5 s after SIGTERM: killing this rank'

# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS
wait_for() {
  local until=$((EPOCHSECONDS + $1))
  shift
  until "$@"; do
    [ "$EPOCHSECONDS" -gt "$until" ] && return 1
    sleep 0.1
  done
}
holding() { grep -qs 'mr_boot: holding' "$1/rank.0.log" && grep -qs 'mr_boot: holding' "$1/rank.1.log"; }
ended() { [ -s "$1/rank.0.rc" ] && [ -s "$1/rank.1.rc" ]; }

one() { # NAME WANT_RC WANT_FALLBACK(0|1) MR_BOOT_ARGS...
  local name=$1 want_rc=$2 want_fb=$3
  shift 3
  local d=$t/$name r
  mkdir -p "$d"
  HSR_BOOT_TIMEOUT=60 setsid "$run" --launcher mpirun -n 2 -- "$wrap" "$d" "$boot" --size 2 --hold 60 "$@" \
    > "$d/launcher.log" 2>&1 < /dev/null &
  pids+=($!)
  if ! wait_for 60 holding "$d"; then
    echo "FAIL $name: the ranks did not reach their hold"; tail -5 "$d"/*.log; fail=1; return
  fi
  # rank.sh's parent is mpirun
  local rs mp
  rs=$(awk '/^PPid:/ {print $2}' "/proc/$(< "$d/rank.0.pid")/status")
  mp=$(awk '/^PPid:/ {print $2}' "/proc/$rs/status")
  if ! tr '\0' ' ' < "/proc/$mp/cmdline" | grep -q 'mpirun\|orterun'; then
    echo "FAIL $name: rank 0's grandparent $mp is not mpirun: $(tr '\0' ' ' < "/proc/$mp/cmdline")"; fail=1; return
  fi
  kill -KILL "$mp"
  if ! wait_for 60 ended "$d"; then
    echo "FAIL $name: a rank did not end within 60 s of mpirun's SIGKILL"; fail=1; return
  fi
  for r in 0 1; do
    local rc nl nf
    rc=$(< "$d/rank.$r.rc")
    nl=$(grep -cE "$lost" "$d/rank.$r.log")
    nf=$(grep -c "$fallback" "$d/rank.$r.log")
    local ok=1
    [ "$nl" = 1 ] || ok=0
    [ "$rc" = "$want_rc" ] || ok=0
    [ "$nf" = "$want_fb" ] || ok=0
    if [ $ok = 1 ]; then
      echo "ok   $name rank $r: the lost PMIx connection named, fallback lines $nf, exit $rc"
    else
      echo "FAIL $name rank $r: lost-connection lines $nl (want 1), fallback lines $nf (want $want_fb), exit $rc (want $want_rc)"
      sed 's/^/  /' "$d/rank.$r.log" | tail -8
      fail=1
    fi
  done
}

one plain 143 0
one keep-term 137 1 --keep-term
exit $fail
