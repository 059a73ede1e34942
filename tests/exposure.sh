#!/usr/bin/env bash
# exposure.sh HSR_RUN HSR: a job on one host listens on loopback only. Starts
# hsr train on 4 ranks as 2 simulated nodes (UCX's TCP carries the traffic
# between them), waits until every rank has its UCX context, lists the
# listening TCP and UDP sockets of the ranks (ss) and fails on any address
# that is not loopback. The launcher's own listeners are printed (docs/faults.md,
# "What listens where"), not judged: Open MPI 4.1's mpirun binds its daemon
# channel to every address whatever its MCA parameters say. Skips (77) without ss.
set -u
run=$1 hsr=$2
command -v ss >/dev/null || { echo "exposure: ss (iproute2) not installed: skipping"; exit 77; }
t=$(mktemp -d /tmp/hsr-exposure-XXXXXX)
setsid "$run" -n 4 --nodes 2 -- env HSR_LOG=info "$hsr" train --steps 1000000 --no-progress >"$t/log" 2>&1 </dev/null &
job=$!
cleanup() { kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; rm -rf "$t"; }
trap cleanup EXIT
fail() { echo "exposure: $*"; cat "$t/log"; exit 1; }
for _ in $(seq 1 600); do # every rank has made its UCX context (rank 0 says so after the world is up)
  grep -q 'UCX_NET_DEVICES=' "$t/log" && grep -q '^hsr train: 4 ranks' "$t/log" && break
  kill -0 "$job" 2>/dev/null || fail "the job ended early"
  sleep 0.1
done
grep -q '^hsr train: 4 ranks' "$t/log" || fail "the job did not start within 60 s"
ranks=$(pgrep -f "^$hsr train --steps 1000000") || fail "no rank found"
[ "$(wc -w <<<"$ranks")" = 4 ] || fail "expected 4 ranks, found: $ranks"
pat=$(echo $ranks | sed 's/ /|/g')
socks=$(ss -Hltunp | grep -E "pid=($pat),") || true
echo "$socks" | awk '{print "rank socket:", $1, $5}'
n=$(echo "$socks" | grep -c . || true)
[ "$n" -ge 4 ] || fail "only $n listening sockets of the ranks found (UCX's TCP should have one per rank)"
bad=$(echo "$socks" | awk '{print $5}' | grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):[0-9]+$' || true)
[ -z "$bad" ] || fail "ranks listen beyond loopback: $bad"
mp=$(pgrep -P "$job" | head -1)
[ -n "$mp" ] && ss -Hltnp | grep "pid=$mp," | awk '{print "launcher socket (not judged):", $1, $4}'
echo "exposure: $n listening sockets of 4 ranks, all on loopback"
