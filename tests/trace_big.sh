#!/usr/bin/env bash
# trace_big.sh HSR: hsr trace summarize of a trace of 100,000 steps on 2 ranks
# (800,000 events, half the all-gathers without a step argument) finishes
# inside CTest's bound (120 s) with every step summarized: the summary is
# O(n log n) (a search per step made it quadratic: about 13 minutes here).
set -u
hsr=$1
t=$(mktemp -d /tmp/hsr-trace-big-XXXXXX)
trap 'rm -rf "$t"' EXIT
python3 - "$t/big.json" <<'PY'
import json, sys
ev = []
for r in range(2):
    t = 0.0
    for s in range(1, 100001):
        ev += [{"ph": "X", "cat": "step", "name": "step", "pid": r, "ts": t, "dur": 100.0, "args": {"step": s}},
               {"ph": "X", "cat": "compute", "name": "fwd", "pid": r, "ts": t + 5, "dur": 40.0, "args": {"step": s}},
               {"ph": "X", "cat": "comm", "name": "all_gather", "pid": r, "ts": t + 10, "dur": 30.0,
                "args": {"step": s, "unit": "u0", "group": "shard"}},
               {"ph": "X", "cat": "comm", "name": "all_gather", "pid": r, "ts": t + 60, "dur": 30.0,
                "args": {"unit": "u1", "group": "shard"}}]
        t += 100.0
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY
out=$("$hsr" trace summarize --json "$t/big.json") || { echo "trace_big: summarize failed"; exit 1; }
read -r n g o < <(jq -r '[(.steps | length), ([.steps[] | .all_gathers] | add), .steps[0].overlap] | @tsv' <<<"$out")
[ "$n" = 100000 ] || { echo "trace_big: $n steps summarized, expected 100000"; exit 1; }
[ "$g" = 200000 ] || { echo "trace_big: $g all-gathers per rank counted, expected 200000"; exit 1; }
# per step: communication [10, 40) and [60, 90), compute [5, 45): half of it hidden
[ "$o" = 0.5 ] || { echo "trace_big: overlap $o, expected 0.5"; exit 1; }
echo "trace_big: 100000 steps, 200000 all-gathers, overlap $o"
