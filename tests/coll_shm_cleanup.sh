#!/usr/bin/env bash
# coll_shm_cleanup.sh HSR_RUN PROG HSR: (1) a segment left in /dev/shm by a
# process that no longer exists (an hsr build before memfds) is removed when
# the next world starts; one whose owner is alive stays. (2) hsr's node-shared
# memory has no name in /dev/shm while a job runs (memfds), and a job whose
# every rank is killed with SIGKILL mid-run leaves nothing there either.
set -u
run=$1; prog=$2; hsr=$3
here=$(cd "$(dirname "$0")" && pwd)
sleep 0 & dead=$!; wait $dead
stale=/dev/shm/hsr-00000000000000ff-$dead-0-0
live=/dev/shm/hsr-00000000000000fe-$$-0-0
echo x > "$stale"; echo x > "$live"
"$run" -n 2 -- "$prog" --bad-args || { rm -f "$stale" "$live"; echo "program failed"; exit 1; }
rc=0
[ -e "$stale" ] && { echo "stale segment $stale was not removed"; rc=1; }
[ -e "$live" ] || { echo "live segment $live was removed"; rc=1; }
rm -f "$stale" "$live"

# (2) four ranks over two simulated nodes (shared memory and UCX), killed
d=$(mktemp -d /tmp/hsr-shm-kill.XXXXXX)
"$run" -n 4 --nodes 2 -- "$here/faults/rank.sh" "$d" "$hsr" bench all_gather -b 4M -e 4M -n 100000 \
  > "$d/launcher.log" 2>&1 < /dev/null &
launcher=$!
pids=()
for _ in $(seq 1 300); do # up to 30 s for every rank to be inside the benchmark
  n=$(grep -l "#" "$d"/rank.*.log 2>/dev/null | wc -l)
  [ "$n" -ge 1 ] && [ "$(ls "$d"/rank.*.pid 2>/dev/null | wc -l)" = 4 ] && break
  sleep 0.1
done
sleep 1
for f in "$d"/rank.*.pid; do pids+=("$(cat "$f")"); done
named() { local p c=0; for p in "${pids[@]}"; do c=$((c + $(ls /dev/shm | grep -cE "^hsr-[0-9a-f]+-$p-"))); done; echo $c; }
[ ${#pids[@]} = 4 ] || { echo "the job did not start: $(tail -3 "$d/launcher.log")"; kill "$launcher"; rc=1; }
if [ ${#pids[@]} = 4 ]; then
  during=$(named)
  [ "$during" = 0 ] || { echo "$during hsr files in /dev/shm while the job runs"; rc=1; }
  memfds=0
  for p in "${pids[@]}"; do memfds=$((memfds + $(ls -l /proc/$p/fd 2>/dev/null | grep -c "memfd:hsr-"))); done
  [ "$memfds" -gt 0 ] || { echo "the ranks hold no hsr memfds (is the job running?)"; rc=1; }
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait "$launcher" 2>/dev/null
  after=$(named)
  [ "$after" = 0 ] || { echo "$after hsr files in /dev/shm after every rank was killed"; rc=1; }
  echo "coll_shm_cleanup: ${#pids[@]} ranks held $memfds memfds, 0 names in /dev/shm; killed: $after left"
fi
for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
rm -rf "$d"
exit $rc
