#!/usr/bin/env bash
# coord_noauth.sh HSR_RUN HSR: a replica group holding HSR_FT_TOKEN refuses a
# coordinator that does not check tokens (a plain etcd, authentication off:
# anyone could join or disturb the run) before it registers or trains:
# exit 2, the reason said once for the group, no step, nothing written.
set -u
run=$1 hsr=$2
command -v etcd >/dev/null || { echo "SKIP: etcd is not installed (apt-get install etcd-server)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hsr-coord-noauth.XXXXXX")
e=""
cleanup() { [ -n "$e" ] && kill "$e" 2>/dev/null && wait "$e" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "coord_noauth: FAIL: $*"; exit 1; }
read -r pc pp <<<"$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')"
etcd --name n --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$pc" --advertise-client-urls "http://127.0.0.1:$pc" \
  --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
  --initial-cluster "n=http://127.0.0.1:$pp" >"$T/etcd.log" 2>&1 &
e=$!
python3 - "$pc" <<'PY' || fail "etcd did not serve: $(tail -3 "$T/etcd.log")"
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/version" % sys.argv[1], timeout=1).read(); sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
PY
out=$(HSR_FT_TOKEN=secret timeout 120 "$run" -n 2 -- "$hsr" train --coordinator "127.0.0.1:$pc" --replicas 1 --replica-id 0 \
  --steps 3 --no-progress --log "$T/g.log" 2>&1)
rc=$?
[ "$rc" = 2 ] || { echo "$out"; fail "exit $rc, expected 2"; }
n=$(grep -c "the coordinator at http://127.0.0.1:$pc does not check tokens (etcd authentication is off)" <<<"$out")
[ "$n" = 1 ] || { echo "$out"; fail "the refusal said $n times, once for the group"; }
! grep -q '^loss' <<<"$out" || fail "the group trained"
[ ! -s "$T/g.log" ] || fail "the group wrote its log"
echo "coord_noauth: a token-holding group refuses a coordinator that does not check tokens"
