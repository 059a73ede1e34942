#!/usr/bin/env bash
# bench/peers/ft_side.sh [options]: hsr's replica groups beside torchft's, the same job and the same fault.
#   For each of ROUNDS rounds, first hsr, then torchft (interleaved): the GPT of
#   `hsr train --model gpt` from the same initial weights (hsr train
#   --export-init, once; torchft_peer.py --init) on the same pinned text
#   (--data), 3 replica groups of 1 rank each, one thread each. Group 1 is
#   SIGKILLed in its step KILL, KILL-1 steps committed (hsr:
#   HSR_FAULT=0:step:KILL:kill, in that optimizer step; torchft: by its driver
#   once the group has logged its step KILL-1, torchft_peer.py --kill-at
#   KILL-2 as its steps count from 0)
#   and restarted once group 0 has passed step RESTART (hsr: --join; torchft:
#   the same command, healing from a live group). The same communication
#   timeout on both (HSR_COMM_TIMEOUT and torchft's Manager timeout). torchft
#   runs with --reduce manager (its DistributedDataParallel wrapper stops both
#   survivors with 3 groups: docs/peers.md) and --min-replicas 2 (a quorum
#   needs 2 groups: with 1, groups that reach the Lighthouse more than its
#   100 ms join timeout apart go on as quorums of one and their states part).
#   Per side and round: kill to the survivors' next committed step; restart
#   (the moment the script starts the new process) to the restarted group's
#   first committed step; and from the restarted process's fault-tolerance
#   machinery up (torchft: its Manager constructed; hsr: the group's
#   registration with the coordinator, its `registering` line at HSR_LOG=info;
#   both after the model is built) to that step. Checked per round: the
#   survivors commit steps after the kill and reach the last step, the
#   restarted group commits, and its final state equals the others' (hsr: the
#   groups' `state_hash ... equal on replicas 0,1,2` lines; torchft: a SHA-256
#   of each group's final weights and AdamW moments). Prints a table of the
#   medians and the ratio hsr / torchft (below 1: hsr is faster) and writes
#   OUT/ft_side.json.
# Options:
#   --rounds R         rounds (default 3)
#   --steps N          steps of every group (default 60)
#   --kill-at K        group 1's fatal step, from 1 (default 4)
#   --restart-after S  restart once group 0 has passed step S (default 8; above K)
#   --timeout T        HSR_COMM_TIMEOUT and torchft's Manager timeout, seconds (default 10)
#   --batch B          the global batch, split over the groups (default 12)
#   --corpus REV|FILE  the text of both (default run.sh's PINNED_REV; bench/peers/corpus.sh)
#   --limit S          wall-clock bound of one side's run, seconds (default 600)
#   --out DIR          logs and JSON (default a new /tmp/hsr-ft-side-XXXXXX)
# Env: HSR_BUILD (default <src>/build), HSR_PEERS_VENV (default bench/peers/.venv:
# bench/peers/setup.sh --with torchft). Needs etcd (hsr coordinator).
# Exit: 0 every round ran and passed its checks, 1 a round failed, 2 bad usage.
# A benchmark, not a test: read the medians of rounds on a quiet machine.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
prog=peers/ft_side.sh
. "$SRC/scripts/argcheck.sh"
ac_env dir HSR_BUILD
ac_env dir HSR_PEERS_VENV
B=${HSR_BUILD:-$SRC/build}
VENV=${HSR_PEERS_VENV:-$HERE/.venv}
PY=$VENV/bin/python
rounds=3 steps=60 kill=4 restart=8 tmo=10 batch=12 limit=600 out=""
corpus=$(sed -n 's/^PINNED_REV=//p' "$HERE/run.sh") # the text every table of docs/peers.md trains on
while [ $# -gt 0 ]; do
  case $1 in
    --rounds|--steps|--kill-at|--restart-after|--timeout|--batch|--corpus|--limit|--out) ac_need "$1" $# "${2:-}" ;;&
    --rounds) ac_int --rounds "$2" 1 1000; rounds=$2; shift 2;;
    --steps) ac_int --steps "$2" 3 100000000; steps=$2; shift 2;;
    --kill-at) ac_int --kill-at "$2" 2 100000000; kill=$2; shift 2;;
    --restart-after) ac_int --restart-after "$2" 1 100000000; restart=$2; shift 2;;
    --timeout) ac_int --timeout "$2" 1 3600; tmo=$2; shift 2;;
    --batch) ac_int --batch "$2" 3 100000000; batch=$2; shift 2;;
    --corpus) corpus=$2; shift 2;;
    --limit) ac_int --limit "$2" 10 86400; limit=$2; shift 2;;
    --out) ac_newdir --out "$2"; out=$2; shift 2;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) ac_die "unknown option '$1'";;
  esac
done
[ "$restart" -gt "$kill" ] || ac_die "--restart-after ($restart) must be above --kill-at ($kill)"
[ "$steps" -gt "$restart" ] || ac_die "--steps ($steps) must be above --restart-after ($restart)"
[ $((batch % 3)) = 0 ] || ac_die "--batch must be a multiple of the 3 groups (got '$batch')"
[ -n "$corpus" ] || ac_die "--corpus: no pinned revision found in $HERE/run.sh; give --corpus REV|FILE"
[ -x "$B/hsr" ] && [ -x "$B/hsr-run" ] || { echo "$prog: no $B/hsr or $B/hsr-run (build first: scripts/setup.sh)" >&2; exit 2; }
command -v etcd >/dev/null || { echo "$prog: etcd is not installed (apt-get install etcd-server): hsr coordinator needs it" >&2; exit 2; }
[ -x "$PY" ] || { echo "$prog: no environment at $VENV (make it: bench/peers/setup.sh --with torchft)" >&2; exit 2; }
"$PY" -c "import torch, torchft" 2>/dev/null ||
  { echo "$prog: $PY cannot import torch and torchft (bench/peers/setup.sh --with torchft)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/hsr-ft-side-XXXXXX)}
mkdir -p "$out"
text=$out/corpus.txt
"$HERE/corpus.sh" "$corpus" "$text" || exit 2
wrap=$SRC/tests/faults/rank.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HSR_COMM_TIMEOUT=$tmo

init=$out/init.safetensors
"$B/hsr" train --model gpt --steps 1 --data "$text" --batch "$batch" --export-init "$init" --no-progress \
  >"$out/init.log" 2>&1 || { echo "$prog: hsr train --export-init failed: $out/init.log" >&2; tail -3 "$out/init.log" >&2; exit 1; }
tv=$("$PY" -c 'import torch, importlib.metadata as m; print(torch.__version__, m.version("torchft"))' 2>/dev/null)
echo "# hsr $("$B/hsr" version 2>/dev/null | head -1) vs torch/torchft $tv: gpt, 3 groups of 1 rank, $steps steps," \
  "batch $batch, group 1 killed at step $kill, restarted after step $restart, timeout $tmo s;" \
  "$(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# text: $text ($(wc -c <"$text") bytes; --corpus $corpus); logs: $out"

cpid=""
cleanup() { [ -n "$cpid" ] && { kill -TERM "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null; }; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# the last step a group's --log holds (0 when none yet)
last_step() { tail -n 1 "$1" 2>/dev/null | grep -o '"step":[0-9]*' | cut -d: -f2 || true; }

hsr_round() { # DIR: one run of hsr's groups against a coordinator of their own
  local d=$1 g pids=() e addr
  mkdir -p "$d/g0" "$d/g1" "$d/g1j" "$d/g2"
  export HSR_FT_TOKEN="ft-side-$$-$RANDOM$RANDOM"
  "$B/hsr" coordinator --listen 127.0.0.1:0 --addr-file "$d/addr" >"$d/coord.out" 2>&1 &
  cpid=$!
  for _ in $(seq 300); do [ -s "$d/addr" ] && break; sleep 0.1; done
  [ -s "$d/addr" ] || { echo "hsr: the coordinator did not start: $d/coord.out"; cleanup; cpid=""; return 1; }
  addr=$(sed 's#http://##' "$d/addr")
  local args=(--model gpt --data "$text" --steps "$steps" --batch "$batch" --coordinator "$addr" --replicas 3
              --no-progress)
  for g in 0 1 2; do
    e=(); [ "$g" = 1 ] && e=(HSR_FAULT="0:step:$kill:kill")
    ( env "${e[@]}" timeout "$limit" "$B/hsr-run" -n 1 -- "$wrap" "$d/g$g" "$B/hsr" train "${args[@]}" --init "$init" \
        --replica-id "$g" --log "$d/g$g.log" >"$d/g$g.run" 2>&1 </dev/null; echo $? >"$d/g$g.rc" ) &
    pids+=($!)
  done
  local t0=$SECONDS s
  while [ $((SECONDS - t0)) -lt "$limit" ] && [ ! -e "$d/g0.rc" ]; do
    s=$(last_step "$d/g0.log")
    [ "${s:-0}" -gt "$restart" ] && break
    sleep 0.05
  done
  echo "$EPOCHREALTIME" >"$d/t_restart"
  ( HSR_LOG=info timeout "$limit" "$B/hsr-run" -n 1 -- "$wrap" "$d/g1j" "$B/hsr" train "${args[@]}" --replica-id 1 --join \
      --log "$d/g1j.log" >"$d/g1j.run" 2>&1 </dev/null; echo $? >"$d/g1j.rc" ) &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; done
  cleanup
  cpid=""
  python3 - "$d" "$steps" <<'PY' >"$d/result.json"
import json, re, sys
d, steps = sys.argv[1], int(sys.argv[2])
def rows(f):
    try:
        return [json.loads(l) for l in open(f) if l.strip()]
    except (OSError, ValueError):
        return []
def first_ts(f, pat):
    try:
        for l in open(f):
            if re.search(pat, l):
                return float(l.split()[0])
    except OSError:
        pass
    return None
t_kill = first_ts(f"{d}/g1/rank.0.log", r"HSR_FAULT:")
t_restart = float(open(f"{d}/t_restart").read())
t_reg = first_ts(f"{d}/g1j/rank.0.log", r"registering")
res = {"side": "hsr", "out": d, "t_kill": t_kill, "t_restart": t_restart}
surv = {g: rows(f"{d}/g{g}.log") for g in (0, 2)}
if t_kill:
    nxt = [r["time"] for g in surv for r in surv[g] if r["time"] > t_kill and 1 not in r.get("replicas", [1])]
    res["kill_to_survivors_next_commit_s"] = min(nxt) - t_kill if nxt else None
    res["survivors_commits_after_kill"] = {str(g): sum(1 for r in surv[g] if r["time"] > t_kill) for g in surv}
j = rows(f"{d}/g1j.log")
res["restart_to_first_commit_s"] = j[0]["time"] - t_restart if j else None
res["ft_up_to_first_commit_s"] = j[0]["time"] - t_reg if j and t_reg else None
res["end_steps"] = {str(g): (r[-1]["step"] if r else None) for g, r in (("0", surv[0]), ("1", j), ("2", surv[2]))}
hashes = {}
for g, f in (("0", "g0"), ("1", "g1j"), ("2", "g2")):
    h = None
    try:
        for l in open(f"{d}/{f}/rank.0.log"):
            m = re.search(r"state_hash ([0-9a-f]+) after %d steps: equal on replicas 0,1,2" % steps, l)
            if m:
                h = m.group(1)
    except OSError:
        pass
    hashes[g] = h
res["end_state_hash"] = hashes
res["state_equal"] = len(set(hashes.values())) == 1 and None not in hashes.values()
res["exits"] = {g: open(f"{d}/{g}.rc").read().strip() for g in ("g0", "g1", "g1j", "g2")}
print(json.dumps(res))
PY
}

tft_round() { # DIR: one run of torchft_peer.py
  local d=$1
  mkdir -p "$d"
  "$PY" -W ignore "$HERE/torchft_peer.py" --init "$init" --data "$text" --groups 3 --steps "$steps" --batch "$batch" \
    --kill-at "$((kill - 2))" --restart-after "$restart" --manager-timeout "$tmo" --min-replicas 2 --reduce manager --timeout "$limit" \
    --out "$d" >"$d/driver.out" 2>&1 </dev/null
  tail -n 1 "$d/driver.out" | python3 -c '
import json, sys
try:
    r = json.loads(sys.stdin.read())
except ValueError:
    r = {}
r["side"] = "torchft"
r["ft_up_to_first_commit_s"] = r.pop("manager_up_to_first_commit_s", None)
diff = r.get("state_max_abs_diff") or {}
r["state_equal"] = bool(diff) and all(v == 0.0 for v in diff.values())
print(json.dumps(r))' >"$d/result.json"
}

rows=$out/rounds.jsonl
: >"$rows"
printf "%-8s %-6s %9s %9s %9s %9s %8s  %s\n" side round kill_s restart_s ft_up_s commits end_step state
for r in $(seq 1 "$rounds"); do
  for side in hsr torchft; do
    d=$out/r$r/$side
    s0=$SECONDS
    if [ "$side" = hsr ]; then hsr_round "$d"; else tft_round "$d"; fi
    python3 - "$d/result.json" "$r" "$((SECONDS - s0))" "$steps" <<'PY' >>"$rows"
import json, sys
f, r, wall, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    d = json.load(open(f))
except (OSError, ValueError):
    d = {"side": "?"}
d["round"], d["wall_s"] = r, wall
after = d.get("survivors_commits_after_kill") or {}
ends = d.get("end_steps") or {}
d["survivors_continue"] = bool(after) and all(v > 0 for v in after.values()) and \
    all(ends.get(g) == steps for g in after)
d["ok"] = bool(d["survivors_continue"] and d.get("kill_to_survivors_next_commit_s") is not None
               and d.get("restart_to_first_commit_s") is not None and d.get("state_equal"))
print(json.dumps(d))
PY
    tail -n 1 "$rows" | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = lambda k: format(d[k], ".2f") if d.get(k) is not None else "-"
after = d.get("survivors_commits_after_kill") or {}
ends = d.get("end_steps") or {}
print("%-8s %-6s %9s %9s %9s %9s %8s  %s" % (d.get("side"), d["round"], f("kill_to_survivors_next_commit_s"),
      f("restart_to_first_commit_s"), f("ft_up_to_first_commit_s"), "/".join(str(v) for v in after.values()) or "-",
      "/".join(str(v) for v in ends.values()) or "-",
      ("equal" if d.get("state_equal") else "NOT EQUAL") +
      ("" if d.get("state_equal") or not d.get("state_max_abs_diff") else " (max |diff| from group 0: %s)" %
       ", ".join("%s" % (format(v, ".1e") if v is not None else "-") for v in d["state_max_abs_diff"].values())) +
      ("" if d["ok"] else "  FAILED: %s" % d.get("out", ""))))'
  done
done

python3 - "$out" "$rows" "$tv" "$steps" "$kill" "$restart" "$tmo" "$batch" "$corpus" <<'PY'
import json, os, statistics, sys
out, rows, tv, steps, kill, restart, tmo, batch, corpus = sys.argv[1:]
rs = [json.loads(l) for l in open(rows)]
keys = [("kill_to_survivors_next_commit_s", "kill to the survivors' next committed step (s)"),
        ("restart_to_first_commit_s", "restart to the restarted group's first committed step (s)"),
        ("ft_up_to_first_commit_s", "its fault-tolerance machinery up to that step (s)")]
med = {}
for side in ("hsr", "torchft"):
    med[side] = {}
    for k, _ in keys:
        v = [d[k] for d in rs if d.get("side") == side and d.get(k) is not None]
        med[side][k] = statistics.median(v) if v else None
f = lambda x: format(x, ".2f") if x is not None else "-"
print()
print("| median over the rounds | hsr | torchft | hsr / torchft |")
print("| --- | --- | --- | --- |")
table = []
for k, name in keys:
    h, t = med["hsr"][k], med["torchft"][k]
    ratio = h / t if h is not None and t else None
    table.append({"measure": k, "hsr_s": h, "torchft_s": t, "ratio": ratio})
    print(f"| {name} | {f(h)} | {f(t)} | {f(ratio)} |")
ok = {s: sum(1 for d in rs if d.get("side") == s and d.get("ok")) for s in ("hsr", "torchft")}
n = len(rs) // 2
print(f"| rounds that passed the checks (survivors commit after the kill and reach step {steps}; the restarted "
      f"group commits; every group's final state equal) | {ok['hsr']}/{n} | {ok['torchft']}/{n} | |")
res = {"torch_torchft": tv, "steps": int(steps), "kill_at": int(kill), "restart_after": int(restart),
       "timeout_s": float(tmo), "batch": int(batch), "groups": 3, "ranks_per_group": 1, "corpus": corpus,
       "load": open("/proc/loadavg").read().split()[:3], "cores": os.cpu_count(), "rounds_ok": ok,
       "table": table, "rounds": rs}
json.dump(res, open(f"{out}/ft_side.json", "w"), indent=1)
print(json.dumps({k: v for k, v in res.items() if k != "rounds"}))
sys.exit(0 if all(d.get("ok") for d in rs) else 1)
PY
