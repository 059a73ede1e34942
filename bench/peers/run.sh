#!/usr/bin/env bash
# bench/peers/run.sh [options] [-- ARGS]: hsr train beside its PyTorch peers, interleaved.
#   For each rank count and each configuration, ROUNDS rounds of: hsr train
#   --model gpt (or llama), then the peer on the same job (same initial weights, written
#   once by hsr train --export-init; same data windows, AdamW, clip, schedule,
#   global batch, dtypes; one thread per rank). Both are started by hsr-run
#   (mpirun, the same binding), so --nodes / --emulate-net put the peer's ranks
#   in the same simulated nodes and network namespace as hsr's. Round 1 of each
#   configuration checks the first min(10, STEPS) losses and gradient norms of
#   the two (compare.py, rtol 1e-4). Prints a table (medians over the rounds,
#   ratio = hsr tokens/s / peer tokens/s) and writes it as JSON (OUT/peers.json).
#   Configurations, per rank count N (hsr flags = peer flags):
#     fsdp2 fsdp:<reshard>  --strategy fsdp (1-D mesh of N)     reshard full, none, partial:N/2 (N >= 4)
#     fsdp2 hsdp:<reshard>  --strategy hybrid --replicate 2 --shard N/2 (2-D mesh; N >= 4): full, none
#     ddp   ddp             --strategy ddp (N >= 2; at 1 rank: plain torch against hsr fsdp)
#     deepspeed zero3       --strategy fsdp --reshard full (ZeRO-3; needs setup.sh --with deepspeed)
# Options:
#   --model gpt|llama      hsr train --model (default gpt); the peers read it from the weights
#   --peers "fsdp2 ddp"    which peers: fsdp2, ddp, deepspeed (default "fsdp2 ddp")
#   --ranks "1 2 4"        rank counts (default "1 2 4")
#   --reshard "full none partial"   reshard policies of the fsdp2 rows (default all three)
#   --mesh "fsdp hsdp"     the fsdp2 meshes (default both)
#   --rounds 3  --steps 20 --prefetch 1 (hsr's and the peer's)
#   --nodes N              simulated nodes (hsr-run --nodes); the HSDP replicas then span them
#   --emulate-net RATE     hsr-run --emulate-net RATE (root; e.g. 300mbit, 1gbit)
#   --quick                --ranks "1 2" --rounds 1 --steps 10 --reshard full --mesh fsdp: a smoke run
#   --out DIR              logs, JSON and the initial weights (default a new /tmp/hsr-peers-XXXXXX)
#   --corpus REV|FILE      the training text of both: hsr train's default text as it was at commit REV
#                          (bench/peers/corpus.sh; default the pinned PINNED_REV below), or a file
#   -- ARGS                more flags for both (e.g. --layers 4 --dim 128 --batch 16 --seq 128)
# Env: HSR_BUILD (default <src>/build), HSR_PEERS_VENV (default bench/peers/.venv: bench/peers/setup.sh).
# A benchmark, not a test: on a shared machine single figures swing; read the
# ratio of the medians of runs interleaved in the same minutes.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
B=${HSR_BUILD:-$SRC/build}
VENV=${HSR_PEERS_VENV:-$HERE/.venv}
PY=$VENV/bin/python
model=gpt peers="fsdp2 ddp" ranks="1 2 4" reshards="full none partial" meshes="fsdp hsdp" rounds=3 steps=20 prefetch=1
nodes=1 rate="" out="" quick=0
# The text every table of docs/peers.md trains on: the default corpus of this
# commit. hsr's default (build/hsr-corpus.txt) follows the tree, so its
# batches, and the losses compared, would change with every commit.
PINNED_REV=00d74a319e8472865d5d44785ab257d58f04b9e8
corpus=$PINNED_REV
extra=()
prog=peers/run.sh
. "$SRC/scripts/argcheck.sh"
ac_env dir HSR_BUILD
while [ $# -gt 0 ]; do
  case $1 in
    --model|--peers|--ranks|--reshard|--mesh|--rounds|--steps|--prefetch|--nodes|--emulate-net|--out|--corpus) ac_need "$1" $# "${2:-}" ;;&
    --model) model=$2; shift 2;;
    --peers) peers=$2; shift 2;;
    --ranks) ranks=$2; shift 2;;
    --reshard) reshards=$2; shift 2;;
    --mesh) meshes=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --steps) steps=$2; shift 2;;
    --prefetch) prefetch=$2; shift 2;;
    --nodes) nodes=$2; shift 2;;
    --emulate-net) rate=$2; shift 2;;
    --out) out=$2; shift 2;;
    --corpus) corpus=$2; shift 2;;
    --quick) quick=1; shift;;
    --) shift; extra=("$@"); break;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) ac_die "unknown option '$1'";;
  esac
done
[ "$quick" = 1 ] && { ranks="1 2"; rounds=1; steps=10; reshards=full; meshes=fsdp; }
ac_choice --model "$model" 'gpt|llama'
for p in $peers; do ac_choice "--peers: each" "$p" 'fsdp2|ddp|deepspeed'; done
for r in $ranks; do ac_int "--ranks: each" "$r" 1 4096; done
for r in $reshards; do ac_choice "--reshard: each" "$r" 'full|none|partial'; done
for m in $meshes; do ac_choice "--mesh: each" "$m" 'fsdp|hsdp'; done
ac_int --rounds "$rounds" 1 1000
ac_int --steps "$steps" 2 100000000
ac_int --prefetch "$prefetch" 0 64
ac_int --nodes "$nodes" 1 4096
[ -z "$out" ] || ac_newdir --out "$out"
[ -x "$B/hsr" ] || { echo "peers: no $B/hsr (build first: scripts/setup.sh)" >&2; exit 2; }
[ -x "$PY" ] || { echo "peers: no environment at $VENV (make it: bench/peers/setup.sh)" >&2; exit 2; }
"$PY" -c "import torch" 2>/dev/null || { echo "peers: $PY cannot import torch (bench/peers/setup.sh --force)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/hsr-peers-XXXXXX)}
mkdir -p "$out"
text=$out/corpus.txt
"$HERE/corpus.sh" "$corpus" "$text" || exit 2
text_sum=$(sha256sum "$text" | cut -c1-16)
extra=(--data "$text" "${extra[@]}")
netargs=(-n); [ "$nodes" -gt 1 ] && netargs=(--nodes "$nodes" -n); [ -n "$rate" ] && netargs=(--emulate-net "$rate" "${netargs[@]}")
launch() { local n=$1; shift; "$B/hsr-run" "${netargs[@]}" "$n" -- "$@" </dev/null; } # stdin: the configurations

# the initial weights, once: both sides start from this file
init=$out/init.safetensors
"$B/hsr" train --model "$model" --steps 1 "${extra[@]}" --export-init "$init" --no-progress >"$out/init.log" 2>&1 ||
  { echo "peers: hsr train --export-init failed: $out/init.log" >&2; tail -3 "$out/init.log" >&2; exit 1; }
tv=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)
echo "# hsr $("$B/hsr" version 2>/dev/null | head -1) vs torch $tv (gloo, CPU), model $model, $steps steps, ${extra[*]:-defaults}," \
  "prefetch $prefetch, nodes $nodes${rate:+, emulated net $rate}; one thread per rank; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# text: $text ($(wc -c <"$text") bytes, sha256 $text_sum...; --corpus $corpus)"

# configurations: name|peer|hsr flags|peer flags, for N ranks
configs() {
  local n=$1 p m r s k
  for p in $peers; do
    if [ "$p" = deepspeed ]; then
      echo "zero3|deepspeed_zero3|--strategy fsdp --reshard full --prefetch $prefetch|"
      continue
    fi
    if [ "$p" = ddp ]; then
      if [ "$n" -gt 1 ]; then echo "ddp|ddp|--strategy ddp|"; else echo "ddp|ddp|--strategy fsdp|"; fi
      continue
    fi
    for m in $meshes; do
      if [ "$m" = fsdp ]; then s=$n; else s=$((n / 2)); { [ "$n" -ge 4 ] && [ $((n % 2)) = 0 ]; } || continue; fi
      for r in $reshards; do
        k=$r
        if [ "$r" = partial ]; then
          if [ "$s" -lt 4 ] || [ $((s % 2)) != 0 ]; then continue; fi
          k=partial:$((s / 2))
        fi
        [ "$n" = 1 ] && [ "$r" != full ] && continue # one rank: nothing to reshard
        if [ "$m" = fsdp ]; then
          echo "fsdp:$k|fsdp2|--strategy fsdp --reshard $k --prefetch $prefetch|--mesh $n --reshard $k --prefetch $prefetch"
        else
          echo "hsdp:$k|fsdp2|--strategy hybrid --replicate 2 --shard $s --reshard $k --prefetch $prefetch|--mesh 2x$s --reshard $k --prefetch $prefetch"
        fi
      done
    done
  done
}

rows=$out/rows.jsonl
: >"$rows"
printf "%-6s %-18s %-6s %11s %11s %7s\n" ranks config round hsr_tok/s peer_tok/s ratio
for n in $ranks; do
  while IFS='|' read -r name peer hflags pflags; do
    [ -n "$name" ] || continue
    tag=$(echo "$n-$name" | tr ':' '_')
    for r in $(seq 1 "$rounds"); do
      # shellcheck disable=SC2086
      launch "$n" "$B/hsr" train --model "$model" --steps "$steps" "${extra[@]}" $hflags --init "$init" --no-progress \
        --json "$out/hsr-$tag-$r.json" --log "$out/hsr-$tag-$r.jsonl" >"$out/hsr-$tag-$r.log" 2>&1 ||
        { echo "hsr failed: $out/hsr-$tag-$r.log"; tail -3 "$out/hsr-$tag-$r.log"; }
      # shellcheck disable=SC2086
      launch "$n" "$PY" -W ignore "$HERE/$peer.py" --init "$init" --steps "$steps" "${extra[@]}" $pflags \
        --port $((29500 + RANDOM % 400)) --json "$out/peer-$tag-$r.json" --log "$out/peer-$tag-$r.jsonl" \
        >"$out/peer-$tag-$r.log" 2>&1 || { echo "peer failed: $out/peer-$tag-$r.log"; tail -3 "$out/peer-$tag-$r.log"; }
      python3 - "$out" "$tag" "$r" "$n" "$name" "$peer" "$steps" >>"$rows" <<'PY'
import json, sys
out, tag, r, n, name, peer, steps = sys.argv[1:]
def tps(p):
    try:
        return json.load(open(p))["tokens_per_s"]
    except (OSError, ValueError, KeyError):
        return None
print(json.dumps({"ranks": int(n), "config": name, "peer": peer, "round": int(r),
                  "hsr": tps(f"{out}/hsr-{tag}-{r}.json"), "peer_tokens_per_s": tps(f"{out}/peer-{tag}-{r}.json")}))
PY
      tail -1 "$rows" | python3 -c '
import json, sys
d = json.load(sys.stdin)
h, p = d["hsr"], d["peer_tokens_per_s"]
f = lambda x: format(x, ".0f") if x else "-"
ratio = format(h / p, ".2f") + "x" if h and p else "-"
print("%-6s %-18s %-6s %11s %11s %7s" % (d["ranks"], d["peer"] + " " + d["config"], d["round"], f(h), f(p), ratio))'
      if [ "$r" = 1 ]; then
        cmpn=$((steps < 10 ? steps : 10))
        python3 "$HERE/compare.py" --n "$cmpn" --json "$out/hsr-$tag-1.jsonl" "$out/peer-$tag-1.jsonl" \
          >"$out/compare-$tag.json" 2>"$out/compare-$tag.err"
        python3 "$HERE/compare.py" --n "$cmpn" "$out/hsr-$tag-1.jsonl" "$out/peer-$tag-1.jsonl" >"$out/compare-$tag.txt" 2>&1
      fi
    done
  done < <(configs "$n")
done

python3 - "$out" "$rounds" "$steps" "$tv" "$nodes" "$rate" "$corpus" "$text_sum" <<'PY'
import json, os, statistics, sys
out, rounds, steps, tv, nodes, rate, corpus, text_sum = sys.argv[1:]
rows = [json.loads(l) for l in open(f"{out}/rows.jsonl")]
keys = []
for d in rows:
    k = (d["ranks"], d["peer"], d["config"])
    if k not in keys:
        keys.append(k)
table = []
print()
print(f"{'ranks':<6} {'peer':<6} {'config':<16} {'hsr tok/s':>10} {'peer tok/s':>10} {'hsr/peer':>9} {'loss rel':>9} {'|g|1 rel':>9} {'|g| rel':>9}  same job")
for n, peer, cfg in keys:
    rs = [d for d in rows if (d["ranks"], d["peer"], d["config"]) == (n, peer, cfg)]
    h = [d["hsr"] for d in rs if d["hsr"]]
    p = [d["peer_tokens_per_s"] for d in rs if d["peer_tokens_per_s"]]
    mh = statistics.median(h) if h else None
    mp = statistics.median(p) if p else None
    tag = f"{n}-{cfg}".replace(":", "_")
    try:
        c = json.load(open(f"{out}/compare-{tag}.json"))
    except (OSError, ValueError):
        c = {}
    row = {"ranks": n, "peer": peer, "config": cfg, "rounds": len(rs), "hsr_tokens_per_s": mh,
           "peer_tokens_per_s": mp, "ratio": mh / mp if mh and mp else None,
           "loss_max_rel": c.get("max_rel"), "grad_norm_max_rel": c.get("max_rel_grad_norm"),
           "grad_norm_first_rel": c.get("max_rel_grad_norm_judged"),
           "same_job": c.get("agree")}
    table.append(row)
    f = lambda x, fmt: format(x, fmt) if x is not None else "-"
    print(f"{n:<6} {peer:<6} {cfg:<16} {f(mh, '10.0f')} {f(mp, '10.0f')} {f(row['ratio'], '8.2f')}x "
          f"{f(row['loss_max_rel'], '9.1e')} {f(row['grad_norm_first_rel'], '9.1e')} {f(row['grad_norm_max_rel'], '9.1e')}  "
          f"{ {True: 'yes', False: 'NO'}.get(row['same_job'], '-') }")
res = {"torch": tv, "corpus": corpus, "text_sha256_16": text_sum, "steps": int(steps), "rounds": int(rounds), "nodes": int(nodes), "emulate_net": rate or None,
       "load": open("/proc/loadavg").read().split()[:3], "cores": os.cpu_count(), "rows": table}
json.dump(res, open(f"{out}/peers.json", "w"), indent=1)
print(json.dumps(res))
PY
echo "# logs, JSON and the losses compared: $out"
