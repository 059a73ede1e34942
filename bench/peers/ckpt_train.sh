#!/usr/bin/env bash
# bench/peers/ckpt_train.sh [options]: the asynchronous checkpoint inside a training run,
#   hsr train --ckpt DIR --save-every K --async-save beside fsdp2.py --ckpt DIR
#   --save-every K --async-save (DCP's async_save; the next save waits on the
#   previous future first, as torchtitan), on the same job as run.sh (the same
#   initial weights, text, ranks, mesh, steps), interleaved: ROUNDS rounds of
#   hsr then the peer. Both save after every K-th step and after the last.
#   Per save, the time the training loop is blocked on rank 0:
#     hsr   the save call's blocked time ("the training blocked Z ms") plus the
#           wait for the previous save when it was still running ("waits W ms")
#     DCP   the wait on the previous future, get_state_dict and the async_save call
#   Prints the medians over every save of every round, the saves that found
#   the previous one still running, the background write (call to committed)
#   and each side's tokens/s with the checkpoints; round 1's losses are
#   compared as run.sh does (compare.py). Writes OUT/ckpt_train.json.
# Options:
#   --model gpt|llama  --ranks 4  --mesh fsdp|hsdp  --reshard full  --steps 20
#   --save-every 5     --rounds 3
#   --dir /tmp         where the checkpoints go (removed after each run)
#   --out DIR          logs and JSON (default a new /tmp/hsr-peers-ckpt-train-XXXXXX)
#   --corpus REV|FILE  the text (run.sh's pinned commit by default)
#   -- ARGS            more flags for hsr train only, before the initial weights are
#                      written (the model's shape: the peer reads it from the weights)
# Env: HSR_BUILD (default <src>/build), HSR_PEERS_VENV (default bench/peers/.venv).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
B=${HSR_BUILD:-$SRC/build}
PY=${HSR_PEERS_VENV:-$HERE/.venv}/bin/python
model=gpt ranks=4 mesh=fsdp reshard=full steps=20 every=5 rounds=3 dir=/tmp out=""
corpus=$(sed -n 's/^PINNED_REV=//p' "$HERE/run.sh")
shape=()
prog=peers/ckpt_train.sh
. "$SRC/scripts/argcheck.sh"
ac_env dir HSR_BUILD
while [ $# -gt 0 ]; do
  case $1 in
    --model|--ranks|--mesh|--reshard|--steps|--save-every|--rounds|--dir|--out|--corpus) ac_need "$1" $# "${2:-}" ;;&
    --model) model=$2; shift 2;;
    --ranks) ranks=$2; shift 2;;
    --mesh) mesh=$2; shift 2;;
    --reshard) reshard=$2; shift 2;;
    --steps) steps=$2; shift 2;;
    --save-every) every=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --dir) dir=$2; shift 2;;
    --out) out=$2; shift 2;;
    --corpus) corpus=$2; shift 2;;
    --) shift; shape=("$@"); break;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) ac_die "unknown option '$1'";;
  esac
done
ac_choice --model "$model" 'gpt|llama'
ac_int --ranks "$ranks" 1 4096
ac_choice --mesh "$mesh" 'fsdp|hsdp'
ac_choice --reshard "$reshard" 'full|none'
ac_int --steps "$steps" 2 100000000
ac_int --save-every "$every" 1 100000000
ac_int --rounds "$rounds" 1 1000
ac_dir --dir "$dir"
if [ "$mesh" = hsdp ]; then
  { [ "$ranks" -ge 4 ] && [ $((ranks % 2)) = 0 ]; } || ac_die "--mesh hsdp needs an even --ranks of 4 or more"
  hflags=(--strategy hybrid --replicate 2 --shard $((ranks / 2)) --reshard "$reshard")
  pflags=(--mesh "2x$((ranks / 2))" --reshard "$reshard")
else
  hflags=(--strategy fsdp --reshard "$reshard")
  pflags=(--mesh "$ranks" --reshard "$reshard")
fi
[ -z "$out" ] || ac_newdir --out "$out"
[ -x "$B/hsr" ] || { echo "peers: no $B/hsr (build first: scripts/setup.sh)" >&2; exit 2; }
[ -x "$PY" ] || { echo "peers: no environment (bench/peers/setup.sh)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/hsr-peers-ckpt-train-XXXXXX)}
mkdir -p "$out"
text=$out/corpus.txt
"$HERE/corpus.sh" "$corpus" "$text" || exit 2
init=$out/init.safetensors
"$B/hsr" train --model "$model" --steps 1 --data "$text" "${shape[@]}" --export-init "$init" --no-progress >"$out/init.log" 2>&1 ||
  { echo "peers: hsr train --export-init failed: $out/init.log" >&2; tail -3 "$out/init.log" >&2; exit 1; }
echo "# hsr train --async-save vs DCP async_save in fsdp2.py (torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)):" \
  "model $model ${shape[*]}, $ranks ranks, $mesh:$reshard, $steps steps, a save every $every and after the last," \
  "dir $dir, $rounds rounds; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  ck=$(mktemp -d "$dir/hsr-peers-ck-XXXXXX")
  "$B/hsr-run" -n "$ranks" -- "$B/hsr" train --model "$model" --steps "$steps" --data "$text" "${hflags[@]}" --init "$init" \
    --ckpt "$ck/hsr" --save-every "$every" --async-save --no-progress --json "$out/hsr-$r.json" --log "$out/hsr-$r.jsonl" \
    >"$out/hsr-$r.log" 2>&1 </dev/null || { echo "hsr failed: $out/hsr-$r.log"; tail -3 "$out/hsr-$r.log"; }
  "$B/hsr-run" -n "$ranks" -- "$PY" -W ignore "$HERE/fsdp2.py" --init "$init" --steps "$steps" --data "$text" "${pflags[@]}" \
    --ckpt "$ck/dcp" --save-every "$every" --async-save --port $((29500 + RANDOM % 400)) \
    --json "$out/peer-$r.json" --log "$out/peer-$r.jsonl" >"$out/peer-$r.log" 2>&1 </dev/null ||
    { echo "peer failed: $out/peer-$r.log"; tail -3 "$out/peer-$r.log"; }
  rm -rf "$ck"
done
python3 "$HERE/compare.py" --n $((steps < 10 ? steps : 10)) --json "$out/hsr-1.jsonl" "$out/peer-1.jsonl" >"$out/compare.json" 2>"$out/compare.err"
python3 - "$out" "$rounds" "$model" "$ranks" "$mesh:$reshard" "$steps" "$every" "${shape[*]}" <<'PY'
import json, re, statistics, sys
out, rounds, model, ranks, cfg, steps, every, shape = sys.argv[1:]
rounds = int(rounds)
H = {"blocked": [], "waited": 0, "saves": 0, "commit": [], "tps": [], "kb": []}
P = {"blocked": [], "blocked_max": [], "waited": 0, "saves": 0, "commit": [], "tps": []}
for r in range(1, rounds + 1):
    try:
        log = open(f"{out}/hsr-{r}.log").read()
        H["tps"].append(json.load(open(f"{out}/hsr-{r}.json"))["tokens_per_s"])
    except (OSError, ValueError, KeyError):
        log = ""
    waits = {int(s): float(w) for s, w in re.findall(r"checkpoint: step (\d+) waits ([\d.]+) ms", log)}
    for s, kb, b in re.findall(r"checkpoint: step (\d+) -> \S+: this rank's ([\d.]+) KB staged in [\d.]+ ms "
                               r"\(the training blocked ([\d.]+) ms\)", log):
        H["blocked"].append((float(b) + waits.get(int(s), 0.0)) / 1e3)
        H["saves"] += 1
        H["kb"].append(float(kb))
    H["waited"] += len(waits)
    H["commit"] += [float(t) / 1e3 for t in re.findall(r"committed in the background -> \S+, [\d.]+ KB; this rank wrote "
                                                       r"[\d.]+ KB in ([\d.]+) ms", log)]
    try:
        d = json.load(open(f"{out}/peer-{r}.json"))
    except (OSError, ValueError):
        continue
    P["tps"].append(d["tokens_per_s"])
    c = d["ckpt"]
    for s in c["saves"]:
        P["blocked"].append(s["blocked_s"])
        P["commit"].append(s["commit_s"])
        P["waited"] += s["was_running"]
        P["saves"] += 1
    P["blocked_max"] += c["blocked_max_s"]
try:
    cmp = json.load(open(f"{out}/compare.json"))
except (OSError, ValueError):
    cmp = {}
med = lambda v: statistics.median(v) if v else None
f = lambda x, fmt=".4f": format(x, fmt) if x is not None else "-"
hb, pb = med(H["blocked"]), med(P["blocked"])
print()
print(f"{'per save, rank 0':<46} {'hsr':>10} {'DCP':>10} {'DCP/hsr':>8}")
rows = [("blocked (s), median", hb, pb), ("blocked (s), max", max(H["blocked"], default=None), max(P["blocked"], default=None)),
        ("background write, call to committed (s)", med(H["commit"]), med(P["commit"]))]
for name, h, p in rows:
    print(f"{name:<46} {f(h):>10} {f(p):>10} {f(p / h if h and p else None, '.1f') + 'x':>8}")
print(f"{'saves (found the previous one running)':<46} {str(H['saves']) + ' (' + str(H['waited']) + ')':>10} "
      f"{str(P['saves']) + ' (' + str(P['waited']) + ')':>10}")
print(f"{'tokens/s with the checkpoints, median':<46} {f(med(H['tps']), '.0f'):>10} {f(med(P['tps']), '.0f'):>10}")
print(f"same job (round 1, compare.py): {cmp.get('agree')}, loss max rel {cmp.get('max_rel')}, "
      f"grad norm step 1 rel {cmp.get('max_rel_grad_norm_judged')}; DCP's slowest rank per save, median {f(med(P['blocked_max']))} s")
res = {"model": model, "shape": shape or None, "ranks": int(ranks), "config": cfg, "steps": int(steps), "save_every": int(every),
       "rounds": rounds, "load": open("/proc/loadavg").read().split()[:3],
       "hsr": {"blocked_s_median": hb, "blocked_s": H["blocked"], "saves": H["saves"], "waited_on_previous": H["waited"],
               "commit_s_median": med(H["commit"]), "rank_kb": med(H["kb"]), "tokens_per_s_median": med(H["tps"])},
       "dcp": {"blocked_s_median": pb, "blocked_s": P["blocked"], "blocked_slowest_rank_s_median": med(P["blocked_max"]),
               "saves": P["saves"], "waited_on_previous": P["waited"], "commit_s_median": med(P["commit"]),
               "tokens_per_s_median": med(P["tps"])},
       "ratio_blocked_dcp_over_hsr": pb / hb if hb and pb else None,
       "same_job": cmp.get("agree"), "loss_max_rel": cmp.get("max_rel"), "grad_norm_first_rel": cmp.get("max_rel_grad_norm_judged")}
json.dump(res, open(f"{out}/ckpt_train.json", "w"), indent=1)
print(json.dumps({k: v for k, v in res.items()}))
PY
echo "# logs and JSON: $out"
