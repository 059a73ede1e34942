#!/usr/bin/env bash
# crash_report.sh HSR_RUN HSR: a rank that crashes names itself. HSR_FAULT's
# `jump` makes a call through a pointer to read-only data (as a stale callback
# does): the report names the rank, the thread, the signal, the mapping the
# thread jumped to (not code) and, by file and offset, the caller, which
# addr2line resolves to the fault hook; the process ends with SIGSEGV's status.
# HSR_CRASH_REPORT=0 leaves the handler out. Across ranks: the crashed rank
# reports, the survivors name it, the job fails.
set -u
run=$1 hsr=$2
dir=$(mktemp -d /tmp/hsr-crash-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "crash_report: $*"; [ -f "$dir/log" ] && grep -v '^ *$' "$dir/log" | tail -20; exit 1; }
cd "$dir" || exit 1
ulimit -c 0 # the test asserts the report, not a core

OPENBLAS_NUM_THREADS=1 HSR_FAULT=0:step:2:jump timeout 60 "$hsr" train --device sim --steps 5 --no-progress >log 2>&1
rc=$?
[ "$rc" = 139 ] || fail "one rank: exit code $rc (want 139, SIGSEGV's)"
grep -q "^\[rank 0\] hsr fatal: SIGSEGV (no permission for the access) in thread '[^']*' (tid [0-9]*, pid [0-9]*)$" log ||
  fail "no first line naming the signal and the thread"
grep -Eq "^\[rank 0\] hsr fatal:   at 0x[0-9a-f]+ \(.*/hsr\+0x[0-9a-f]+, r-+p\): not code" log ||
  fail "the instruction's mapping is not named as read-only data of hsr"
line=$(grep -E "^\[rank 0\] hsr fatal:   called from 0x[0-9a-f]+ \(.*/hsr\+0x[0-9a-f]+, r-xp\)$" log) ||
  fail "no caller in hsr's code"
if command -v addr2line >/dev/null; then
  file=${line##*(}
  off=${file%%, *}
  fn=$(addr2line -f -e "${off%+*}" "${off##*+}" | head -1)
  [ "$fn" = fault_hook_hit ] || fail "addr2line names the caller '$fn', not fault_hook_hit"
fi
[ "$(grep -c 'hsr fatal: SIGSEGV' log)" = 1 ] || fail "the report is not printed once"

OPENBLAS_NUM_THREADS=1 HSR_CRASH_REPORT=0 HSR_FAULT=0:step:2:jump timeout 60 "$hsr" train --device sim --steps 5 \
  --no-progress >log 2>&1
rc=$?
[ "$rc" = 139 ] || fail "HSR_CRASH_REPORT=0: exit code $rc (want 139)"
! grep -q "hsr fatal" log || fail "HSR_CRASH_REPORT=0 still reports"

HSR_COMM_TIMEOUT=4 OPENBLAS_NUM_THREADS=1 timeout 60 "$run" -n 4 --nodes 2 --launcher mpirun -- \
  env HSR_FAULT=1:all_gather:20:jump "$hsr" train --device sim --steps 20 --no-progress >log 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "4 ranks: exit code $rc (want a failure, not 0 or the timeout)"
grep -q "^\[rank 1\] hsr fatal: SIGSEGV" log || fail "4 ranks: rank 1 does not report its crash"
grep -q "^\[rank [023]\] hsr fatal" log && fail "4 ranks: a survivor reports a crash"
grep -Eq "^\[rank 0\] hsr error: rank 1 \(node 0, host [^,]+, pid [0-9]+\) was killed or crashed" log ||
  fail "4 ranks: rank 0 (rank 1's node) does not name rank 1"
echo "crash_report: the crashed rank names its signal, thread and caller; its node peer names it"
