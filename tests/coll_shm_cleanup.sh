#!/usr/bin/env bash
# coll_shm_cleanup.sh HSR_RUN PROG: a segment left in /dev/shm by a process
# that no longer exists is removed when the next world starts; one whose
# owner is alive stays.
set -u
run=$1; prog=$2
sleep 0 & dead=$!; wait $dead
stale=/dev/shm/hsr-00000000000000ff-$dead-0-0
live=/dev/shm/hsr-00000000000000fe-$$-0-0
echo x > "$stale"; echo x > "$live"
"$run" -n 2 -- "$prog" --bad-args || { rm -f "$stale" "$live"; echo "program failed"; exit 1; }
rc=0
[ -e "$stale" ] && { echo "stale segment $stale was not removed"; rc=1; }
[ -e "$live" ] || { echo "live segment $live was removed"; rc=1; }
rm -f "$stale" "$live"
exit $rc
