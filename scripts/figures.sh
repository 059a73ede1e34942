#!/usr/bin/env bash
# figures.sh [--list] [--build DIR] [NAME...]: the figures the docs state,
# each rerun by the command that produced it and printed beside the value
# the page states, so a stale figure shows.
#
# A page states a figure with a marker next to it:
#     <!-- figure NAME key=value key=value ... -->
# and this script knows, for each NAME, the command and how to read each key
# from its output. Keys that a run must reproduce exactly (losses of a
# deterministic run, byte counts, counts of tests) are compared exactly (to
# the digits the page gives); timings are shown as a ratio of now to the
# page, since they depend on the machine and its load.
#
#   --list        every figure: its name, the page that states it, its command
#   --build DIR   the build tree to run (default build)
#   NAME...       run these figures (default: the quick ones; --all: every one)
set -euo pipefail
cd "$(dirname "$0")/.."
prog=figures.sh
. scripts/argcheck.sh
build=build
list=0
all=0
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --list) list=1; shift ;;
    --all) all=1; shift ;;
    --build) ac_need --build $# "${2:-}"; ac_dir --build "$2"; build=$2; shift 2 ;;
    -*) ac_die "unknown option '$1'" ;;
    *) names+=("$1"); shift ;;
  esac
done

# ---- the figures: name | quick (1) or long (0) | command ----------------
# Each figure's reader, fig_NAME OUT, prints "key value" lines from the
# command's output directory OUT.
declare -A cmd quick
cmd[main_job]="$build/hsr-run -n 4 --nodes 2 -- $build/hsr train --model gpt --no-progress --json \$OUT/train.json --log \$OUT/log.jsonl"
quick[main_job]=1
fig_main_job() {
  jq -r '"loss_first \(.loss_first)", "loss_last \(.loss_last)", "ms_per_step \(.timing_per_step_ms.step)"' "$1/train.json"
  # the held-out loss: first and last measured
  jq -r 'select(.val_loss != null) | .val_loss' "$1/log.jsonl" | sed -n '1s/^/val_first /p;$s/^/val_last /p'
}
# the Llama-style model's default job (docs/llama.md)
cmd[llama_job]="$build/hsr-run -n 4 --nodes 2 -- $build/hsr train --model llama --no-progress --json \$OUT/train.json --log \$OUT/log.jsonl"
quick[llama_job]=1
fig_llama_job() { fig_main_job "$1"; }
cmd[tune_calc]="$build/hsr tune --params 7e9 --world 64 --gpus-per-node 8 --hw h100 --json >\$OUT/tune.json"
quick[tune_calc]=1
fig_tune_calc() {
  jq -r '.candidates[0] | "recommended \(.label | gsub(" "; "_"))", "predicted_step \(.step_ms)", "peak_gib \(.peak_bytes / 1073741824)"' "$1/tune.json"
}
# hybrid 2 x 4 on the emulated two tiers, with and without the outer shard (docs/training.md)
cmd[outer_shard]="$build/hsr-run -n 8 --nodes 2 --emulate-net 1gbit -- $build/hsr bench step --shard 4 --units 8 --unit-size 4M --compute-ms 10 --compute wait --reshard full --prefetch 1 --outer-shard none,optim --steps 5 --json \$OUT/o.json"
quick[outer_shard]=0
fig_outer_shard() {
  jq -r '.results[] | .outer_shard as $o | "\($o)_step_ms \(.step_ms)", "\($o)_exposed_ms \(.exposed_comm_ms)",
    "\($o)_fabric_bytes \(.fabric_bytes_per_step_all_ranks)", "\($o)_persistent_mib \(.persistent_bytes_max_rank / 1048576)",
    "\($o)_peak_mib \(.runtime_peak_bytes_max_rank / 1048576)"' "$1/o.json"
}
cmd[tier_compare]="bench/tier_compare.sh --build $build"
quick[tier_compare]=0
fig_tier_compare() { # the markdown table's rows: | name | S | median | vs best | ... | fabric | peak | calls | loss |
  awk -F'|' '/^\| [a-z]/ && $2 !~ /layout/ {
      n = $2; gsub(/[ +:-]/, "", n); gsub(/x/, "", $5);
      printf "%s_vs_best_x %s\n%s_fabric_mib %s\n%s_peak_mib %s\n", n, $5 + 0, n, $8 + 0, n, $9 + 0; loss = $11 + 0 }
    /^# link/ { for (i = 1; i <= NF; i++) ; match($0, /cross-node [0-9.]+x/); l = substr($0, RSTART + 11, RLENGTH - 12); print "link_x " l }
    END { printf "final_loss %.4f\n", loss }' "$1/stdout"
}
cmd[coll_vs_mpi]="bench/coll_vs_mpi.sh -n 4 --launches 3 --build $build"
quick[coll_vs_mpi]=0
fig_coll_vs_mpi() { # per op: the in-place row's hsr/mpi ratio at the largest size
  awk '/^# all_gather:/ { op = "all_gather" } /^# reduce_scatter:/ { op = "reduce_scatter" }
    op && $2 == "in_place" { r[op] = $(NF - (op == "all_gather")) }
    END { for (o in r) printf "%s_over_mpi_x %s\n", o, r[o] }' "$1/stdout"
}
cmd[ckpt_bench]="$build/hsr-run -n 4 --nodes 2 -- $build/hsr ckpt bench --size 256M --shard 2 --json \$OUT/b.json"
quick[ckpt_bench]=0
fig_ckpt_bench() {
  jq -r 'to_entries[] | select(.key | test("^(async_blocked_s|staging_copy_s|async_write_s|disk_parallel_write_s|step_s|step_during_write_s|load_s|load_held_s|disk_parallel_read_s|load_reads|load_readers)$")) | "\(.key) \(.value)"' "$1/b.json"
}
# hsr beside its PyTorch peers, the quick rows (docs/peers.md; needs bench/peers/setup.sh)
cmd[peers_quick]="bench/peers/run.sh --quick --out \$OUT/p" # peers: on demand, never in CI
quick[peers_quick]=0
fig_peers_quick() { # per row: hsr/peer tokens/s; and how many rows ran the same job (first losses within 1e-4)
  jq -r '.rows[] | "r\(.ranks)_\(.peer)_\(.config | gsub("[:]"; "_"))_x \(.ratio)"' "$1/p/peers.json"
  jq -r '"same_job_rows \([.rows[] | select(.same_job)] | length)"' "$1/p/peers.json"
}
# hsr's replica groups beside torchft's, the same job and fault (docs/peers.md; needs setup.sh --with torchft)
cmd[peers_ft_side]="bench/peers/ft_side.sh --rounds 3 --out \$OUT/f" # peers: on demand, never in CI
quick[peers_ft_side]=0
fig_peers_ft_side() { # the medians of each side: kill to next commit, restart to first commit, machinery up to it
  jq -r '.table[] | "hsr_\(.measure) \(.hsr_s)", "torchft_\(.measure) \(.torchft_s)"' "$1/f/ft_side.json"
}
# the asynchronous checkpoint inside a training run: the time a save blocks hsr train and DCP's async_save (docs/peers.md)
cmd[peers_ckpt_train]="bench/peers/ckpt_train.sh --ranks 4 --steps 20 --save-every 5 --rounds 3 --out \$OUT/c" # peers: on demand, never in CI
quick[peers_ckpt_train]=0
fig_peers_ckpt_train() { # the medians per save (rank 0), and whether the two ran the same job
  jq -r '"hsr_blocked_s \(.hsr.blocked_s_median)", "dcp_blocked_s \(.dcp.blocked_s_median)", "blocked_dcp_over_hsr_x \(.ratio_blocked_dcp_over_hsr)",
    "hsr_commit_s \(.hsr.commit_s_median)", "dcp_commit_s \(.dcp.commit_s_median)", "same_job \(.same_job)"' "$1/c/ckpt_train.json"
}
cmd[suite]="ctest --test-dir $build -j2 --output-junit \$OUT/junit.xml"
quick[suite]=0
fig_suite() {
  local tests skipped failures
  tests=$(grep -o 'tests="[0-9]*"' "$1/junit.xml" | head -1 | grep -o '[0-9]*')
  failures=$(grep -o 'failures="[0-9]*"' "$1/junit.xml" | head -1 | grep -o '[0-9]*')
  skipped=$(grep -o 'skipped="[0-9]*"' "$1/junit.xml" | head -1 | grep -o '[0-9]*')
  echo "tests $tests"
  echo "failures $failures"
  echo "skipped $skipped"
}

# ---- where each figure is stated ---------------------------------------
pages() { grep -l -- "<!-- figure $1 " README.md docs/*.md 2>/dev/null | tr '\n' ' '; }
stated() { grep -ho -- "<!-- figure $1 [^>]*-->" README.md docs/*.md 2>/dev/null | head -1 |
  sed -E "s/<!-- figure $1 //; s/ *-->//" | tr ' ' '\n' | grep '='; }

if [ $list = 1 ]; then
  for n in $(printf '%s\n' "${!cmd[@]}" | sort); do
    printf '%-12s %-6s %-40s %s\n' "$n" "$([ "${quick[$n]}" = 1 ] && echo quick || echo long)" \
      "$(pages "$n")" "${cmd[$n]//\\\$OUT/OUT}"
  done
  exit 0
fi
if [ ${#names[@]} -eq 0 ]; then
  for n in $(printf '%s\n' "${!cmd[@]}" | sort); do
    { [ $all = 1 ] || [ "${quick[$n]}" = 1 ]; } && names+=("$n")
  done
fi
for n in "${names[@]}"; do
  [ -n "${cmd[$n]+x}" ] || ac_die "no figure '$n' (valid: $(printf '%s\n' "${!cmd[@]}" | sort | tr '\n' ' '))"
done
[ -x "$build/hsr" ] || ac_die "--build '$build' holds no hsr binary (run scripts/setup.sh)"

stale=0
for n in "${names[@]}"; do
  OUT=$(mktemp -d /tmp/hsr-figures.XXXXXX)
  c=${cmd[$n]//\$OUT/$OUT}
  echo "== $n ($(pages "$n" || true)): $c"
  t0=$(date +%s.%N)
  if ! eval "$c" >"$OUT/stdout" 2>"$OUT/stderr"; then
    echo "   the command failed; its output is in $OUT"
    stale=1
    continue
  fi
  t1=$(date +%s.%N)
  declare -A now=()
  while read -r k v; do [ -n "$k" ] && now[$k]=$v; done < <("fig_$n" "$OUT")
  now[wall_s]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  printf '   %-16s %-14s %-14s %s\n' key page now verdict
  seen=()
  while IFS='=' read -r k v; do
    [ -n "$k" ] || continue
    seen+=("$k")
    m=${now[$k]-}
    if [ -z "$m" ]; then
      verdict="not measured by this command"
      stale=1
    elif [[ "$k" =~ (_ms|_s|per_s|_gbs|_x|ms_per_step|wall)$ ]] || [[ "$k" =~ ^(ms_|wall) ]]; then
      verdict=$(awk -v p="$v" -v q="$m" 'BEGIN { printf "timing: now %.2fx the page", q / p }')
    else
      # exact to the digits the page gives
      d=$(echo "$v" | awk -F. '{ print (NF > 1) ? length($2) : 0 }')
      r=$(awk -v q="$m" -v d="$d" 'BEGIN { if (q ~ /^-?[0-9.eE+-]+$/) printf "%.*f", d, q; else print q }')
      if [ "$r" = "$v" ]; then verdict=same; else verdict="STALE (the page says $v)"; stale=1; fi
    fi
    printf '   %-16s %-14s %-14s %s\n' "$k" "$v" "$m" "$verdict"
  done < <(stated "$n")
  for k in "${!now[@]}"; do
    [[ " ${seen[*]-} " == *" $k "* ]] || printf '   %-16s %-14s %-14s %s\n' "$k" - "${now[$k]}" "(not stated)"
  done
  unset now
  rm -rf "$OUT"
done
exit $stale
