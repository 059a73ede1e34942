#!/usr/bin/env bash
# tier_compare.sh: the sharding layouts across an emulated second tier.
#
# 8 ranks as 2 simulated nodes of 4, inside `hsr-run --emulate-net RATE` (one
# network namespace per run, loopback rate-limited): first the link itself
# (all-gather in the 4-rank groups of one node against the 2-rank groups
# across the nodes, same run), then `hsr train` with flat fsdp over all 8,
# hybrid (S = 4, the node), fsdp over both nodes with partial:4 (backward
# gathers stay in the node), and zero1 / zero2 / ddp on the 2 x 4 mesh. The
# table comes from hsr's own JSON: step time, exposed communication (the
# engine's wait), bytes that crossed the nodes per step (all ranks), peak
# memory of rank 0 (ledger), final loss.
set -euo pipefail

prog=tier_compare.sh
usage() {
  cat <<TXT
usage: $prog [--rate RATE] [--steps N] [--dim D] [--layers L] [--batch B] [--lr X] [--build DIR]
             [--out DIR] [--only LIST] [--rounds K]

  --rate RATE   emulated link (tc rate; default 1gbit)   --steps N   training steps (12)
  --dim D       MLP width (256)                           --layers L  MLP blocks (8)
  --batch B     global batch (64)                         --lr X      learning rate (3e-4)
  --build DIR   build tree (./build)
  --out DIR     keep the JSON files there (default: a temporary directory)
  --only LIST   run only these layouts (comma-separated names from the table)
  --rounds K    run every layout K times, interleaved; the table takes each layout's
                round with the lowest median step (default 1)
Needs what hsr-run --emulate-net needs (root, ip, tc). The CPUs are shared by
all 8 ranks and the emulated link: compare the rows of one run, not runs.
TXT
}
. "$(cd "$(dirname "$0")/.." && pwd)/scripts/argcheck.sh"
die() { ac_die "$@"; }

rate=1gbit; steps=12; dim=256; layers=8; batch=64; lr=3e-4; build="$(pwd)/build"; out=""; only=""; rounds=1
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rate|--steps|--dim|--layers|--batch|--lr|--build|--out|--only|--rounds) ac_need "$1" $# "${2:-}" ;;&
    --rate) rate="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --dim) dim="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done
for v in steps dim layers batch rounds; do ac_int "--$v" "${!v}" 1 100000000; done
ac_rate --rate "$rate"
ac_num --lr "$lr"
ac_dir --build "$build"
[ -z "$out" ] || ac_newdir --out "$out"
layouts=(
  "fsdp-8|--strategy fsdp --shard 8"
  "hybrid-2x4|--strategy hybrid --shard 4"
  "fsdp-8+partial:4|--strategy fsdp --shard 8 --reshard partial:4"
  "zero1-2x4|--strategy zero1 --shard 4"
  "zero2-2x4|--strategy zero2 --shard 4"
  "ddp-8|--strategy ddp"
)
names_all=""; for l in "${layouts[@]}"; do names_all="$names_all${names_all:+|}${l%%|*}"; done
if [ -n "$only" ]; then
  IFS=, read -ra want <<<"$only"
  for w in "${want[@]}"; do ac_choice "--only: layout" "$w" "$names_all"; done
fi
hsr="$build/hsr"; run="$build/hsr-run"
for x in "$hsr" "$run"; do [ -x "$x" ] || die "$x not found (build first)"; done
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"

model=(--dim "$dim" --layers "$layers" --batch "$batch" --lr "$lr" --steps "$steps" --no-progress)
emu=("$run" --emulate-net "$rate" --nodes 2 -n 8 --)

echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/')"
echo "# 8 ranks, 2 simulated nodes, emulated link $rate; model: ${model[*]}"
echo "# link: ${emu[*]} $hsr bench all_gather --group shard,replicate --shard 4 -b 4M -e 4M -n 5 -w 2 -J link.json"
"${emu[@]}" "$hsr" bench all_gather --group shard,replicate --shard 4 -b 4M -e 4M -n 5 -w 2 -J "$out/link.json" \
  > "$out/link.txt"
names=()
for ((k = 0; k < rounds; k++)); do
  for l in "${layouts[@]}"; do
    name=${l%%|*}; flags=${l#*|}
    if [ -n "$only" ] && [[ ",$only," != *",$name,"* ]]; then continue; fi
    [ "$k" = 0 ] && echo "# $name: ${emu[*]} $hsr train ${model[*]} $flags --json $name.json --log $name.jsonl"
    # shellcheck disable=SC2086
    "${emu[@]}" "$hsr" train "${model[@]}" $flags --json "$out/$name.$k.json" --log "$out/$name.$k.jsonl" \
      > "$out/$name.$k.txt" || { echo "$prog: $name failed:"; tail -5 "$out/$name.$k.txt"; exit 1; }
    [ "$k" = 0 ] && names+=("$name")
  done
done
echo "# after: $(uptime | sed 's/.*load/load/')"

python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
link = json.load(open(f"{out}/link.json"))
rows = {r["hsr"]["group"]: r for r in link["results"]}
s, x = rows["shard"], rows["replicate"]
ratio = x["out_of_place"]["time"] / s["out_of_place"]["time"]
print(f"# link {link['hsr']['emulated_net']}: 4 MiB all-gather, 4 ranks in one node {s['out_of_place']['time']/1e3:.2f} ms "
      f"({s['out_of_place']['bus_bw']:.2f} GB/s busbw), 2 ranks across the nodes {x['out_of_place']['time']/1e3:.2f} ms "
      f"({x['out_of_place']['bus_bw']:.3f} GB/s): cross-node {ratio:.1f}x slower (same run)")
if ratio < 5:
    print("# WARNING: the cross-node all-gather is less than 5x slower than the intra-node one: lower --rate")
mib = 1024 * 1024
res = []
for n in names:
    runs = []
    for k in range(rounds):
        d = json.load(open(f"{out}/{n}.{k}.json"))
        t = d["timing_per_step_ms"]
        steps = [json.loads(l) for l in open(f"{out}/{n}.{k}.jsonl")]
        ms = sorted(s["step_ms"] for s in steps[1:]) or [t["step"]]  # the first step records the order
        runs.append((n, d["shard"], ms[len(ms) // 2], t["step"], t["wait"],
                     d["fabric_bytes_per_step_all_ranks"]["total"] / mib, d["ledger"]["total_peak"] / mib,
                     steps[-1]["loss"], sum(v["total"]["calls"] for v in d["comm_per_step"].values())))
    res.append(min(runs, key=lambda r: r[2]))
best = min(r[2] for r in res)
print(f"\n| layout | S | step median (ms) | vs best | step mean (ms) | exposed comm, mean (ms) "
      f"| crossed nodes (MiB/step, all ranks) | peak memory rank 0 (MiB) | collectives/step (rank 0) | final loss |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for n, S, med, mean, wait, fab, peak, loss, calls in res:
    print(f"| {n} | {S} | {med:.1f} | {med / best:.2f}x | {mean:.1f} | {wait:.1f} | {fab:.2f} | {peak:.2f} | {calls:.0f} "
          f"| {loss:.4f} |")
PY
