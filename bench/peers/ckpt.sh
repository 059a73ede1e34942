#!/usr/bin/env bash
# bench/peers/ckpt.sh [--ranks 4] [--size 256M] [--rounds 3] [--mesh S|RxS] [--dir /tmp] [--out DIR]
#   hsr ckpt bench beside DCP (dcp.py) on the same sharded state (--size bytes,
#   12 per parameter: parameter and both AdamW moments; 8 units), the same ranks
#   (both started by hsr-run) and the same disk (--dir), interleaved: ROUNDS
#   rounds of one hsr ckpt bench --repeat 1 then one dcp.py --repeat 1. Prints
#   the medians: save and load GB/s (cold page cache), the time the
#   asynchronous save blocks (hsr --async-save's path against dcp.async_save),
#   and both loads onto another mesh (1-D <-> 2-D); writes OUT/ckpt.json.
# Env: HSR_BUILD (default <src>/build), HSR_PEERS_VENV (default bench/peers/.venv).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
B=${HSR_BUILD:-$SRC/build}
PY=${HSR_PEERS_VENV:-$HERE/.venv}/bin/python
ranks=4 size=256M rounds=3 mesh="" dir=/tmp out=""
prog=peers/ckpt.sh
. "$SRC/scripts/argcheck.sh"
ac_env dir HSR_BUILD
while [ $# -gt 0 ]; do
  case $1 in
    --ranks|--size|--rounds|--mesh|--dir|--out) ac_need "$1" $# "${2:-}" ;;&
    --ranks) ranks=$2; shift 2;;
    --size) size=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --mesh) mesh=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    --out) out=$2; shift 2;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) ac_die "unknown option '$1'";;
  esac
done
ac_int --ranks "$ranks" 1 4096
ac_int --rounds "$rounds" 1 1000
ac_dir --dir "$dir"
[[ "$mesh" =~ ^([0-9]+|[0-9]+x[0-9]+)?$ ]] || ac_die "--mesh '$mesh': S or RxS"
[ -x "$B/hsr" ] || { echo "peers: no $B/hsr (build first: scripts/setup.sh)" >&2; exit 2; }
[ -x "$PY" ] || { echo "peers: no environment (bench/peers/setup.sh)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/hsr-peers-ckpt-XXXXXX)}
mkdir -p "$out"
hflags=() pflags=()
if [[ "$mesh" == *x* ]]; then hflags=(--replicate "${mesh%x*}" --shard "${mesh#*x}"); pflags=(--mesh "$mesh"); fi
# the other mesh of both loads, dcp.py's rule: 1-D into 2 x N/2, 2-D into 1-D
if [[ "$mesh" == *x* ]]; then hflags+=(--load-mesh "1x$ranks")
elif [ "$ranks" -ge 4 ] && [ $((ranks % 2)) = 0 ]; then hflags+=(--load-mesh "2x$((ranks / 2))"); fi
echo "# hsr ckpt bench vs DCP (torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)), $ranks ranks," \
  "--size $size, mesh ${mesh:-$ranks}, dir $dir, $rounds rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  "$B/hsr-run" -n "$ranks" -- "$B/hsr" ckpt bench --size "$size" --repeat 1 --steps 2 --step-ms 100 --dir "$dir" \
    "${hflags[@]}" --json "$out/hsr-$r.json" >"$out/hsr-$r.log" 2>&1 </dev/null || { echo "hsr failed: $out/hsr-$r.log"; tail -3 "$out/hsr-$r.log"; }
  "$B/hsr-run" -n "$ranks" -- "$PY" -W ignore "$HERE/dcp.py" --size "$size" --repeat 1 --dir "$dir" "${pflags[@]}" \
    --port $((29500 + RANDOM % 400)) --json "$out/dcp-$r.json" >"$out/dcp-$r.log" 2>&1 </dev/null ||
    { echo "dcp failed: $out/dcp-$r.log"; tail -3 "$out/dcp-$r.log"; }
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
H = [d for d in (load(f"{out}/hsr-{r}.json") for r in range(1, rounds + 1)) if d]
D = [d for d in (load(f"{out}/dcp-{r}.json") for r in range(1, rounds + 1)) if d]
med = lambda L, k: statistics.median(d[k] for d in L) if L and all(k in d for d in L) else None
size = (H or D)[0].get("bytes", (D or [{}])[0].get("size")) if (H or D) else None
rows = [("save (s)", med(H, "save_s"), med(D, "save_s")),
        ("load, cold (s)", med(H, "load_s"), med(D, "load_s")),
        ("async save: blocked (s)", med(H, "async_blocked_s"), med(D, "async_blocked_s")),
        ("async save: to committed (s)", med(H, "async_commit_s"), med(D, "async_total_s")),
        ("load onto another mesh (s)", med(H, "load_other_mesh_s"), med(D, "load_other_mesh_s"))]
f = lambda x: f"{x:.3f}" if x is not None else "-"
print(f"{'':<30} {'hsr':>8} {'DCP':>8} {'DCP / hsr':>10}")
for name, h, d in rows:
    print(f"{name:<30} {f(h):>8} {f(d):>8} {(f'{d / h:.2f}x' if h and d else '-'):>10}")
gbs = {k: (size / v / 1e9 if v else None) for k, v in (("hsr_save_gbs", rows[0][1]), ("dcp_save_gbs", rows[0][2]),
                                                        ("hsr_load_gbs", rows[1][1]), ("dcp_load_gbs", rows[1][2]))}
print("GB/s: save hsr %s DCP %s, load hsr %s DCP %s" % tuple(f(gbs[k]) for k in gbs))
res = {"rounds": rounds, "bytes": size, "rows": [{"what": n, "hsr_s": h, "dcp_s": d} for n, h, d in rows], **gbs}
json.dump(res, open(f"{out}/ckpt.json", "w"), indent=1)
PY
echo "# logs and JSON: $out"
