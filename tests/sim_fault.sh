#!/usr/bin/env bash
# sim_fault.sh HSR_RUN HSR: a rank SIGKILLed inside an all-gather of a run on
# the sim device (the collective running in its stream's order): every
# survivor names it in one hsr line (its node peer from the process table),
# nothing crashes while the streams skip what was queued behind the failure,
# the job ends non-zero, no hsr file of the job is left in /dev/shm.
set -u
run=$1 hsr=$2
log=$(mktemp /tmp/hsr-sim-fault-XXXXXX)
trap 'rm -f "$log"' EXIT
HSR_COMM_TIMEOUT=4 OPENBLAS_NUM_THREADS=1 timeout 60 "$run" -n 4 --nodes 2 --launcher mpirun -- \
  env HSR_FAULT=1:all_gather:20:kill "$hsr" train --device sim --steps 20 --no-progress >"$log" 2>&1
rc=$?
fail() { echo "sim_fault: $*"; grep -v '^ *$' "$log" | tail -20; exit 1; }
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "exit code $rc (want a failure, not 0 or the timeout)"
grep -q "^\[rank 1\] hsr warn: HSR_FAULT: SIGKILL at all_gather #20" "$log" || fail "the fault did not fire"
# rank 0 shares rank 1's node and sees its process gone: "was killed".
# Ranks 2 and 3 are on the other node: the first to find it may only have
# its UCX endpoint's error when rank 0's word is late (a loaded host), and
# that verdict stands for whoever declared it first.
name='rank 1 \(node 0, host [^,]+, pid [0-9]+\)'
grep -Eq "^\[rank 0\] hsr error: $name was killed" "$log" || fail "rank 0 does not name rank 1 as killed"
for r in 2 3; do
  grep -Eq "^\[rank $r\] hsr error: $name (was killed|is unreachable: its UCX endpoint failed)" "$log" ||
    fail "rank $r does not name rank 1"
done
! grep -Eq "Segmentation|backtrace|Aborted|hsr fatal: " "$log" || fail "a survivor crashed after the failure"
echo "sim_fault: every survivor named rank 1 from inside its streams; no crash"
