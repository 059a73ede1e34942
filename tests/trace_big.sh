#!/usr/bin/env bash
# trace_big.sh HSR: hsr trace summarize of a trace of 100,000 steps (400,000
# events, half the all-gathers without a step argument) finishes inside
# CTest's bound (120 s, the machine loaded) with every step summarized: the
# summary is O(n log n) (a search per step made it quadratic: 8,000 steps
# took 5 s, so 100,000 would take about 13 minutes).
set -u
hsr=$1
t=$(mktemp -d /tmp/hsr-trace-big-XXXXXX)
trap 'rm -rf "$t"' EXIT
python3 - "$t/big.json" <<'PY'
import sys
out = ['{"traceEvents":[']
t = 0
for s in range(1, 100001):
    out.append(
        '{"ph":"X","cat":"step","name":"step","pid":0,"ts":%d,"dur":100,"args":{"step":%d}},'
        '{"ph":"X","cat":"compute","name":"fwd","pid":0,"ts":%d,"dur":40,"args":{"step":%d}},'
        '{"ph":"X","cat":"comm","name":"all_gather","pid":0,"ts":%d,"dur":30,"args":{"step":%d,"unit":"u0","group":"shard"}},'
        '{"ph":"X","cat":"comm","name":"all_gather","pid":0,"ts":%d,"dur":30,"args":{"unit":"u1","group":"shard"}}%s'
        % (t, s, t + 5, s, t + 10, s, t + 60, "," if s < 100000 else ""))
    t += 100
out.append("]}")
open(sys.argv[1], "w").write("".join(out))
PY
"$hsr" trace summarize "$t/big.json" >"$t/out.txt" || { echo "trace_big: summarize failed"; exit 1; }
# one row per step: "step ranks step_ms compute comm exposed overlap all-gathers"
n=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8' "$t/out.txt" | wc -l)
ok=$(awk '$1 ~ /^[0-9]+$/ && NF >= 8 && $7 == "50.0%" && $8 == 2' "$t/out.txt" | wc -l)
[ "$n" = 100000 ] || { echo "trace_big: $n steps summarized, expected 100000"; head -5 "$t/out.txt"; exit 1; }
[ "$ok" = 100000 ] || { echo "trace_big: $ok of 100000 steps with half the communication hidden and 2 gathers"; exit 1; }
grep -q 'all-gathers per unit (per rank): u0=1 u1=1' "$t/out.txt" || { echo "trace_big: gathers per unit wrong"; tail -3 "$t/out.txt"; exit 1; }
echo "trace_big: 100000 steps, each 2 all-gathers (one found by its window), half the communication hidden"
