#!/usr/bin/env bash
# emulate_net.sh HSR_RUN: the --emulate-net fixture. The job runs in a network
# namespace of its own whose loopback is shaped with tbf; the namespace is gone
# afterwards when the job succeeds, fails, is stopped by SIGTERM or SIGINT, and
# (reaped by the next run) when hsr-run itself was killed with SIGKILL.
# Exits 77 (skip) where namespaces or tc are not permitted.
set -u
run=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

[ "$(id -u)" = 0 ] || { echo "emulate_net: not root: skipping"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "emulate_net: no ip/tc: skipping"; exit 77; }
probe="hsr-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then echo "emulate_net: network namespaces refused: skipping"; exit 77; fi
if ! ip netns exec "$probe" tc qdisc add dev lo root tbf rate 1gbit burst 128kb latency 20ms 2>/dev/null; then
  ip netns del "$probe"; echo "emulate_net: tc tbf refused: skipping"; exit 77
fi
ip netns del "$probe"

listed() { ip netns list | awk '{print $1}' | grep -qx -- "$1"; }
# what the job saw: its namespace and the qdisc of its loopback
probe_cmd='ip netns identify $$ > "$0.ns"; tc qdisc show dev lo > "$0.tc"; echo "$HSR_EMULATE_NET" > "$0.env"'

# 1. normal run: namespace made, shaped, rate handed to the ranks, removed
"$run" --emulate-net 200mbit -n 2 -- sh -c "$probe_cmd" "$work/a"
rc=$?
ns=$(head -1 "$work/a.ns" 2>/dev/null)
[ "$rc" = 0 ] || bad "normal run exited $rc"
[[ "$ns" == hsr-* ]] || bad "the job did not run in an hsr namespace (got '$ns')"
grep -q "tbf.*rate 200Mbit" "$work/a.tc" 2>/dev/null || bad "loopback not shaped: $(cat "$work/a.tc" 2>/dev/null)"
grep -qx 200mbit "$work/a.env" 2>/dev/null || bad "HSR_EMULATE_NET not set for the ranks"
[ -n "$ns" ] && listed "$ns" && bad "namespace $ns left after a normal run"

# 2. the job fails: its exit code comes back, the namespace goes
"$run" --emulate-net 1gbit -n 2 -- sh -c "$probe_cmd; exit 3" "$work/b"
rc=$?
ns=$(head -1 "$work/b.ns" 2>/dev/null)
[ "$rc" != 0 ] || bad "a failing job exited 0"
[ -n "$ns" ] || bad "failing job: no namespace seen"
[ -n "$ns" ] && listed "$ns" && bad "namespace $ns left after the job failed"

# 3, 4. SIGTERM and SIGINT to hsr-run: forwarded, the job ends, the namespace goes
for sig in TERM INT; do
  f="$work/s$sig"
  env --default-signal=INT,TERM "$run" --emulate-net 1gbit -n 2 -- sh -c "$probe_cmd; sleep 60" "$f" &
  pid=$!
  for _ in $(seq 1 80); do [ -s "$f.ns" ] && break; sleep 0.25; done
  ns=$(head -1 "$f.ns" 2>/dev/null)
  [ -n "$ns" ] || bad "SIG$sig: the job never started"
  sleep 0.5
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ "$rc" = "$want" ] || bad "SIG$sig: hsr-run exited $rc, expected $want"
  [ -n "$ns" ] && listed "$ns" && bad "SIG$sig: namespace $ns left"
done

# 5. SIGKILL to hsr-run: nothing can run then; the next run removes the
# namespace (and the job still inside it)
f="$work/k"
"$run" --emulate-net 1gbit -n 2 -- sh -c "$probe_cmd; sleep 60" "$f" &
pid=$!
for _ in $(seq 1 80); do [ -s "$f.ns" ] && break; sleep 0.25; done
ns=$(head -1 "$f.ns" 2>/dev/null)
sleep 0.5
kill -KILL "$pid"
wait "$pid" 2>/dev/null
[ -n "$ns" ] && ! listed "$ns" && bad "SIGKILL: expected $ns to outlive a killed hsr-run"
"$run" --emulate-net 1gbit -n 1 -- true || bad "the run after a SIGKILL failed"
[ -n "$ns" ] && listed "$ns" && bad "SIGKILL: stale namespace $ns not reaped by the next run"
[ -n "$ns" ] && [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && bad "SIGKILL: processes left in $ns"

# 6. usage errors: exit 2 with the reason
out=$("$run" --emulate-net fast -n 2 -- true 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "expected a tc rate" <<<"$out" || bad "bad rate: exit $rc: $out"
if command -v setpriv >/dev/null; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$run" --emulate-net 1gbit -n 1 -- true 2>&1); rc=$?
  [ "$rc" = 2 ] && grep -q "needs root" <<<"$out" || bad "not root: exit $rc: $out"
fi
[ "$fail" = 0 ] && echo "emulate_net: ok"
exit $fail
