#!/usr/bin/env bash
# coll_vs_mpi.sh: hsr collectives against Open MPI, interleaved in one run.
#
# Each launch runs, for every op: `hsr bench <op>` then `mpi_peer <op>` (same sizes,
# iterations and checks), plus `hsr bench copy` (single-thread memcpy and
# streaming-copy bandwidth, the physical reference). The summary takes the
# best busbw per size over the launches for each tool and prints hsr/MPI.
set -euo pipefail

prog=coll_vs_mpi.sh
usage() {
  cat <<TXT
usage: $prog [-n RANKS] [--nodes N] [--launches K] [-b SIZE] [-e SIZE] [-f F] [--iters N]
             [--ops "all_gather reduce_scatter"] [--mem comm|user] [--build DIR] [--out DIR]

  -n RANKS      ranks (default 4)            --nodes N     simulated nodes for hsr (default 1)
  --launches K  launches of each tool (3)    -b/-e/-f      sizes as in nccl-tests (64M 64M 2)
  --iters N     timed iterations (20)        --ops LIST    ops to compare (all_gather reduce_scatter)
  --mem M       hsr buffers: comm or user    --build DIR   build tree (default: ./build)
  --out DIR     keep the JSON files there (default: a temporary directory)
MPI always runs as one node (Open MPI's own shared-memory path).
TXT
}
. "$(cd "$(dirname "$0")/.." && pwd)/scripts/argcheck.sh"
die() { ac_die "$@"; }

np=4; nodes=1; launches=3; b=64M; e=64M; f=2; iters=20; ops="all_gather reduce_scatter"; mem=comm
build="$(pwd)/build"; out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -n|--nodes|--launches|-b|-e|-f|--iters|--ops|--mem|--build|--out) ac_need "$1" $# "${2:-}" ;;&
    -n) np="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --launches) launches="$2"; shift 2 ;;
    -b) b="$2"; shift 2 ;;
    -e) e="$2"; shift 2 ;;
    -f) f="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --ops) ops="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
ac_int -n "$np" 2 4096
ac_int --nodes "$nodes" 1 4096
[ $((np % nodes)) -eq 0 ] || die "--nodes $nodes does not divide -n $np"
ac_int --launches "$launches" 1 1000
ac_size -b "$b"
ac_size -e "$e"
ac_num -f "$f"
ac_int --iters "$iters" 1 1000000
for op in $ops; do ac_choice "--ops: '$op'" "$op" 'all_gather|reduce_scatter|all_reduce|broadcast'; done
[ -n "${ops// /}" ] || die "--ops needs at least one op"
ac_choice --mem "$mem" 'comm|user'
ac_dir --build "$build"
[ -z "$out" ] || ac_newdir --out "$out"
hsr="$build/hsr"; peer="$build/mpi_peer"; run="$build/hsr-run"
for x in "$hsr" "$peer" "$run"; do [ -x "$x" ] || die "$x not found (build first; mpi_peer needs libopenmpi-dev)"; done
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"

echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/')"
echo "# $np ranks, hsr nodes $nodes, mem $mem, sizes $b..$e x$f, iters $iters, launches $launches"
for ((k = 0; k < launches; k++)); do
  "$hsr" bench copy --size 64M --reps 3 --json > "$out/copy.$k.json"
  for op in $ops; do
    "$run" -n "$np" --nodes "$nodes" -- "$hsr" bench "$op" -b "$b" -e "$e" -f "$f" -n "$iters" -w 3 -c 1 \
      --mem "$mem" -J "$out/hsr.$op.$k.json" > "$out/hsr.$op.$k.txt"
    "$run" -n "$np" -- "$peer" "$op" -b "$b" -e "$e" -f "$f" -n "$iters" -w 3 -c 1 \
      -J "$out/mpi.$op.$k.json" > "$out/mpi.$op.$k.txt"
  done
done
echo "# after: $(uptime | sed 's/.*load/load/')"

python3 - "$out" "$launches" "$ops" "$np" <<'PY'
import json, sys
out, launches, ops, n = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
copies = [json.load(open(f"{out}/copy.{k}.json")) for k in range(launches)]
m1 = [c["memcpy_1t"] for c in copies]; s1 = [c["stream_1t"] for c in copies]; sn = [c["stream_nt"] for c in copies]
print(f"# memcpy 1 thread: {min(m1):.2f}-{max(m1):.2f} GB/s; streaming copy 1 thread {min(s1):.2f}-{max(s1):.2f}, "
      f"{copies[0]['threads']} threads {min(sn):.2f}-{max(sn):.2f} GB/s")
ceil = max(sn) * (n - 1) / n**2
print(f"# all-gather ceiling at {n} ranks = best {copies[0]['threads']}-thread streaming x (n-1)/n^2 = {ceil:.2f} GB/s")
bad = 0
for op in ops:
    best = {}
    for tool in ("hsr", "mpi"):
        for k in range(launches):
            d = json.load(open(f"{out}/{tool}.{op}.{k}.json"))
            bad += int(d["out_of_bounds"]["count"])  # nccl-tests' keys, in both tools' files
            for r in d["results"]:
                for place in ("out_of_place", "in_place"):
                    key = (r["size"], place)
                    best.setdefault(key, {}).setdefault(tool, []).append(r[place]["bus_bw"])
    print(f"\n# {op}: busbw GB/s, best (range) over {launches} launches")
    print(f"# {'size(B)':>12} {'place':>12} {'hsr':>18} {'mpi':>18} {'hsr/mpi':>8}" +
          (f" {'of ceiling':>10}" if op == "all_gather" else ""))
    for (size, place), v in sorted(best.items()):
        h, m = v["hsr"], v["mpi"]
        line = (f"  {size:>12} {place:>12} {max(h):6.2f} ({min(h):.2f}-{max(h):.2f}) "
                f"{max(m):6.2f} ({min(m):.2f}-{max(m):.2f}) {max(h) / max(m):8.2f}")
        if op == "all_gather":
            line += f" {max(h) / ceil:10.2f}"
        print(line)
sys.exit(1 if bad else 0)
PY
