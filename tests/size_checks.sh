#!/usr/bin/env bash
# size_checks.sh BUILD: the memory checks of hsr train and hsr bench step
# budget by the peak, not by the persistent bytes. For each configuration a
# run measures the engine's peak per rank (its ledger: shards, master and
# moments, gathered units, gradient and reduce buffers, activations); then
# with HSR_MEM_AVAILABLE (a test hook: the memory the checks take as
# available) just below what the ranks of this host need at that peak, the
# same command must be refused before any work (exit 2, "does not fit"),
# and a budget that holds the persistent bytes several times over but not
# the peak is refused too.
set -u
build=$(cd "$1" && pwd)
hsr=$build/hsr run=$build/hsr-run
t=$(mktemp -d "${TMPDIR:-/tmp}/hsr-size-checks-XXXXXX")
trap 'rm -rf "$t"' EXIT
rc=0 n=0
fail() { echo "size_checks: $*"; rc=1; }
# refused NAME BUDGET CMD...: exit 2 with "does not fit", before any work
refused() {
  local name=$1 b=$2
  shift 2
  out=$(HSR_MEM_AVAILABLE=$b "$@" 2>&1 </dev/null)
  local code=$?
  n=$((n + 1))
  [ "$code" = 2 ] && grep -q "does not fit" <<<"$out" && return 0
  fail "$name: HSR_MEM_AVAILABLE=$b (below the measured peak) was not refused (exit $code): $(tail -2 <<<"$out")"
  return 1
}
below() { # peak_bytes ranks -> a budget a little below what they need (the checks keep 10% aside)
  python3 -c "import sys; p, r = float(sys.argv[1]), int(sys.argv[2]); print(int(p * r / 0.9 * 0.995))" "$1" "$2"
}

# ---- hsr train: the measured ledger's total peak (activations included) ----
mlp=(train --layers 3 --dim 96 --batch 64 --steps 2 --no-progress)
while IFS='|' read -r name np flags; do
  # shellcheck disable=SC2086
  "$run" -n "$np" --launcher mpirun -- "$hsr" "${mlp[@]}" $flags --json "$t/j.json" >"$t/out" 2>&1 </dev/null ||
    { fail "train $name: the run failed: $(tail -3 "$t/out")"; continue; }
  read -r peak persist < <(python3 -c "
import json, sys; l = json.load(open(sys.argv[1]))['ledger']; print(l['total_peak'], l['persistent'])" "$t/j.json")
  # shellcheck disable=SC2086
  refused "train $name" "$(below "$peak" "$np")" "$run" -n "$np" --launcher mpirun -- "$hsr" "${mlp[@]}" $flags ||
    continue
  # the persistent bytes fit twice over, the peak does not
  if python3 -c "import sys; sys.exit(not (2 * float(sys.argv[2]) < float(sys.argv[1])))" "$peak" "$persist"; then
    # shellcheck disable=SC2086
    refused "train $name (persistent x2)" "$(below $((2 * persist)) "$np")" "$run" -n "$np" --launcher mpirun -- \
      "$hsr" "${mlp[@]}" $flags || continue
  fi
  echo "size_checks: train $name: peak $peak bytes per rank (persistent $persist): a budget below it is refused"
done <<'EOF'
fsdp 1x2, reshard full, prefetch 1|2|
fsdp 1x2, reshard none, prefetch 2|2|--reshard none --prefetch 2
zero2 1x2|2|--strategy zero2
ddp 2x1|2|--strategy ddp --shard 1
bf16 compute and reduction|2|--param-dtype bf16 --reduce-dtype bf16
1 rank, 2 micro-batches|1|--micro-batches 2
EOF

# ---- hsr bench step: the engine's measured peak of every configuration ----
step=(bench step --units 4 --unit-size 4M --compute-ms 0.2 --steps 1 --warmup 1)
while IFS='|' read -r name flags; do
  # shellcheck disable=SC2086
  "$run" -n 2 --launcher mpirun -- "$hsr" "${step[@]}" $flags --json "$t/s.json" >"$t/out" 2>&1 </dev/null ||
    { fail "bench step $name: the run failed: $(tail -3 "$t/out")"; continue; }
  peak=$(python3 -c "
import json, sys; print(max(r['runtime_peak_bytes_max_rank'] for r in json.load(open(sys.argv[1]))['results']))" "$t/s.json")
  # shellcheck disable=SC2086
  refused "bench step $name" "$(below "$peak" 2)" "$run" -n 2 --launcher mpirun -- "$hsr" "${step[@]}" $flags || continue
  echo "size_checks: bench step $name: peak $peak bytes per rank: a budget below it is refused"
done <<'EOF'
reshard full, prefetch 0,2|--reshard full --prefetch 0,2
reshard none|--reshard none --prefetch 1
hybrid 1x2, outer shard optim|--shard 1 --outer-shard optim
EOF
[ $rc = 0 ] && echo "size_checks: ok ($n budgets below the peak refused)"
exit $rc
