#!/usr/bin/env bash
# rank.sh DIR PROG [ARGS...]: one rank of a fault-matrix job (matrix.sh). Runs
# PROG with its output (stdout and stderr) timestamped with $EPOCHREALTIME into
# DIR/rank.R.log, its pid in DIR/rank.R.pid and its exit status in
# DIR/rank.R.rc (R: PMIX_RANK) and the moment PROG ended in DIR/rank.R.end.
# SIGTERM, SIGINT and SIGHUP from the launcher are passed on to PROG (after a
# SIGCONT, so a stopped rank gets them too).
set -u
dir=$1; shift
r=${PMIX_RANK:-${SLURM_PROCID:-0}}
log=$dir/rank.$r.log
# the reader outlives the launcher's SIGTERM to this process group: what the
# rank says as it ends is what the matrix looks for
"$@" > >(trap '' TERM INT HUP; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done >> "$log") 2>&1 &
child=$!
# its launcher may be gone (SIGKILLed): bash's own notice of how the rank
# ended then goes to a closed pipe, and SIGPIPE must not end this script
# before it records the rank's exit status (set after the start: an ignored
# signal would be PROG's too)
trap '' PIPE
echo "$child" > "$dir/rank.$r.pid"
for s in TERM INT HUP; do trap "kill -CONT $child 2>/dev/null; kill -$s $child 2>/dev/null" "$s"; done
rc=0
while :; do
  wait "$child"; rc=$?
  kill -0 "$child" 2>/dev/null || break # a trapped signal ends `wait` early: the rank still runs
done
echo "$EPOCHREALTIME" > "$dir/rank.$r.end"
echo "$rc" > "$dir/rank.$r.rc"
wait # the timestamping reader
exit "$rc"
