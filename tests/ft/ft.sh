#!/usr/bin/env bash
# ft.sh SCENARIO: replica groups of `hsr train` (docs/fault-tolerance.md) for
# real: an etcd coordinator of its own on loopback (hsr coordinator, a free
# port, its data removed at the end), groups of 2 ranks each launched with
# hsr-run, faults injected with HSR_FAULT, every process and folder removed
# at the end. The runs are checked against the single-rank reference with
# the live replicas of every step (ft_check).
#
#   equiv          3 groups, no fault: the same losses, gradient norms and weights
#                  as one hybrid 3 x 2 job and as the single-rank reference
#   kill_heal      group 1 SIGKILLed at step 10, restarted with --join once group 0
#                  is past step 30: dropped (one line on each survivor), healed over
#                  UCX, every group's state_hash equal at the end, the loss curve the
#                  reference's with the live replicas of each step; both live groups heal it, a
#                  slice each (one line on the joiner naming them, one on each healer)
#   kill_allreduce rank 1 of group 1 killed inside the cross-group all-reduce
#   kill_healer    group 0 killed while it heals group 1 with group 2 (each a slice): 1 heals
#                  again from group 2 alone
#   kill_healed    group 1 killed while it heals: the others drop it and go on
#   stop           rank 1 of group 2 SIGSTOPped: dropped after the timeout
#   refuse         a group without the token, with another token, another --dim,
#                  another group size, another hsr version, or a live id (with and without
#                  --join: the holder named): refused naming
#                  the difference (exit 2); the running groups are not disturbed
#   coord3         a 3-member etcd: one member killed changes nothing; a second one
#                  killed (no quorum): the groups train on (their steps commit through the
#                  cross-group exchange); group 2 killed then: the survivors stop with one
#                  clear message each (no healthy rank of theirs blamed), group 0
#                  saves a checkpoint of the last committed step (in the background: --async-save)
#   coord_away     the coordinator (etcd) killed at step 30: the groups train every step, each
#                  the reference's, and end with equal state hashes (not compared through etcd)
#   resume         every group stopped after 30 steps (the smallest id saved), all
#                  restarted with --resume latest: on from step 30, the reference's
#   sim_device     kill_heal on the sim device (--device sim, the stream-order check
#                  and delays on): the averaging and the heal through its streams
#   sim_offload    sim_device with --offload optim: the outer reduction and the heal read and
#                  write the optimizer state in host memory
#   hsr_run        2 groups given no --coordinator: hsr-run starts one coordinator on
#                  loopback for both, with a private token of its own
#   crash_restart  every group SIGKILLed at step 10, all restarted at once without
#                  --join: the dead job's records (their leases still running) do not
#                  block the new start; it trains to the end, every state_hash equal
# Environment: HSR_BUILD (the build tree: hsr, hsr-run, tests/ft_check).
set -u
scen=${1:?usage: ft.sh SCENARIO (see the header)}
here=$(cd "$(dirname "$0")" && pwd)
B=${HSR_BUILD:-$here/../../build}
hsr=$B/hsr run=$B/hsr-run check=$B/tests/ft_check
for x in "$hsr" "$run" "$check"; do [ -x "$x" ] || { echo "ft.sh: $x missing (build first)"; exit 2; }; done
command -v etcd >/dev/null || { echo "SKIP: etcd is not installed (apt-get install etcd-server)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hsr-ft.XXXXXX")
export HSR_FT_TOKEN="ft-test-$$-$RANDOM$RANDOM"
export HSR_COMM_TIMEOUT=${HSR_COMM_TIMEOUT:-4} HSR_BOOT_TIMEOUT=60 OPENBLAS_NUM_THREADS=1
unset HSR_FAULT
pids=() coords=()
fail=0
FAIL() { echo "ft.sh: FAIL: $*"; fail=1; }

cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  for p in "${coords[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${coords[@]}"; do for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  for p in "${coords[@]}"; do # a coordinator stops promptly on SIGTERM, its etcd's quorum lost or not
    kill -0 "$p" 2>/dev/null || continue
    echo "ft.sh: FAIL: hsr coordinator $p still runs 10 s after SIGTERM"
    kill -KILL "$p" 2>/dev/null
    fail=1
  done
  [ "$fail" = 0 ] || for f in "$T"/*.out; do echo "---- $f"; grep -v '^  \|^persist\|^trans\|^runtime\|^total\|^buffers\|^engine\|^all-g\|^commun\|^bytes\|^categ\|^throughput\|^time per\|^ledger' "$f" | tail -25; done
  rm -rf "$T"
  [ "$fail" = 0 ] || exit 1
}
trap cleanup EXIT

# coordinator NAME [args]: one `hsr coordinator` in the background; its address in $T/NAME.addr
coordinator() {
  local n=$1; shift
  # its data folder under $T too: a member the test SIGKILLs cannot remove its own
  TMPDIR="$T" "$hsr" coordinator --addr-file "$T/$n.addr" "$@" >"$T/$n.coord" 2>&1 &
  coords+=($!)
  echo $! >"$T/$n.pid"
}
wait_file() { # FILE SECONDS
  for _ in $(seq $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
# group TAG ID [env...] -- [train args]: one replica group of 2 ranks in the background
group() {
  local tag=$1 id=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  ( env "${envs[@]}" "$run" -n 2 -- "$hsr" train --steps "$STEPS" --batch 60 --coordinator "$ADDR" --replica-id "$id" \
      --replicas 3 --log "$T/$tag.log" --no-progress --hash-every 10 "$@" >"$T/$tag.out" 2>&1
    echo "exit $?" >>"$T/$tag.out" ) &
  pids+=($!)
  eval "pid_$tag=$!"
}
wait_step() { # LOG STEP SECONDS: the log has reached STEP
  for _ in $(seq $(($3 * 10))); do
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
wait_all() { for p in "$@"; do wait "$p" 2>/dev/null; done; }
exit_of() { tail -1 "$T/$1.out" | sed -n 's/^exit //p'; }
expect_exit() { # TAG CODE
  local e; e=$(exit_of "$1")
  [ "$e" = "$2" ] || FAIL "$1 exited '$e', expected $2"
}
final_equal() { # TAG "ids": the group's last line says every listed replica's state_hash is equal
  grep -q "state_hash [0-9a-f]* after $STEPS steps: equal on replicas $2\$" "$T/$1.out" ||
    FAIL "$1: no final 'state_hash ... equal on replicas $2' line"
}
ref_check() { # LOGS...: the live groups against the single-rank reference
  "$check" --replicas 3 --group 2 --batch 60 --steps "$STEPS" "$@" >"$T/check.txt" 2>&1 || FAIL "ft_check: $(cat "$T/check.txt")"
  cat "$T/check.txt"
}
one_drop_line() { # TAG REPLICA: exactly one line naming the dropped replica
  local n; n=$(grep -c "replica(s) $2 dropped" "$T/$1.out")
  [ "$n" = 1 ] || FAIL "$1: $n lines say replica $2 was dropped (want exactly 1)"
}

coordinator c --listen 127.0.0.1:0
wait_file "$T/c.addr" 30 || { FAIL "the coordinator did not start: $(cat "$T/c.coord")"; exit 1; }
ADDR=$(sed 's#http://##' "$T/c.addr")

case "$scen" in
equiv)
  STEPS=30
  for i in 0 1 2; do group g$i $i -- --export "$T/w$i.safetensors"; done
  wait_all "${pids[@]}"
  for i in 0 1 2; do expect_exit g$i 0; final_equal g$i 0,1,2; done
  "$run" -n 6 --nodes 3 -- "$hsr" train --steps 30 --batch 60 --replicate 3 --shard 2 --log "$T/hy.log" --no-progress \
    --export "$T/hy.safetensors" >"$T/hy.out" 2>&1 || FAIL "the hybrid 3 x 2 job failed"
  ref_check --export "$T/w0.safetensors" "$T"/g?.log
  # one hybrid job with R = 3, S = 2 on the same data: the same numbers (float tolerance)
  python3 - "$T" <<'EOF' || FAIL "groups vs the hybrid job: $(cat "$T/py.txt")"
import json, struct, sys
t = sys.argv[1]
rows = lambda f: [json.loads(l) for l in open(f)]
g = [rows(f"{t}/g{i}.log") for i in range(3)]
h = rows(f"{t}/hy.log")
worst = 0
for s in range(30):
    mean = sum(x[s]["loss"] for x in g) / 3
    worst = max(worst, abs(mean - h[s]["loss"]) / abs(h[s]["loss"]), abs(g[0][s]["grad_norm"] - h[s]["grad_norm"]) / h[s]["grad_norm"])
def tensors(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; hd = json.loads(b[8:8 + n])
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f", b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]])
            for k, v in hd.items() if k != "__metadata__"}
a, c = tensors(f"{t}/w0.safetensors"), tensors(f"{t}/hy.safetensors")
for k in c:
    m = max(abs(x) for x in c[k]) or 1
    worst = max(worst, max(abs(x - y) for x, y in zip(a[k], c[k])) / m)
open(f"{t}/py.txt", "w").write(f"worst relative difference {worst:.3g}\n")
print(f"groups vs one hybrid 3 x 2 job: worst relative difference (loss, grad_norm, weights) {worst:.3g}")
sys.exit(worst > 1e-5)
EOF
  ;;
kill_heal | sim_device | sim_offload)
  STEPS=400 dev=() nap=()
  # the live groups pause 6 s at step 35 (rank 0 sleeps in its step; the bound allows it): a step takes
  # milliseconds, and the joiner, started after step 30, needs the CPUs to start before the others end
  [ "$scen" = kill_heal ] && export HSR_COMM_TIMEOUT=12 && nap=(HSR_FAULT=0:step:35:sleep:6)
  [ "$scen" = sim_device ] && STEPS=240 dev=(--device sim) && export HSR_SIM_CHECK=1 HSR_SIM_DELAY=100:5
  [ "$scen" = sim_offload ] && STEPS=240 dev=(--device sim --offload optim) && export HSR_SIM_CHECK=1 HSR_SIM_DELAY=100:5
  group g0 0 "${nap[@]}" -- "${dev[@]}"; group g1 1 HSR_FAULT=0:step:10:kill -- "${dev[@]}"
  group g2 2 "${nap[@]}" -- "${dev[@]}"
  wait_step "$T/g0.log" 30 120 || FAIL "group 0 did not reach step 30"
  group g1j 1 -- --join "${dev[@]}"
  wait_all "${pids[@]}"
  expect_exit g0 0; expect_exit g2 0; expect_exit g1j 0
  for t in g0 g2 g1j; do final_equal $t 0,1,2; done
  one_drop_line g0 1; one_drop_line g2 1
  grep -q "healed from replica [02] after [0-9]* steps" "$T/g1j.out" || FAIL "g1j: no 'healed from' line"
  # both live groups heal it, a slice each; the final state_hash above proves the slices fit
  grep -q "healed from replica 0 after [0-9]* steps: .* in slices from 2 healers (replicas 0,2), installed" "$T/g1j.out" ||
    FAIL "g1j: no line saying it healed in slices from replicas 0,2"
  for t in g0 g2; do
    grep -q "sent this group's state to replica 1 after [0-9]* steps (a slice: one of 2 healers)" "$T/$t.out" ||
      FAIL "$t: no line saying it sent replica 1 a slice"
  done
  ref_check "$T/g0.log" "$T/g1.log" "$T/g2.log" "$T/g1j.log"
  grep -Eq "live replicas by first step 1:\[0,1,2\] 10:\[0,2\] [0-9]+:\[0,1,2\];" "$T/check.txt" ||
    FAIL "expected replicas 0,1,2 from step 1, 0,2 from step 10, 0,1,2 after the heal"
  ;;
kill_allreduce)
  STEPS=200
  group g0 0 --; group g1 1 HSR_FAULT=1:ft_allreduce:15:kill --; group g2 2 --
  wait_all "${pids[@]}"
  expect_exit g0 0; expect_exit g2 0
  [ "$(exit_of g1)" != 0 ] || FAIL "group 1 was killed but exited 0"
  final_equal g0 0,2; final_equal g2 0,2
  one_drop_line g0 1; one_drop_line g2 1
  ref_check "$T"/g?.log
  grep -Eq "by first step 1:\[0,1,2\] 15:\[0,2\];" "$T/check.txt" || FAIL "expected replicas 0,1,2 then 0,2 from step 15"
  ;;
kill_healer | kill_healed)
  STEPS=300
  # group 2 pauses 6 s at step 35 (as kill_heal's live groups): the joiner needs the CPUs to start
  export HSR_COMM_TIMEOUT=12
  if [ "$scen" = kill_healer ]; then h0=(HSR_FAULT=0:ft_heal:2:kill); hj=(); else h0=(); hj=(HSR_FAULT=1:ft_heal:2:kill); fi
  group g0 0 "${h0[@]}" --; group g1 1 HSR_FAULT=0:step:10:kill --; group g2 2 HSR_FAULT=0:step:35:sleep:6 --
  wait_step "$T/g2.log" 30 120 || FAIL "group 2 did not reach step 30"
  group g1j 1 "${hj[@]}" -- --join
  wait_all "${pids[@]}"
  expect_exit g2 0
  if [ "$scen" = kill_healer ]; then
    expect_exit g1j 0
    final_equal g2 1,2; final_equal g1j 1,2
    grep -q "healed from replica 2 after" "$T/g1j.out" || FAIL "g1j did not heal again from replica 2"
    ref_check "$T"/g?.log "$T/g1j.log"
  else
    [ "$(exit_of g1j)" != 0 ] || FAIL "the healed group was killed but exited 0"
    expect_exit g0 0
    final_equal g0 0,2; final_equal g2 0,2
    ref_check "$T"/g?.log "$T/g1j.log"
  fi
  ;;
stop)
  STEPS=200
  group g0 0 --; group g1 1 --; group g2 2 HSR_FAULT=1:step:20:stop --
  wait_all "$pid_g0" "$pid_g1"
  expect_exit g0 0; expect_exit g1 0
  final_equal g0 0,1; one_drop_line g0 2; one_drop_line g1 2
  ;;
refuse)
  STEPS=2000
  # every refusal is tried while the groups train: a step commits in milliseconds, so each group's rank 0
  # pauses 100 s after step 20 (the others' bounds allow it; the keep-alive thread renews its lease)
  hold=(HSR_COMM_TIMEOUT=200 HSR_FAULT=0:step:20:sleep:100)
  group g0 0 "${hold[@]}" --; group g1 1 "${hold[@]}" --; group g2 2 "${hold[@]}" --
  wait_step "$T/g0.log" 19 120 || FAIL "the groups did not start" # step 20's row comes after the pause
  one() { # WHAT REGEX ENV -- ARGS: a refused group
    local what=$1 re=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$run" -n "${N:-2}" -- "$hsr" train --steps "$STEPS" --batch 60 --coordinator "$ADDR" \
      --replicas 3 --no-progress "$@" >"$T/r.out" 2>&1
    local rc=$?
    [ "$rc" = 2 ] || FAIL "$what: exit $rc, expected 2"
    grep -Eq -- "$re" "$T/r.out" || FAIL "$what: no message /$re/: $(head -3 "$T/r.out")"
  }
  # an id a live group holds: said with the holder, not "restart with --join" (which would wait, then fail)
  one "a live id without --join" "replica 1 is taken: a live group holds it \(host [^,]+, pid [0-9]+; quorum epoch [0-9]+, [0-9]+ steps done\), and every id 0 to 2 is held" -- --replica-id 1
  ! grep -q -- "--join" "$T/r.out" || FAIL "a live id without --join: advised --join: $(grep -- --join "$T/r.out")"
  [ "$(grep -c "replica 1 is taken" "$T/r.out")" = 1 ] || FAIL "a live id without --join: said $(grep -c "replica 1 is taken" "$T/r.out") times, once for the group"
  one "no token" "HSR_FT_TOKEN is not set" -u HSR_FT_TOKEN -- --replica-id 1 --join
  one "wrong token" "HSR_FT_TOKEN is not the coordinator's token" HSR_FT_TOKEN=wrong -- --replica-id 1 --join
  one "another --dim" "--dim is 32 here and 64 in replica [0-9]" -- --replica-id 1 --join --dim 32
  N=4 one "another group size" "the group has 4 rank\(s\) here and 2 in replica" -- --replica-id 1 --join
  one "a live id" "replica 1 is already running" -- --replica-id 1 --join
  # another hsr version: a record as another build would write it, put with etcdctl (the token is etcd's root password)
  if command -v etcdctl >/dev/null; then
    ETCDCTL_API=3 etcdctl --endpoints="http://$ADDR" --user="root:$HSR_FT_TOKEN" get /hsr/ft/m/0000 --print-value-only \
      >"$T/g0.rec" 2>"$T/etcdctl.err" || FAIL "etcdctl get: $(cat "$T/etcdctl.err")"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["id"]=7; r["version"]="9.9.9 (git fake)"; r["pid"]=1
print(json.dumps(r))' "$T/g0.rec" >"$T/fake.rec"
    ETCDCTL_API=3 etcdctl --endpoints="http://$ADDR" --user="root:$HSR_FT_TOKEN" put /hsr/ft/m/0007 "$(cat "$T/fake.rec")" \
      >/dev/null 2>"$T/etcdctl.err" || FAIL "etcdctl put: $(cat "$T/etcdctl.err")"
    one "another hsr version" "hsr is .* here and 9.9.9 \(git fake\) in replica 7" -- --replica-id 1 --join
    ETCDCTL_API=3 etcdctl --endpoints="http://$ADDR" --user="root:$HSR_FT_TOKEN" del /hsr/ft/m/0007 >/dev/null 2>&1
  fi
  wait_all "${pids[@]}"
  for i in 0 1 2; do expect_exit g$i 0; final_equal g$i 0,1,2; done
  ! grep -q "dropped" "$T"/g?.out || FAIL "a running group saw a drop"
  ;;
coord3)
  STEPS=600
  kill -TERM "${coords[0]}"; wait "${coords[0]}" 2>/dev/null; coords=()
  p=$(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
  read -r c1 p1 c2 p2 c3 p3 <<<"$p"
  cl="m1=http://127.0.0.1:$p1,m2=http://127.0.0.1:$p2,m3=http://127.0.0.1:$p3"
  for i in 1 2 3; do
    eval "cp=\$c$i pp=\$p$i"
    coordinator m$i --listen 127.0.0.1:$cp --name m$i --peer-listen 127.0.0.1:$pp --cluster "$cl"
  done
  for i in 1 2 3; do wait_file "$T/m$i.addr" 60 || FAIL "member m$i did not come up: $(tail -5 "$T/m$i.coord")"; done
  ADDR="127.0.0.1:$c1,127.0.0.1:$c2,127.0.0.1:$c3"
  mkdir "$T/ck"
  # the saver saves in the background (--async-save): its last save commits before it exits
  STEPS=4000 # group 2 dies at its step 2000, long after the coordinator's loss
  group g0 0 -- --ckpt "$T/ck" --async-save --save-every 40; group g1 1 --; group g2 2 HSR_FAULT=0:step:2000:kill --
  wait_step "$T/g0.log" 50 120 || FAIL "the groups did not start"
  kill -KILL "$(cat "$T/m1.pid")" # one member of three: nothing changes
  wait_step "$T/g0.log" 150 120 || FAIL "training stopped after losing one etcd member of three"
  kill -KILL "$(cat "$T/m2.pid")" # two of three: no quorum
  at=$(wc -l <"$T/g0.log")
  [ "$at" -lt 1800 ] || FAIL "the test lost its order: the coordinator's quorum went at step $at, group 2 dies at 2000"
  wait_all "${pids[@]}"
  # membership unchanged: the steps commit through the cross-group exchange; the death needs the coordinator
  for i in 0 1; do
    n=$(wc -l <"$T/g$i.log")
    [ "$n" -ge 1900 ] || FAIL "g$i: trained to step $n without the coordinator; group 2 died at 2000"
  done
  for i in 0 1; do
    expect_exit g$i 1
    grep -q "the coordinator is unreachable" "$T/g$i.out" || FAIL "g$i: no 'coordinator is unreachable' message"
    # one message for the group, and its own healthy ranks blamed for nothing
    n=$(grep -c "hsr train: .*the coordinator is unreachable" "$T/g$i.out")
    [ "$n" = 1 ] || FAIL "g$i: the coordinator's loss said $n times, once for the group"
    ! grep -E "hsr error: rank [0-9]+ .*(left hsr|killed or crashed|unreachable|stopped)" "$T/g$i.out" ||
      FAIL "g$i: a healthy rank of the group was blamed for the coordinator's loss"
  done
  grep -q "saved the checkpoint of step [0-9]* under" "$T/g0.out" || FAIL "group 0 did not save a checkpoint"
  s=$(sed -n 's/.*saved the checkpoint of step \([0-9]*\) under.*/\1/p' "$T/g0.out" | head -1)
  last=$(tail -1 "$T/g0.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')
  [ "$s" = "$last" ] || FAIL "the checkpoint is of step $s, the last committed step is $last"
  "$hsr" ckpt verify "$T/ck" >/dev/null || FAIL "the checkpoint does not verify"
  grep -qx "step-0*$s" "$T/ck/latest" || FAIL "latest names $(cat "$T/ck/latest"), not the checkpoint of step $s"
  ! grep -q "saved the checkpoint" "$T/g1.out" "$T/g2.out" || FAIL "a group other than the smallest id saved"
  # a group that could not read the last vote stops without its step (another may have applied it and
  # stopped too): the checkpoint is of the saver's last committed step; the groups agree up to the
  # earliest last step, at most one apart
  upto=$(for i in 0 1; do tail -1 "$T/g$i.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])'; done | sort -n | head -1)
  [ $((last - upto)) -le 1 ] || FAIL "the groups stopped more than one step apart ($upto, $last)"
  # the reference's float tolerance holds for a few hundred steps: the first 600 are checked
  STEPS=600 ref_check --partial "$T"/g?.log
  ;;
coord_away)
  STEPS=300
  for i in 0 1 2; do group g$i $i --; done
  wait_step "$T/g0.log" 30 120 || FAIL "the groups did not start"
  kill -KILL "$(cat "$T/c.pid")" # its etcd goes with it (PR_SET_PDEATHSIG)
  wait_all "${pids[@]}"
  for i in 0 1 2; do
    expect_exit g$i 0
    grep -q "state_hash [0-9a-f]* after $STEPS steps; not compared: the coordinator is unreachable" "$T/g$i.out" ||
      FAIL "g$i: no final 'not compared: the coordinator is unreachable' line"
  done
  ! grep -q "dropped" "$T"/g?.out || FAIL "a group saw a drop"
  # every group trained every step with all three, and their last hashes (each log's last row) are equal
  python3 - "$T" "$STEPS" <<'EOF' || FAIL "the groups' last rows differ: $(cat "$T/py.txt")"
import json, sys
t, steps = sys.argv[1], int(sys.argv[2])
last = [json.loads(open(f"{t}/g{i}.log").readlines()[-1]) for i in range(3)]
ok = all(r["step"] == steps and r.get("state_hash") for r in last) and len({r["state_hash"] for r in last}) == 1
open(f"{t}/py.txt", "w").write(" ".join(f"g{i}: step {r['step']} state_hash {r.get('state_hash')}" for i, r in enumerate(last)))
sys.exit(0 if ok else 1)
EOF
  ref_check "$T"/g?.log
  ;;
resume)
  # every group stops after 30 steps (group 0 saves), then all restart from the checkpoint to 60
  mkdir "$T/ck"
  STEPS=30
  for i in 0 1 2; do group g$i $i -- --ckpt "$T/ck"; done
  wait_all "${pids[@]}"
  for i in 0 1 2; do expect_exit g$i 0; done
  [ "$(ls -d "$T"/ck/step-* 2>/dev/null | wc -l)" = 1 ] || FAIL "not exactly one checkpoint (only the smallest id saves)"
  pids=()
  STEPS=60
  for i in 0 1 2; do group r$i $i -- --ckpt "$T/ck" --resume latest; done
  wait_all "${pids[@]}"
  for i in 0 1 2; do expect_exit r$i 0; final_equal r$i 0,1,2; done
  grep -q "in the quorum after 30 steps" "$T/r1.out" || FAIL "r1 did not continue from step 30"
  ref_check "$T"/g?.log "$T"/r?.log
  ;;
crash_restart)
  # the whole job dies; a new start comes while its records' leases still run (5 s)
  STEPS=20
  for i in 0 1 2; do group g$i $i HSR_FAULT=0:step:10:kill --; done
  wait_all "${pids[@]}"
  pids=()
  for i in 0 1 2; do group r$i $i --; done
  wait_all "${pids[@]}"
  for i in 0 1 2; do expect_exit r$i 0; final_equal r$i 0,1,2; done
  ;;
hsr_run)
  # no --coordinator: hsr-run starts this user's own on loopback (TMPDIR: the test's), with a token of its own
  STEPS=30
  for i in 0 1; do
    ( env -u HSR_FT_TOKEN TMPDIR="$T" "$run" -n 2 -- "$hsr" train --steps 30 --batch 60 --replica-id $i --replicas 2 \
        --no-progress --log "$T/h$i.log" >"$T/h$i.out" 2>&1; echo "exit $?" >>"$T/h$i.out" ) &
    pids+=($!)
  done
  wait_all "${pids[@]}"
  [ -s "$T/hsr-ft.$(id -u)/pid" ] && coords+=("$(cat "$T/hsr-ft.$(id -u)/pid")")
  for i in 0 1; do expect_exit h$i 0; final_equal h$i 0,1; done
  [ "$(grep -c "started a coordinator on http://127.0.0.1:" "$T"/h?.out | awk -F: '{s += $2} END {print s}')" = 1 ] ||
    FAIL "not exactly one hsr-run started a coordinator"
  [ "$(stat -c %a "$T/hsr-ft.$(id -u)/token")" = 600 ] || FAIL "the generated token is not private (mode 600)"
  ;;
*) echo "ft.sh: unknown scenario '$scen'"; exit 2 ;;
esac
[ "$fail" = 0 ] && echo "ft.sh $scen: PASS"
exit "$fail"
