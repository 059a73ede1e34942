#!/usr/bin/env bash
# train_fingerprint.sh BUILD OUT: a set of `hsr train` runs (strategies, meshes,
# reshard and prefetch policies, dtypes, the MLP, the GPT and the Llama, the sim
# device, a checkpoint resumed on another mesh, two replica groups), each one's
# output with what depends on time removed: the log lines, the --log rows, the
# --json summary (ledger, counters, losses, the wrap diagnostic). Two builds
# behave the same when `diff -r OUT1 OUT2` is empty: what a refactoring must
# leave unchanged, byte for byte.
#
#   scripts/train_fingerprint.sh build /tmp/fp-after
#   diff -r /tmp/fp-before /tmp/fp-after && echo same
#
# Removed: step_ms, tokens_per_s, gflops, the GEMM probe, engine timing, wall
# clock times, and the text lines that print them; paths under OUT become OUT.
set -u
case "${1:-}" in -h|--help|"") sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ]; exit $? ;; esac
B=$(cd "$1" && pwd) || exit 2
OUT=${2:?usage: train_fingerprint.sh BUILD OUT}
[ -x "$B/hsr" ] && [ -x "$B/hsr-run" ] || { echo "train_fingerprint.sh: $B has no hsr and hsr-run" >&2; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/hsr-fp.XXXXXX")
trap 'rm -rf "$W"' EXIT
export OPENBLAS_NUM_THREADS=1 HSR_COMM_TIMEOUT=${HSR_COMM_TIMEOUT:-20}
unset HSR_FAULT
# the GPT's and the Llama's text: fixed here (their default, the repository's
# own text, changes with every commit)
seq 1 40000 | awk '{printf "%s %s, ", $1, ($1 * 7919) % 10007} NR % 12 == 0 {print ""}' >"$W/text.txt"

norm() { # NAME: the run's files in $W/NAME.* -> $OUT/NAME.*, times removed
  python3 - "$W" "$OUT" "$1" <<'EOF'
import json, re, sys, os
w, out, name = sys.argv[1:]
TIMEY = re.compile(r'(_ms|_us|_s|ms|tokens_per_s|gemm_probe|timing|time|wall|seconds)$|gflops|_ms_')
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not TIMEY.search(k)}
    if isinstance(x, list):
        return [strip(v) for v in x]
    if isinstance(x, str):
        return x.replace(w, 'OUT')
    return x
for ext in ('log', 'json'):
    p = f'{w}/{name}.{ext}'
    if not os.path.exists(p):
        continue
    rows = []
    with open(p) as f:
        text = f.read()
    docs = [json.loads(l) for l in text.splitlines() if l.strip()] if ext == 'log' else [json.loads(text)]
    with open(f'{out}/{name}.{ext}', 'w') as f:
        for d in docs:
            f.write(json.dumps(strip(d), sort_keys=True) + '\n')
p = f'{w}/{name}.out'
if os.path.exists(p):
    drop = re.compile(r'ms/step|throughput|engine time|GFLOP|tokens/s|elapsed|took|in [0-9.]+ s\b')
    with open(p) as f, open(f'{out}/{name}.out', 'w') as o:
        for l in f:
            if drop.search(l):
                continue
            l = l.replace(w, 'OUT')
            l = re.sub(r'[0-9.]+ us each on average', 'T us each on average', l)
            l = re.sub(r'[0-9.]+ ?(ms|us|GB/s|%)', r'T \1', l)
            l = re.sub(r'\(rank 0, T ms\): .*', '(rank 0, T ms): T', l)
            l = re.sub(r'http://127\.0\.0\.1:[0-9]+', 'http://127.0.0.1:PORT', l)
            l = re.sub(r'pid [0-9]+', 'pid N', l)
            l = re.sub(r'\[\[[0-9]+,', '[[JOB,', l)
            o.write(l)
EOF
}

run() { # NAME RANKS NODES -- train flags
  local name=$1 n=$2 nodes=$3; shift 4
  echo "train_fingerprint: $name" >&2
  "$B/hsr-run" -n "$n" --nodes "$nodes" -- "$B/hsr" train --no-progress --log "$W/$name.log" --json "$W/$name.json" "$@" \
    >"$W/$name.out" 2>&1
  echo "exit $?" >>"$W/$name.out"
  norm "$name"
}

run mlp_hybrid_2x2      4 2 -- --model mlp --steps 6
run mlp_fsdp_partial    4 1 -- --model mlp --steps 6 --reshard partial:2 --prefetch 2 --micro-batches 2
run mlp_zero2           2 1 -- --model mlp --steps 6 --strategy zero2
run mlp_ddp             2 1 -- --model mlp --steps 6 --strategy ddp
run mlp_zero1           2 1 -- --model mlp --steps 6 --strategy zero1
run mlp_refused         2 1 -- --model mlp --steps 6 --strategy zero1 --reshard none
run mlp_outer_bf16      4 2 -- --model mlp --steps 6 --outer-shard optim --param-dtype bf16 --reduce-dtype bf16
run mlp_linear_wrap     4 2 -- --model mlp --steps 4 --wrap linear --sync rs_only --micro-batches 2
run mlp_sim             2 1 -- --model mlp --steps 4 --device sim
run gpt_fsdp            2 1 -- --model gpt --data "$W/text.txt" --steps 4 --layers 2 --dim 64 --seq 32 --batch 4 --val-every 2 --val-windows 4
run gpt_hybrid_sel      4 2 -- --model gpt --data "$W/text.txt" --steps 3 --layers 2 --dim 64 --seq 32 --batch 4 --recompute selective
run llama_fsdp          2 1 -- --model llama --data "$W/text.txt" --steps 3 --layers 2 --dim 64 --seq 32 --batch 4 --val-every 3 --val-windows 4

# a checkpoint saved on 2 x 2 and resumed on 1 x 4
run ckpt_save           4 2 -- --model mlp --steps 4 --ckpt "$W/ck"
run ckpt_resume         4 1 -- --model mlp --steps 8 --ckpt "$W/ck" --resume latest --shard 4

# two replica groups: hsr-run starts a coordinator on loopback for both
if command -v etcd >/dev/null; then
  for i in 0 1; do
    ( env -u HSR_FT_TOKEN TMPDIR="$W" "$B/hsr-run" -n 2 -- "$B/hsr" train --steps 8 --batch 32 --replica-id $i \
        --replicas 2 --hash-every 4 --no-progress --log "$W/ft$i.log" >"$W/ft$i.out" 2>&1; echo "exit $?" >>"$W/ft$i.out" ) &
  done
  wait
  [ -s "$W/hsr-ft.$(id -u)/pid" ] && kill -TERM "$(cat "$W/hsr-ft.$(id -u)/pid")" 2>/dev/null
  # which group starts the coordinator is a race: its line goes
  sed -i '/started a coordinator on/d' "$W"/ft?.out
  norm ft0; norm ft1
  sleep 1
fi
echo "train_fingerprint: $(ls "$OUT" | wc -l) files in $OUT" >&2
