#!/usr/bin/env bash
# sched_check.sh MODE HSR_RUN HSR
#  trace: a real 4-rank hsr train --trace run: the file is valid JSON, spans
#         are well formed, every rank has one step span per step, the
#         collectives it shows per step, group and operation equal the
#         communicators' counters (--log), and hsr trace summarize agrees;
#         --json holds the ledger with measured == predicted runtime peak.
#  wrap:  the wrap diagnostic fires with --wrap linear and not with --wrap block.
set -u
mode=$1; run=$2; hsr=$3
tmp=$(mktemp -d /tmp/hsr-sched-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
train() { "$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" train --no-progress "$@" 2>&1; }
case $mode in
trace)
  out=$(train --layers 3 --dim 32 --steps 6 --batch 64 --reshard partial:2 --strategy fsdp --prefetch-step \
        --trace "$tmp/t.json" --log "$tmp/log.jsonl" --json "$tmp/run.json"); rc=$?
  echo "$out"
  [ "$rc" = 0 ] || { echo "sched_check: hsr train exit code $rc"; exit 1; }
  "$hsr" trace summarize --json "$tmp/t.json" > "$tmp/sum.json" || { echo "sched_check: summarize failed"; exit 1; }
  python3 - "$tmp" <<'PY'
import json, sys, collections
d = sys.argv[1]
doc = json.load(open(f"{d}/t.json"))
log = [json.loads(l) for l in open(f"{d}/log.jsonl")]
steps = len(log)
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
ranks = sorted({e["pid"] for e in ev})
assert ranks == [0, 1, 2, 3], ranks
for e in ev:
    assert e["dur"] >= 0 and e["ts"] > 0, e
    assert e["cat"] in ("step", "compute", "comm", "runtime"), e
# one step span per step per rank, and every other span of a step lies inside
# it, except the step-end prefetch (--prefetch-step): an all-gather issued in
# its step that the next step waits for (it belongs to the step that issued
# it, as the counters count it)
for r in ranks:
    st = {e["args"]["step"]: e for e in ev if e["pid"] == r and e["cat"] == "step"}
    assert sorted(st) == list(range(1, steps + 1)), (r, sorted(st))
    crossing = 0
    for e in ev:
        if e["pid"] != r or e["cat"] == "step" or e["args"]["step"] not in st: continue
        s = st[e["args"]["step"]]
        end = e["ts"] + e["dur"]
        inside = end <= s["ts"] + s["dur"] + 1
        if not inside and e["name"] == "all_gather":
            nxt = st.get(e["args"]["step"] + 1)
            inside = end <= (nxt["ts"] + nxt["dur"] if nxt else end) + 1
            crossing += 1
        assert s["ts"] - 1 <= e["ts"] and inside, (e, s)
    assert crossing <= steps, (r, crossing)
# collectives per step, group and op == the communicators' counters
names = {"all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "all_reduce": "all_reduce"}
for r in ranks:
    cnt = collections.Counter()
    for e in ev:
        if e["pid"] == r and e["cat"] == "comm":
            cnt[(e["args"]["step"], e["args"]["group"].split("[")[0], e["name"])] += 1
    for l in log:
        for g, ops in l["calls"].items():
            for op, n in ops.items():
                if op not in names: continue
                got = cnt[(l["step"], g, op)]
                assert got == n, f"rank {r} step {l['step']} {g} {op}: trace {got}, counters {n}"
s = json.load(open(f"{d}/sum.json"))["steps"]
assert len(s) == steps
for x, l in zip(s, log):
    ag = sum(ops["all_gather"] for ops in l["calls"].values())
    assert x["all_gathers"] == ag, (x, ag)
    assert 0 <= x["exposed_comm_ms"] <= x["comm_ms"] + 1e-9 and x["compute_ms"] > 0, x
run = json.load(open(f"{d}/run.json"))
assert run["ledger"]["runtime_peak"] == run["ledger_predicted"]["runtime_peak"], run["ledger"]
assert run["ledger"]["categories"]["partial_slice"]["peak"] > 0
assert run["ledger"]["categories"]["activation"]["peak"] > 0
# engine time: disjoint buckets that add up to the time inside engine calls
t = run["timing_per_step_ms"]
parts = ["wait", "collective_posts", "optimizer", "data_work", "bookkeeping"]
assert all(t[k] >= 0 for k in parts), t
assert abs(sum(t[k] for k in parts) - t["engine"]) < 1e-6 * max(1, t["engine"]), t
assert 0 < t["engine"] < t["step"] and t["optimizer"] > 0 and t["collective_posts"] > 0, t
print(f"sched_check trace: ok, {len(ev)} spans, {steps} steps, counts match the counters")
PY
  ;;
wrap)
  blk=$(train --layers 4 --dim 64 --steps 4 --batch 32 --strategy fsdp --wrap block); rc1=$?
  lin=$(train --layers 4 --dim 64 --steps 4 --batch 32 --strategy fsdp --wrap linear); rc2=$?
  echo "$blk"; echo "$lin"
  [ "$rc1" = 0 ] && [ "$rc2" = 0 ] || { echo "sched_check: exit codes $rc1 $rc2"; exit 1; }
  grep -q "WARNING" <<<"$blk" && { echo "sched_check: the diagnostic fired on per-block wrapping"; exit 1; }
  grep -q "WARNING: wrap granularity" <<<"$lin" || { echo "sched_check: no diagnostic on per-linear wrapping"; exit 1; }
  echo "sched_check wrap: ok"
  ;;
bench)
  out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" bench step --units 3 --unit-size 64K --compute-ms 0.2 \
        --steps 2 --warmup 1 --reshard full,partial:2 --prefetch 0,1 --json "$tmp/b.json" --trace "$tmp/bt" 2>&1); rc=$?
  echo "$out"
  [ "$rc" = 0 ] || { echo "sched_check: bench step exit code $rc"; exit 1; }
  python3 - "$tmp/b.json" "$tmp/bt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"]
assert [(x["reshard"], x["prefetch"]) for x in r] == [("full", 0), ("full", 1), ("partial:2", 0), ("partial:2", 1)], r
for x in r:
    assert x["step_ms"] > 0 and x["compute_ms"] > 0 and x["all_gather_ms"] > 0, x
    assert 0 <= x["exposed_comm_ms"] <= x["comm_ms"] + 1e-9, x
    assert 0 <= x["all_gather_exposed_ms"] <= x["all_gather_ms"] + 1e-9, x
    assert x["speedup_vs_prefetch0"] > 0, x
# The optimizer updates the next forward's first unit first and posts its
# gather at once (prefetch > 0): three optimizer spans per step (norm, first
# unit, the rest) instead of two, and that gather starts after the first
# unit's update.
for pf, want in ((0, 2), (1, 3)):
    ev = [e for e in json.load(open(f"{sys.argv[2]}-full-p{pf}.json"))["traceEvents"] if e["ph"] == "X"]
    for rank in sorted({e["pid"] for e in ev}):
        opt = sorted((e for e in ev if e["pid"] == rank and e["name"] == "optimizer"), key=lambda e: e["ts"])
        steps = sorted({e["args"]["step"] for e in opt})
        for s in steps:
            spans = [e for e in opt if e["args"]["step"] == s]
            assert len(spans) == want, (pf, rank, s, len(spans))
            if pf and s != steps[-1]:  # the last step's gather is never waited for
                first_done = spans[1]["ts"] + spans[1]["dur"]
                g = [e for e in ev if e["pid"] == rank and e["name"] == "all_gather" and e["args"]["unit"] == "u0"
                     and spans[0]["ts"] < e["ts"]]
                assert g and min(e["ts"] for e in g) >= first_done - 1, (rank, s, first_done, g[:1])
print("sched_check bench: ok")
PY
  [ $? = 0 ] || exit 1
  # hybrid 2 x 2 with and without the outer shard: the same bytes across the nodes (the all-reduce over R
  # = reduce-scatter + all-gather; 64K units are a multiple of S x R x align: no padding apart), plus the
  # norm's 8-byte all-reduce over R on each of the 4 ranks; less memory held
  out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" bench step --units 3 --unit-size 64K --compute-ms 0.2 \
        --steps 2 --warmup 1 --shard 2 --reshard full --prefetch 1 --outer-shard none,optim --compute wait \
        --json "$tmp/o.json" 2>&1); rc=$?
  echo "$out"
  [ "$rc" = 0 ] || { echo "sched_check: bench step --outer-shard exit code $rc"; exit 1; }
  python3 - "$tmp/o.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert [x["outer_shard"] for x in r] == ["none", "optim"], r
n, o = r
assert n["fabric_bytes_per_step_all_ranks"] > 0, n
assert o["fabric_bytes_per_step_all_ranks"] == n["fabric_bytes_per_step_all_ranks"] + 4 * 8, (n, o)
assert o["fabric_bytes_per_step_by_group"]["shard"] == n["fabric_bytes_per_step_by_group"]["shard"] == 0, (n, o)
# persistent per rank, 3 units of 16384 f32 elements: master, m, v, accumulator of 1/S each without;
# with it the f32 shard (the master is its 1/R piece) and m, v, the accumulator of 1/(S R)
E = 16384
assert n["persistent_bytes_max_rank"] == 3 * (E // 2) * 4 * 4, n
assert o["persistent_bytes_max_rank"] == 3 * ((E // 2) * 4 + (E // 4) * 4 * 3), o
assert o["runtime_peak_bytes_max_rank"] < n["runtime_peak_bytes_max_rank"], (n, o)
print("sched_check bench --outer-shard: ok")
PY
  ;;
*) echo "sched_check: unknown mode $mode"; exit 2 ;;
esac
