#!/usr/bin/env bash
# sim_bench_step.sh HSR_RUN HSR: hsr bench step --device sim --compute wait on
# 4 ranks as 2 nodes: the JSON says the device; every figure is present; the
# trace's compute spans come from the device clock (each forward, which holds
# the compute stream for --compute-ms, spans at least that; each backward at
# least twice that), and its gathers have spans on the gather lane.
set -u
run=$1 hsr=$2
tmp=$(mktemp -d /tmp/hsr-sim-step-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
out=$("$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" bench step --device sim --compute wait --units 3 \
      --unit-size 64K --compute-ms 5 --steps 2 --warmup 1 --reshard full --prefetch 0,1 --json "$tmp/s.json" \
      --trace "$tmp/t" 2>&1); rc=$?
echo "$out"
[ "$rc" = 0 ] || { echo "sim_bench_step: exit code $rc"; exit 1; }
grep -q "^# hsr bench step: 4 ranks, 2 node(s), sim device" <<<"$out" || { echo "sim_bench_step: no sim device line"; exit 1; }
python3 - "$tmp/s.json" "$tmp/t" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "sim" and d["compute"] == "wait", (d.get("device"), d.get("compute"))
for x in d["results"]:
    assert x["step_ms"] > 0 and x["compute_ms"] > 0 and x["all_gather_ms"] > 0, x
    assert 0 <= x["exposed_comm_ms"] <= x["comm_ms"] + 1e-9, x
for pf in (0, 1):
    ev = [e for e in json.load(open(f"{sys.argv[2]}-full-p{pf}.json"))["traceEvents"] if e["ph"] == "X"]
    fwd = [e for e in ev if e["name"] == "forward"]
    bwd = [e for e in ev if e["name"] == "backward"]
    ag = [e for e in ev if e["name"] == "all_gather"]
    assert fwd and bwd and ag, (len(fwd), len(bwd), len(ag))
    # ts and dur are microseconds: a device span covers the kernel's hold
    assert min(e["dur"] for e in fwd) >= 5000 - 1, min(e["dur"] for e in fwd)
    assert min(e["dur"] for e in bwd) >= 10000 - 1, min(e["dur"] for e in bwd)
print("sim_bench_step: ok (device-clock spans, every figure present)")
PY
