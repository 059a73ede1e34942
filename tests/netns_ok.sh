#!/usr/bin/env bash
# netns_ok.sh CMD...: runs CMD where hsr-run --emulate-net can work here (root,
# ip and tc, network namespaces and tbf permitted); exits 77 (skip) otherwise.
[ "$(id -u)" = 0 ] || { echo "netns_ok: not root: skipping"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "netns_ok: no ip/tc: skipping"; exit 77; }
p="hsr-probe-$$"
ip netns add "$p" 2>/dev/null || { echo "netns_ok: network namespaces refused: skipping"; exit 77; }
ok=1
ip netns exec "$p" tc qdisc add dev lo root tbf rate 1gbit burst 128kb latency 20ms 2>/dev/null || ok=0
ip netns del "$p"
[ "$ok" = 1 ] || { echo "netns_ok: tc tbf refused: skipping"; exit 77; }
exec "$@"
