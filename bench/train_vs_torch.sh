#!/usr/bin/env bash
# train_vs_torch.sh [options]: hsr train against PyTorch on the CPU, interleaved.
#   For each rank count, ROUNDS rounds of: hsr train (its --json summary) then
#   bench/torch_peer.py (Debian's python3-torch: the same model, AdamW, clip,
#   global batch; gloo DDP for several ranks; one thread per rank); prints the
#   tokens per second of both, the median per side and the ratio hsr / torch.
#   --sweep adds hsr-only rows at the largest rank count: --wrap block|linear x
#   --prefetch 0|1 (tokens/s, GFLOP/s beside the GEMM probe, all-gathers per
#   step, time per step by kind), and one traced run through hsr trace summarize.
# Options: --model gpt|mlp (default gpt)  --ranks "1 2 4"  --rounds 3  --steps 20
#          --nodes N (hsr-run's simulated nodes, default 1)  --sweep  --out DIR
#          -- ARGS (more hsr train / torch_peer flags: --layers --dim --heads --seq --batch)
# Env: HSR_BUILD (default <src>/build), PYTHON (default /usr/bin/python3, where
# Debian's python3-torch lives; apt-get install -y python3-torch).
# A benchmark, not a test: timings on a shared machine are noisy; read the ratio
# of the medians, taken from runs interleaved in the same minutes.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${HSR_BUILD:-$SRC/build}
PY=${PYTHON:-/usr/bin/python3}
model=gpt ranks="1 2 4" rounds=3 steps=20 nodes=1 sweep=0 out=""
extra=()
prog=train_vs_torch.sh
. "$SRC/scripts/argcheck.sh"
ac_env dir HSR_BUILD
while [ $# -gt 0 ]; do
  case $1 in
    --model|--ranks|--rounds|--steps|--nodes|--out) ac_need "$1" $# "${2:-}" ;;&
    --model) model=$2; shift 2;;
    --ranks) ranks=$2; shift 2;;
    --rounds) rounds=$2; shift 2;;
    --steps) steps=$2; shift 2;;
    --nodes) nodes=$2; shift 2;;
    --sweep) sweep=1; shift;;
    --out) out=$2; shift 2;;
    --) shift; extra=("$@"); break;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) ac_die "unknown option '$1'";;
  esac
done
ac_choice --model "$model" 'gpt|mlp'
for r in $ranks; do ac_int "--ranks: each" "$r" 1 4096; done
[ -n "${ranks// /}" ] || ac_die "--ranks needs at least one rank count"
ac_int --rounds "$rounds" 1 1000
ac_int --steps "$steps" 1 100000000
ac_int --nodes "$nodes" 1 4096
[ -z "$out" ] || ac_newdir --out "$out"
[ -x "$B/hsr" ] || { echo "train_vs_torch: no $B/hsr (build first: scripts/setup.sh)" >&2; exit 2; }
"$PY" -c "import torch" 2>/dev/null || { echo "train_vs_torch: $PY has no torch: apt-get install -y python3-torch" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/hsr-vs-torch-XXXXXX)}
mkdir -p "$out"
field() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1" 2>/dev/null || echo nan; }
median() { "$PY" -c "import statistics,sys; v=[float(x) for x in sys.argv[1:] if x!='nan']; print(f'{statistics.median(v):.0f}' if v else 'nan')" "$@"; }

echo "# hsr train vs PyTorch $("$PY" -c 'import torch; print(torch.__version__)'), model $model, $steps steps, ${extra[*]:-defaults}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %-6s %12s %12s %8s\n" ranks round hsr_tok/s torch_tok/s ratio
for n in $ranks; do
  hs=() ts=()
  for r in $(seq 1 "$rounds"); do
    "$B/hsr-run" -n "$n" --nodes "$nodes" -- "$B/hsr" train --model "$model" --steps "$steps" "${extra[@]}" \
      --no-progress --json "$out/hsr-$n-$r.json" >"$out/hsr-$n-$r.log" 2>&1 || { echo "hsr failed: $out/hsr-$n-$r.log"; tail -5 "$out/hsr-$n-$r.log"; }
    "$PY" "$SRC/bench/torch_peer.py" --model "$model" --ranks "$n" --steps "$steps" --port $((29500 + RANDOM % 400)) \
      "${extra[@]}" >"$out/torch-$n-$r.json" 2>"$out/torch-$n-$r.err" || { echo "torch failed: $out/torch-$n-$r.err"; tail -3 "$out/torch-$n-$r.err"; }
    h=$(field "$out/hsr-$n-$r.json" '["tokens_per_s"]'); t=$(field "$out/torch-$n-$r.json" '["tokens_per_s"]')
    hs+=("$h"); ts+=("$t")
    printf "%-6s %-6s %12.0f %12.0f %8s\n" "$n" "$r" "$h" "$t" "$("$PY" -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}x')" "$h" "$t" 2>/dev/null)"
  done
  mh=$(median "${hs[@]}"); mt=$(median "${ts[@]}")
  printf "%-6s %-6s %12s %12s %8s   (medians; hsr GFLOP/s %s per rank, GEMM probe %s per rank)\n" "$n" median "$mh" "$mt" \
    "$("$PY" -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}x')" "$mh" "$mt" 2>/dev/null)" \
    "$(field "$out/hsr-$n-$rounds.json" '["gflops_per_rank"]' | cut -c1-5)" \
    "$(field "$out/hsr-$n-$rounds.json" '["gemm_probe"]["gflops_per_rank"]' | cut -c1-5)"
done

if [ "$sweep" = 1 ]; then
  n=${ranks##* }
  echo
  echo "# hsr only, $n ranks: wrapping x prefetch, $rounds interleaved rounds, medians"
  for r in $(seq 1 "$rounds"); do
    for wrap in block linear; do
      for pf in 0 1; do
        "$B/hsr-run" -n "$n" --nodes "$nodes" -- "$B/hsr" train --model "$model" --steps "$steps" "${extra[@]}" \
          --wrap "$wrap" --prefetch "$pf" --no-progress --json "$out/sweep-$wrap-$pf-$r.json" >"$out/sweep-$wrap-$pf-$r.log" 2>&1
      done
    done
  done
  "$PY" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'wrap':<8} {'prefetch':<9} {'tok/s':>9} {'GF/rank':>8} {'probe':>7} {'gathers':>8} {'gemm_ms':>8} {'attn_ms':>8} "
      f"{'other_ms':>9} {'engine_ms':>10} {'wait_ms':>8}")
for wrap in ("block", "linear"):
    for pf in ("0", "1"):
        runs = []
        for r in range(1, rounds + 1):
            try:
                runs.append(json.load(open(f"{out}/sweep-{wrap}-{pf}-{r}.json")))
            except (OSError, ValueError):
                pass
        if not runs:
            print(f"{wrap:<8} {pf:<9} (no result)")
            continue
        m = lambda f: statistics.median(f(d) for d in runs)
        t = lambda k: m(lambda d: d.get("model_time_per_step_ms", {}).get(k, 0))
        print(f"{wrap:<8} {pf:<9} {m(lambda d: d['tokens_per_s']):9.0f} {m(lambda d: d['gflops_per_rank']):8.2f} "
              f"{m(lambda d: d['gemm_probe']['gflops_per_rank']):7.2f} {m(lambda d: d['wrap']['gathers_per_step']):8.1f} "
              f"{t('gemm'):8.2f} {t('attention'):8.2f} {t('other_kernels'):9.2f} "
              f"{m(lambda d: d['timing_per_step_ms']['engine']):10.2f} {m(lambda d: d['timing_per_step_ms']['wait']):8.2f}")
PY
  echo
  echo "# where the time goes: one traced run ($n ranks, block, prefetch 1)"
  "$B/hsr-run" -n "$n" --nodes "$nodes" -- "$B/hsr" train --model "$model" --steps "$steps" "${extra[@]}" \
    --trace "$out/trace.json" --no-progress >"$out/trace.log" 2>&1
  grep -E "^time per step|^engine time" "$out/trace.log"
  "$B/hsr" trace summarize "$out/trace.json" >"$out/trace.txt"
  head -n 1 "$out/trace.txt"
  grep -E '^ +[0-9]' "$out/trace.txt" | tail -n 3
fi
echo "# logs and JSON: $out"
