#!/usr/bin/env bash
# coord_reap.sh HSR: the data folder of a SIGKILLed `hsr coordinator` (it
# could not remove its own) is removed by the next coordinator on the host,
# once its owner is gone and no process (its etcd) uses it; a folder whose
# owner lives is kept; a coordinator stopped by SIGTERM, or by SIGPIPE when
# its reader goes away, removes its own.
set -u
hsr=$1
command -v etcd >/dev/null || { echo "SKIP: etcd is not installed (apt-get install etcd-server)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/hsr-coord-reap.XXXXXX")
export HSR_FT_TOKEN="reap-$$-$RANDOM"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "coord_reap: FAIL: $*"; for f in "$T"/*.out; do echo "---- $f"; cat "$f"; done; exit 1; }
wait_file() { for _ in $(seq $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }
start() { # NAME: a coordinator with TMPDIR=$T; its pid in $T/NAME.pid
  TMPDIR=$T "$hsr" coordinator --listen 127.0.0.1:0 --addr-file "$T/$1.addr" >"$T/$1.out" 2>&1 &
  pids+=($!)
  echo $! >"$T/$1.pid"
  wait_file "$T/$1.addr" 60 || fail "coordinator $1 did not serve"
}

# a folder named after a live process (this shell) is not a leftover
mkdir "$T/hsr-coordinator.$$.keepme"
start a
a=$(cat "$T/a.pid")
da=$(ls -d "$T"/hsr-coordinator."$a".?????? 2>/dev/null) || fail "coordinator a ($a) has no data folder named after its pid"
kill -KILL "$a"
# its etcd ends with it (parent-death signal); wait until nothing names the folder
for _ in $(seq 100); do grep -qsF -- "$da" /proc/[0-9]*/cmdline || break; sleep 0.1; done
! grep -qsF -- "$da" /proc/[0-9]*/cmdline || fail "etcd of the killed coordinator still runs"
[ -d "$da" ] || fail "the killed coordinator's folder is gone before any reaper ran (the test sees nothing)"

start b
b=$(cat "$T/b.pid")
[ ! -e "$da" ] || fail "coordinator b left $da of the killed coordinator $a"
grep -q "removed $da, the data folder of a coordinator that is gone (pid $a)" "$T/b.out" || fail "b did not say what it removed"
[ -d "$T/hsr-coordinator.$$.keepme" ] || fail "b removed a folder whose owner ($$) lives"
db=$(ls -d "$T"/hsr-coordinator."$b".?????? 2>/dev/null) || fail "coordinator b has no data folder"
kill -TERM "$b"
for _ in $(seq 100); do kill -0 "$b" 2>/dev/null || break; sleep 0.1; done
[ ! -e "$db" ] || fail "coordinator b stopped by SIGTERM left its folder $db"
# its reader gone (piped into head): a write fails with SIGPIPE, which stops it like SIGTERM, folder removed
mkdir "$T/p"
TMPDIR=$T/p timeout 60 "$hsr" coordinator --listen 127.0.0.1:0 --idle-exit 2 2>/dev/null | head -1 >"$T/p.out"
grep -q "serving" "$T/p.out" || fail "the piped coordinator did not serve"
[ -z "$(ls "$T/p")" ] || fail "a coordinator whose reader went away left $(ls "$T/p")"
echo "coord_reap: a killed coordinator's folder reaped by the next one, a live owner's kept, a stopped one's removed"
