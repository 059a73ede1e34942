#!/usr/bin/env bash
# matrix.sh: the fault matrix. Starts real jobs (hsr train, hsr bench) under
# mpirun and srun on one node or two simulated nodes, makes one rank SIGKILL or
# SIGSTOP itself at the Nth call of a phase (HSR_FAULT, a test hook), or sleep
# for less than the timeout (a slow rank that must not fail the job), and
# records for each scenario: the time from the fault to the first line naming
# the victim, to the end of the job, which survivors named it, every rank's exit
# status, the launcher's, and hsr files left in /dev/shm and processes left.
#
# usage: matrix.sh [--only REGEX] [--quick] [--list] [--out DIR] [--md FILE]
#                  [--timeout S] [--launchers mpirun,srun]
#   --only REGEX   scenarios whose name matches (e.g. 'train-kill-all_gather-mpirun-2n')
#   --quick        the CTest subset
#   --list         print the scenario names and exit
#   --out DIR      keep every rank's log there (default: a temporary folder, removed)
#   --md FILE      also write the table as Markdown
#   --timeout S    HSR_COMM_TIMEOUT of the jobs (default 5)
# Environment: HSR_BUILD (default ./build: hsr, hsr-run), SLURM_CONF (srun:
# a running Slurm; without one srun scenarios start tests/slurm's on a spare
# port and stop it at the end). Exit status 0 when every scenario passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${HSR_BUILD:-$root/build}
hsr=$build/hsr; run=$build/hsr-run; wrap=$here/rank.sh
only=""; quick=0; list=0; out=""; md=""; tmo=5; launchers="mpirun,srun"
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --list) list=1; shift ;;
    --out) out=$2; shift 2 ;;
    --md) md=$2; shift 2 ;;
    --timeout) tmo=$2; shift 2 ;;
    --launchers) launchers=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "matrix.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$tmo" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "matrix.sh: --timeout '$tmo' is not a number of seconds" >&2; exit 2; }
[ -x "$hsr" ] && [ -x "$run" ] || { echo "matrix.sh: $hsr or $run missing (build first)" >&2; exit 2; }

# ---- scenarios: name prog phase N action victim launcher nodes ----------------
# N is the victim's Nth call of the phase: mid-run for these jobs.
scen=()
add() { scen+=("$1-$3-$2-$6-${7}n $1 $2 $4 $3 $5 $6 $7"); }
nth() { # prog phase nodes -> N
  case "$1:$2:$3" in
    train:all_gather:*) echo 100 ;; train:reduce_scatter:*) echo 50 ;;
    train:all_reduce:1) echo 20 ;; train:all_reduce:2) echo 50 ;;
    train:step:*) echo 10 ;; train:ckpt_save:*) echo 2 ;; train:ckpt_async:*) echo 2 ;;
    bench:*) echo 200 ;;
  esac
}
for l in mpirun srun; do
  for nodes in 1 2; do
    for act in kill stop; do
      for ph in all_gather reduce_scatter all_reduce step ckpt_save ckpt_async; do
        v=1; [ "$nodes" = 2 ] && [ "$ph" = all_reduce -o "$ph" = step ] && v=2
        add train "$ph" "$act" "$(nth train $ph $nodes)" "$v" "$l" "$nodes"
      done
      for ph in all_gather reduce_scatter all_reduce; do
        add bench "$ph" "$act" "$(nth bench $ph $nodes)" 1 "$l" "$nodes"
      done
    done
    add train all_gather sleep:2 100 1 "$l" "$nodes"
    add bench all_reduce sleep:2 200 1 "$l" "$nodes"
  done
done
# the CTest subset (tests/faults.cmake)
quick_set=" train-kill-all_gather-mpirun-2n bench-kill-all_gather-mpirun-2n train-stop-reduce_scatter-mpirun-2n "
quick_set+="train-kill-step-mpirun-1n train-kill-ckpt_save-mpirun-2n train-kill-ckpt_async-mpirun-2n "
quick_set+="train-stop-ckpt_async-mpirun-1n train-sleep:2-all_gather-mpirun-2n "
quick_set+="train-stop-all_reduce-srun-2n train-kill-reduce_scatter-srun-1n "

pick=()
for s in "${scen[@]}"; do
  name=${s%% *}
  [ -n "$only" ] && ! [[ "$name" =~ $only ]] && continue
  [ "$quick" = 1 ] && [[ "$quick_set" != *" $name "* ]] && continue
  l=$(echo "$s" | awk '{print $7}')
  [[ ",$launchers," == *",$l,"* ]] || continue
  pick+=("$s")
done
if [ "$list" = 1 ]; then for s in "${pick[@]}"; do echo "${s%% *}"; done; exit 0; fi
[ ${#pick[@]} -gt 0 ] || { echo "matrix.sh: no scenario matches" >&2; exit 2; }

keep=1
[ -n "$out" ] || { out=$(mktemp -d /tmp/hsr-faults.XXXXXX); keep=0; }
mkdir -p "$out"

# ---- Slurm for the srun scenarios ------------------------------------------
own_slurm=""
need_srun=0
for s in "${pick[@]}"; do [[ "$s" == *" srun "* ]] && need_srun=1; done
if [ "$need_srun" = 1 ] && [ -z "${SLURM_CONF:-}" ]; then
  own_slurm=$out/slurm
  port=$((18000 + RANDOM % 2000 * 2))
  if "$root/tests/slurm/slurm-up.sh" "$own_slurm" "$port" > "$out/slurm-up.log" 2>&1; then
    export SLURM_CONF=$own_slurm/slurm.conf
  else
    echo "matrix.sh: no Slurm ($(tail -1 "$out/slurm-up.log")): srun scenarios skipped" >&2
    own_slurm=""
  fi
fi
cleanup() { [ -n "$own_slurm" ] && "$root/tests/slurm/slurm-down.sh" "$own_slurm" >/dev/null 2>&1; [ "$keep" = 0 ] && rm -rf "$out"; }
trap cleanup EXIT

# ---- one scenario -----------------------------------------------------------
# first timestamp of a line matching $2 in log $1 (empty when none)
first_at() { grep -m1 -E "$2" "$1" 2>/dev/null | awk '{print $1}'; }
hsr_files_of() { # pids... -> hsr files in /dev/shm naming one of them
  local p n=0
  for p in "$@"; do n=$((n + $(ls /dev/shm 2>/dev/null | grep -cE "^hsr-[0-9a-f]+-$p-"))); done
  echo "$n"
}

rows=(); fails=0
run_one() {
  local name=$1 prog=$2 phase=$3 n=$4 act=$5 victim=$6 l=$7 nodes=$8
  local d=$out/$name np=4
  rm -rf "$d"; mkdir -p "$d"
  if [ "$l" = srun ] && [ -z "${SLURM_CONF:-}" ]; then rows+=("$name|skipped (no Slurm)"); return; fi
  local args=()
  if [ "$prog" = train ]; then
    args=(train --steps 60 --no-progress)
    [ "$phase" = ckpt_save ] && args+=(--ckpt "$d/ckpt" --save-every 5)
    # the background writer's HSR_FAULT point (between its data and the agreement) while the training goes on
    [ "$phase" = ckpt_async ] && args+=(--ckpt "$d/ckpt" --save-every 5 --async-save)
  else
    args=(bench "$phase" -b 1M -e 1M -n 300 -w 5)
  fi
  local limit
  limit=$(awk -v t="$tmo" 'BEGIN {print int(t + 30)}')
  local t0 t1 rc
  t0=$EPOCHREALTIME
  local hook=$phase
  [ "$phase" = ckpt_async ] && hook=ckpt_save
  HSR_COMM_TIMEOUT=$tmo HSR_BOOT_TIMEOUT=60 HSR_FAULT="$victim:$hook:$n:$act" \
    timeout -k 5 "$limit" "$run" --launcher "$l" -n $np --nodes "$nodes" -- "$wrap" "$d" "$hsr" "${args[@]}" \
    > "$d/launcher.log" 2>&1 < /dev/null
  rc=$?
  t1=$EPOCHREALTIME
  # every rank's process is gone (a stopped rank orphaned by its launcher is killed here)
  local pids=() left=0 p
  for f in "$d"/rank.*.pid; do [ -e "$f" ] && pids+=("$(cat "$f")"); done
  sleep 0.2
  for p in "${pids[@]}"; do
    if [ -d "/proc/$p" ] && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "$hsr"; then
      left=$((left + 1)); kill -KILL "$p" 2>/dev/null
    fi
  done
  local shm; shm=$(hsr_files_of "${pids[@]}")
  local tf ti named=0 surv=0 codes="" r first="" ok=1 why=""
  ti=$(first_at "$d/rank.$victim.log" "HSR_FAULT:")
  for ((r = 0; r < np; r++)); do
    local c; c=$(cat "$d/rank.$r.rc" 2>/dev/null); codes+="${c:--}"
    [ $r -lt $((np - 1)) ] && codes+=","
    [ $r = "$victim" ] && continue
    surv=$((surv + 1))
    tf=$(first_at "$d/rank.$r.log" "rank $victim \\(node [0-9]+")
    if [ -n "$tf" ]; then
      named=$((named + 1))
      if [ -z "$first" ] || awk -v a="$tf" -v b="$first" 'BEGIN {exit !(a < b)}'; then first=$tf; fi
    fi
  done
  local to_err="-" to_end
  [ -n "$ti" ] && [ -n "$first" ] && to_err=$(awk -v a="$first" -v b="$ti" 'BEGIN {printf "%.2f", a - b}')
  to_end=$(awk -v a="$t1" -v b="${ti:-$t0}" 'BEGIN {printf "%.2f", a - b}')
  [ -n "$ti" ] || { ok=0; why+="the fault did not fire; "; }
  if [[ "$act" == sleep:* ]]; then
    [ "$rc" = 0 ] || { ok=0; why+="launcher exit $rc; "; }
    [ "$codes" = "0,0,0,0" ] || { ok=0; why+="rank exits $codes; "; }
    grep -q "hsr error" "$d"/rank.*.log && { ok=0; why+="an hsr error was printed; "; }
  else
    [ "$rc" != 0 ] || { ok=0; why+="launcher exit 0; "; }
    [ "$named" = "$surv" ] || { ok=0; why+="$named of $surv survivors named rank $victim; "; }
    awk -v e="$to_end" -v t="$tmo" 'BEGIN {exit !(e <= t + 15)}' || { ok=0; why+="ended after ${to_end} s; "; }
  fi
  [ "$shm" = 0 ] || { ok=0; why+="$shm hsr files in /dev/shm; "; }
  [ "$left" = 0 ] || { ok=0; why+="$left processes left; "; }
  local verdict=PASS
  [ $ok = 1 ] || { verdict="FAIL: ${why%; }"; fails=$((fails + 1)); }
  rows+=("$name|$l|${nodes}|$prog|$phase #$n|$act|$victim|$to_err|$to_end|$named/$surv|$codes|$rc|$shm|$left|$verdict")
  printf '%-40s fault->named %5s s  ->end %6s s  named %s  ranks %s  launcher %s  shm %s  left %s  %s\n' \
    "$name" "$to_err" "$to_end" "$named/$surv" "$codes" "$rc" "$shm" "$left" "$verdict"
  if [ "$verdict" != PASS ]; then
    echo "  --- $d (first lines naming the victim, launcher tail)"
    grep -h "hsr error\|HSR_FAULT" "$d"/rank.*.log | head -6 | cut -c1-300 | sed 's/^/  /'
    tail -3 "$d/launcher.log" | sed 's/^/  /'
  fi
}

for s in "${pick[@]}"; do
  # shellcheck disable=SC2086
  set -- $s
  run_one "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8"
done

hdr="| scenario | launcher | nodes | program | phase (victim's Nth call) | fault | victim | fault to first named error (s) | fault to job end (s) | survivors naming the victim | rank exit codes | launcher exit | hsr files left in /dev/shm | processes left | result |"
sep="|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
if [ -n "$md" ]; then
  { echo "$hdr"; echo "$sep"; for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done; } > "$md"
fi
echo "matrix.sh: ${#pick[@]} scenario(s), $fails failed (HSR_COMM_TIMEOUT=$tmo)"
[ "$fails" = 0 ]
