#!/usr/bin/env bash
# matrix.sh: the fault matrix. Starts real jobs (hsr train, hsr bench) under
# mpirun and srun on one node or two simulated nodes, makes one rank SIGKILL or
# SIGSTOP itself at the Nth call of a phase (HSR_FAULT, a test hook), or every
# rank of its node SIGKILLed at once (a lost node), or sleep for less than the
# timeout (a slow rank that must not fail the job), or ends the launcher
# itself (Ctrl-C on a terminal, twice; two SIGINTs; SIGTERM to its process
# group; SIGKILL to hsr-run or to mpirun/srun: launcher.py), and records for
# each scenario: the time from the fault to the first line naming the victim,
# to the end of the job and to the last rank's exit, which survivors named it,
# every rank's exit status, the launcher's, and hsr files left in /dev/shm and
# processes left.
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
hsr=$build/hsr; run=$build/hsr-run; wrap=$here/rank.sh; lf=$here/launcher.py
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
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "matrix.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$tmo" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "matrix.sh: --timeout '$tmo' is not a number of seconds" >&2; exit 2; }
[ -x "$hsr" ] && [ -x "$run" ] || { echo "matrix.sh: $hsr or $run missing (build first)" >&2; exit 2; }

# ---- scenarios: name prog phase N action victim launcher nodes ----------------
# N is the victim's Nth call of the phase: mid-run for these jobs.
scen=()
add() { # prog phase act N victim launcher nodes [off: HSR_UCX_PEER_ERRORS=off]
  local pe=${8:-on} sfx=""
  [ "$pe" = off ] && sfx=-peoff
  scen+=("$1-$3-$2-$6-${7}n$sfx $1 $2 $4 $3 $5 $6 $7 $pe")
}
nth() { # prog phase nodes -> N
  case "$1:$2:$3" in
    train:all_gather:*) echo 100 ;; train:reduce_scatter:*) echo 50 ;;
    train:all_reduce:1) echo 20 ;; train:all_reduce:2) echo 50 ;;
    train:step:*) echo 10 ;; train:ckpt_save:*) echo 2 ;; train:ckpt_async:*) echo 2 ;;
    train:ckpt_last:*) echo 12 ;; train:ckpt_done:*) echo 12 ;; # the 12th save of 60 steps every 5: the last
    train:last_step:*) echo 60 ;; # the optimizer step of the last of 60 steps
    train:boot:*) echo 1 ;; train:final:*) echo 1 ;; train:teardown:*) echo 1 ;;
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
  # the last moments of a run: the victim dies in the final async save's commit, after the last step
  # (ckpt_last: in its commit; ckpt_done: once it has committed, as the others finish the run)
  for nodes in 1 2; do
    # the victim on the other node at 2 nodes: no node peer sees its process end, the survivors must find it
    for ph in ckpt_last ckpt_done; do add train "$ph" kill "$(nth train $ph $nodes)" "$nodes" "$l" "$nodes"; done
  done
  # every phase of a run, from the bootstrap's first exchange to the teardown, with UCX peer errors on and
  # off (between simulated nodes; one node has no UCX): boot (the bootstrap's exchange, before any
  # communicator), the last step, the final save's commit and after it, the final barrier, the teardown
  for nodes in 1 2; do
    for pe in on off; do
      [ "$nodes" = 1 ] && [ "$pe" = off ] && continue
      for ph in boot last_step ckpt_last ckpt_done final teardown; do
        # ckpt_last/ckpt_done at "on" are the rows above
        [ "$pe" = on ] && [[ "$ph" == ckpt_* ]] && continue
        add train "$ph" kill "$(nth train $ph $nodes)" "$nodes" "$l" "$nodes" "$pe"
      done
    done
  done
  # at HSR_COMM_TIMEOUT's floor (1 s: run with --timeout 1), a rank half a second late fails nothing
  add train all_gather sleep:0.5 100 1 "$l" 2
  # a lost node: ranks 2 and 3 (node 1) at once, at rank 2's Nth call
  for ph in all_gather reduce_scatter all_reduce; do add train "$ph" killnode "$(nth train $ph 2)" 2 "$l" 2; done
  # ... with UCX peer errors off: no endpoint says it; the launcher ends the job first
  for ph in all_gather all_reduce; do add train "$ph" killnode "$(nth train $ph 2)" 2 "$l" 2 off; done
  add bench all_reduce killnode 200 2 "$l" 2
  # the launcher's own death
  for a in ctrlc ctrlc2 int2 pgterm kill9 kill9launcher; do scen+=("launcher-$a-$l-2n train launcher 0 $a - $l 2"); done
done
# the CTest subset (tests/faults.cmake)
quick_set=" train-kill-all_gather-mpirun-2n bench-kill-all_gather-mpirun-2n train-stop-reduce_scatter-mpirun-2n "
quick_set+="train-kill-step-mpirun-1n train-kill-ckpt_save-mpirun-2n train-kill-ckpt_async-mpirun-2n "
quick_set+="train-stop-ckpt_async-mpirun-1n train-sleep:2-all_gather-mpirun-2n "
quick_set+="train-kill-ckpt_last-mpirun-2n train-kill-ckpt_done-mpirun-2n train-kill-ckpt_done-srun-2n "
quick_set+="train-stop-all_reduce-srun-2n train-kill-reduce_scatter-srun-1n train-killnode-all_gather-mpirun-2n "
quick_set+="train-killnode-all_reduce-srun-2n train-killnode-all_gather-mpirun-2n-peoff launcher-ctrlc-mpirun-2n launcher-ctrlc2-mpirun-2n launcher-pgterm-mpirun-2n "
quick_set+="launcher-kill9-mpirun-2n launcher-kill9launcher-mpirun-2n launcher-kill9-srun-2n "
quick_set+="train-kill-boot-mpirun-1n train-kill-last_step-mpirun-2n train-kill-final-mpirun-2n-peoff "
quick_set+="train-kill-teardown-mpirun-1n train-kill-teardown-mpirun-2n train-kill-ckpt_done-mpirun-2n-peoff "
quick_set+="train-kill-final-srun-2n-peoff train-kill-teardown-srun-2n train-kill-boot-srun-1n train-kill-boot-srun-2n "
quick_set+="train-kill-boot-srun-2n-peoff train-killnode-all_gather-srun-2n-peoff train-killnode-all_reduce-srun-2n-peoff "

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

# The moment the last of the job's ranks ended, into DIR/last_exit: polled
# every 20 ms once all NP pid files exist (a zombie has ended). Bounded by LIMIT s.
watch_exit() { # DIR NP LIMIT
  local d=$1 np=$2 until=$((EPOCHSECONDS + $3)) f p st alive pids=()
  while :; do
    pids=()
    for f in "$d"/rank.*.pid; do [ -s "$f" ] && pids+=("$(< "$f")"); done
    [ ${#pids[@]} -ge "$np" ] && break
    [ "$EPOCHSECONDS" -gt "$until" ] && return
    sleep 0.05
  done
  while :; do
    alive=0
    for p in "${pids[@]}"; do
      st=Z
      [ -r "/proc/$p/stat" ] && read -r _ _ st _ < "/proc/$p/stat" 2>/dev/null
      [ "$st" != Z ] && { alive=1; break; }
    done
    [ $alive = 0 ] && { echo "$EPOCHREALTIME" > "$d/last_exit"; return; }
    [ "$EPOCHSECONDS" -gt "$until" ] && return
    sleep 0.02
  done
}

# Which path ended a rank, from its own lines (launch/lifeline.c): "lost" (the
# PMIx server's connection), "parent" (its parent exited), "SIGTERM" etc. (a
# signal from outside, the launcher's), "fallback" (the rank kept the signal
# and was SIGKILLed 5 s later), "-" (none: SIGKILLed from outside).
lifeline_of() { # LOG
  if grep -q 'did not end 5 s after SIG' "$1"; then echo fallback
  elif grep -q 'the launcher is gone (the connection to its PMIx server was lost)' "$1"; then echo lost
  elif grep -q 'the launcher is gone (parent process' "$1"; then echo parent
  else grep -om1 'lifeline: SIG[A-Z]* from outside' "$1" | sed 's/lifeline: //; s/ from outside//' | grep . || echo -
  fi
}
# The paths a launcher scenario may take on each rank (a regex): mpirun
# SIGKILLed drops the ranks' PMIx connection; one signal to hsr-run is the
# launcher's SIGTERM to its ranks; a second one SIGKILLs mpirun 0.2 s later,
# which races mpirun's own SIGTERM (either is the lifeline's). srun:
# slurmstepd ends the step's tasks itself (SIGKILL: nothing to name, "-").
# Never the fallback.
lifeline_want() { # ACT LAUNCHER
  case "$2:$1" in
    mpirun:kill9launcher) echo lost ;;
    mpirun:ctrlc2 | mpirun:int2) echo 'lost|SIGTERM' ;;
    mpirun:*) echo SIGTERM ;;
    srun:*) echo - ;;
  esac
}

rows=(); fails=0
run_one() {
  local name=$1 prog=$2 phase=$3 n=$4 act=$5 victim=$6 l=$7 nodes=$8 pe=${9:-on}
  local d=$out/$name np=4
  rm -rf "$d"; mkdir -p "$d"
  if [ "$l" = srun ] && [ -z "${SLURM_CONF:-}" ]; then rows+=("$name|skipped (no Slurm)"); return; fi
  local args=()
  if [ "$phase" = launcher ]; then
    args=(train --steps 100000 --no-progress)
  elif [ "$prog" = train ]; then
    args=(train --steps 60 --no-progress)
    [ "$phase" = ckpt_save ] && args+=(--ckpt "$d/ckpt" --save-every 5)
    # the background writer's HSR_FAULT point (between its data and the agreement) while the training goes on
    [ "$phase" = ckpt_async ] && args+=(--ckpt "$d/ckpt" --save-every 5 --async-save)
    case $phase in ckpt_last | ckpt_done | last_step | final | teardown | boot) args+=(--ckpt "$d/ckpt" --save-every 5 --async-save) ;; esac
  else
    args=(bench "$phase" -b 1M -e 1M -n 300 -w 5)
  fi
  # the victims: one rank, or every rank of its node (killnode)
  local victims=$victim per=$((np / nodes)) v0
  if [ "$act" = killnode ]; then
    v0=$((victim / per * per)); victims=$(seq -s ' ' "$v0" $((v0 + per - 1)))
  fi
  local vre="(${victims// /|})"
  local limit
  limit=$(awk -v t="$tmo" 'BEGIN {print int(t + 30)}')
  local t0 t1 rc
  watch_exit "$d" "$np" $((limit + 10)) &
  local watcher=$!
  t0=$EPOCHREALTIME
  if [ "$phase" = launcher ]; then # training has started: then the fault
    ( until=$((EPOCHSECONDS + limit))
      until grep -qs ' hsr train: ' "$d/rank.0.log"; do [ "$EPOCHSECONDS" -gt "$until" ] && exit; sleep 0.1; done
      sleep 1; touch "$d/started" ) &
    # HSR_LOG=info: the lifeline names the signal that ended a rank (lifeline_of)
    HSR_LOG=info HSR_COMM_TIMEOUT=$tmo HSR_BOOT_TIMEOUT=60 timeout -k 5 "$limit" python3 "$lf" "$act" "$d/started" "$d/tty.log" -- \
      "$run" --launcher "$l" -n $np --nodes "$nodes" -- "$wrap" "$d" "$hsr" "${args[@]}" > "$d/launcher.log" 2>&1 < /dev/null
    rc=$?
  else
    local hook=$phase
    [ "$phase" = ckpt_async ] || [ "$phase" = ckpt_last ] && hook=ckpt_save
    [ "$phase" = last_step ] && hook=step
    # boot: the debug line of a rank's lifeline tells a survivor the launcher ended before it had started
    local lv=${HSR_LOG:-warn}
    [ "$phase" = boot ] && lv=debug
    HSR_LOG=$lv HSR_UCX_PEER_ERRORS=$pe HSR_COMM_TIMEOUT=$tmo HSR_BOOT_TIMEOUT=60 HSR_FAULT="$victim:$hook:$n:$act" \
      timeout -k 5 "$limit" "$run" --launcher "$l" -n $np --nodes "$nodes" -- "$wrap" "$d" "$hsr" "${args[@]}" \
      > "$d/launcher.log" 2>&1 < /dev/null
    rc=$?
  fi
  t1=$EPOCHREALTIME
  # the launcher's death: the ranks end by themselves; give them the limit (else 5 s for the watcher to see it)
  local waits=50
  [ "$phase" = launcher ] && waits=$((limit * 10))
  for _ in $(seq 1 "$waits"); do [ -e "$d/last_exit" ] && break; sleep 0.1; done
  # every rank's process is gone (a stopped rank orphaned by its launcher is killed here)
  local pids=() left=0 p
  for f in "$d"/rank.*.pid; do [ -e "$f" ] && pids+=("$(cat "$f")"); done
  sleep 0.2
  for p in "${pids[@]}"; do
    if [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] &&
      tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "$hsr"; then
      left=$((left + 1)); kill -KILL "$p" 2>/dev/null
    fi
  done
  for p in $(sed -n 's/^launcher pid //p' "$d/launcher.log" 2>/dev/null); do # launcher.py's: mpirun or srun
    for _ in $(seq 1 100); do # srun waits for its step's end a few seconds after its ranks
      [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] || break
      sleep 0.1
    done
    if [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]; then
      left=$((left + 1)); kill -KILL "$p" 2>/dev/null
    fi
  done
  # anything else of this scenario still running (a launcher hung in its own abort survives hsr-run's
  # end: it runs in a session of its own): its command line names the scenario's folder
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}; p=${p%/cmdline}
    [ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] || [ "$p" = "$watcher" ] && continue
    { tr '\0' ' ' < "$f"; } 2>/dev/null | grep -qF -e " $d " -e " $d/" || continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] && continue
    left=$((left + 1)); kill -KILL "$p" 2>/dev/null
  done
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  local shm; shm=$(hsr_files_of "${pids[@]}")
  local tf ti named=0 surv=0 codes="" r first="" ok=1 why="" early=0
  if [ "$phase" = launcher ]; then
    ti=$(sed -n 's/^fault at //p' "$d/launcher.log")
  else
    ti=$(first_at "$d/rank.$victim.log" "HSR_FAULT:")
  fi
  for ((r = 0; r < np; r++)); do
    local c; c=$(cat "$d/rank.$r.rc" 2>/dev/null); codes+="${c:--}"
    [ $r -lt $((np - 1)) ] && codes+=","
    [ "$phase" = launcher ] && continue
    [[ " $victims " == *" $r "* ]] && continue
    surv=$((surv + 1))
    # named: node, host and pid (before the bootstrap has placed the ranks on nodes: host and pid)
    tf=$(first_at "$d/rank.$r.log" "rank $vre \\((node [0-9]+, )?host [^,]+, pid [0-9]+")
    # nothing blames a healthy rank: every rank an error line names is a victim
    local bl
    bl=$(grep -E '\] hsr error: | hsr [a-z ]+: HSR_ERR_' "$d/rank.$r.log" 2>/dev/null | grep -oE 'rank [0-9]+ \((node|host) ' |
      awk '{print $2}' | sort -u | grep -vxE "${victims// /|}" | tr '\n' ' ')
    [ -z "$bl" ] || { ok=0; why+="rank $r blamed healthy rank(s) ${bl% }; "; }
    # one line per rank at most: the verdict, or the command's own error
    local nl; nl=$(grep -cE '\] hsr error: | hsr [a-z ]+: HSR_ERR_' "$d/rank.$r.log" 2>/dev/null)
    [ "${nl:-0}" -le 1 ] || { ok=0; why+="rank $r printed $nl error lines; "; }
    # boot: a survivor mpirun ends before its bootstrap has read the process table cannot know the
    # victim, and says so (launch/lifeline.c), or before it even started its lifeline (no debug line):
    # it counts as answered, and the table shows how many named it
    if [ -z "$tf" ] && [ "$phase" = boot ] && { grep -q 'before its bootstrap had read who the job' "$d/rank.$r.log" ||
      ! grep -q 'boot: lifeline: parent' "$d/rank.$r.log"; }; then
      early=$((early + 1)); continue
    fi
    if [ -n "$tf" ]; then
      named=$((named + 1))
      if [ -z "$first" ] || awk -v a="$tf" -v b="$first" 'BEGIN {exit !(a < b)}'; then first=$tf; fi
    fi
  done
  local to_err="-" to_end to_last="-"
  [ -n "$ti" ] && [ -n "$first" ] && to_err=$(awk -v a="$first" -v b="$ti" 'BEGIN {printf "%.2f", a - b}')
  to_end=$(awk -v a="$t1" -v b="${ti:-$t0}" 'BEGIN {printf "%.2f", a - b}')
  [ -s "$d/last_exit" ] && to_last=$(awk -v a="$(< "$d/last_exit")" -v b="${ti:-$t0}" 'BEGIN {printf "%.2f", a - b}')
  [ -n "$ti" ] || { ok=0; why+="the fault did not fire; "; }
  local how=""
  if [ "$phase" = launcher ]; then
    local want; want=$(lifeline_want "$act" "$l")
    for ((r = 0; r < np; r++)); do
      local h; h=$(lifeline_of "$d/rank.$r.log"); how+="$h"; [ $r -lt $((np - 1)) ] && how+=","
      [[ "$h" =~ ^($want)$ ]] || { ok=0; why+="rank $r ended by '$h', not '$want'; "; }
    done
    [ "$to_last" != - ] || { ok=0; why+="ranks still running ${limit} s after the launcher's death; "; }
    [ "$to_last" = - ] || awk -v e="$to_last" 'BEGIN {exit !(e <= 10)}' || { ok=0; why+="the last rank ended ${to_last} s after the fault; "; }
  elif [[ "$act" == sleep:* ]]; then
    [ "$rc" = 0 ] || { ok=0; why+="launcher exit $rc; "; }
    [ "$codes" = "0,0,0,0" ] || { ok=0; why+="rank exits $codes; "; }
    grep -q "hsr error" "$d"/rank.*.log && { ok=0; why+="an hsr error was printed; "; }
  else
    [ "$rc" != 0 ] || { ok=0; why+="launcher exit 0; "; }
    [ $((named + early)) = "$surv" ] || { ok=0; why+="$named of $surv survivors named rank ${victims// / or } ($early ended before joining); "; }
    awk -v e="$to_end" -v t="$tmo" 'BEGIN {exit !(e <= t + 15)}' || { ok=0; why+="ended after ${to_end} s; "; }
  fi
  [ "$shm" = 0 ] || { ok=0; why+="$shm hsr files in /dev/shm; "; }
  [ "$left" = 0 ] || { ok=0; why+="$left processes left; "; }
  [ -n "$how" ] && codes+=" (ended by $how)"
  local verdict=PASS
  [ $ok = 1 ] || { verdict="FAIL: ${why%; }"; fails=$((fails + 1)); }
  local vshow=${victims// /+}
  [ "$phase" = launcher ] && vshow=launcher n=-
  local nshow=$named/$surv
  [ "$early" -gt 0 ] && nshow+=" (+$early ended before joining)"
  rows+=("$name|$l|${nodes}|$prog|$phase #$n|$act|$vshow|$to_err|$to_end|$to_last|$nshow|$codes|$rc|$shm|$left|$verdict")
  printf '%-40s fault->named %5s s  ->end %6s s  ->last rank %6s s  named %s  ranks %s  launcher %s  shm %s  left %s  %s\n' \
    "$name" "$to_err" "$to_end" "$to_last" "$nshow" "$codes" "$rc" "$shm" "$left" "$verdict"
  if [ "$verdict" != PASS ]; then
    echo "  --- $d (first lines naming the victim, launcher tail)"
    grep -h "hsr error\|HSR_FAULT" "$d"/rank.*.log | head -6 | cut -c1-300 | sed 's/^/  /'
    tail -3 "$d/launcher.log" | sed 's/^/  /'
  fi
}

for s in "${pick[@]}"; do
  # shellcheck disable=SC2086
  set -- $s
  run_one "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "${9:-on}"
done

hdr="| scenario | launcher | nodes | program | phase (victim's Nth call) | fault | victim | fault to first named error (s) | fault to job end (s) | fault to last rank's exit (s) | survivors naming the victim | rank exit codes | launcher exit | hsr files left in /dev/shm | processes left | result |"
sep="|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
if [ -n "$md" ]; then
  { echo "$hdr"; echo "$sep"; for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done; } > "$md"
fi
echo "matrix.sh: ${#pick[@]} scenario(s), $fails failed (HSR_COMM_TIMEOUT=$tmo)"
[ "$fails" = 0 ]
