#!/usr/bin/env bash
# fuzz.sh [SECONDS] [TARGET...]: builds hsr's libFuzzer targets with clang
# (-DHSR_FUZZ=ON: coverage + ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 60), starting from its seeds (tests/fuzz/corpus/<target>,
# and tests/data for the topology readers). Targets: topo_xml topo_nccl trace
# ckpt_manifest ckpt_state safetensors st_index tune_bench (default: all). The corpus grows in
# build-fuzz/corpus/<target>; every crash, leak or hang (an input that runs
# over 10 s) is left in build-fuzz/artifacts/<target>/: copy it to
# tests/fuzz/regress/<target>/ and the gcc build's ctest runs it from then on
# (fuzz_regress_<target>). Environment: CC (default clang-14), HSR_JOBS.
# Exit status: 1 when a target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=60
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then secs=$1; shift; fi
case "${1:-}" in -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
all=(topo_xml topo_nccl trace ckpt_manifest ckpt_state safetensors st_index tune_bench)
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (valid: ${all[*]})" >&2; exit 2; }
done
cc=${CC:-clang-14}
command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
dir=build-fuzz
CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHSR_FUZZ=ON -DHSR_WITH_CUDA=OFF >/dev/null
cmake --build "$dir" -j "${HSR_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}" >/dev/null
# full stacks: the suppressions name frames inside hwloc, which has no frame pointers
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$(pwd)/tests/sanitize/lsan.supp HSR_LOG=error
found=0
for t in "${targets[@]}"; do
  seeds=()
  [ -d "tests/fuzz/corpus/$t" ] && seeds+=("tests/fuzz/corpus/$t") # libFuzzer stops at a missing folder
  case "$t" in topo_xml) seeds+=(tests/data) ;; topo_nccl) seeds+=(tests/data/nccl) ;; esac
  mkdir -p "$dir/corpus/$t" "$dir/artifacts/$t"
  log=$dir/fuzz-$t.log
  set +e
  "$dir/tests/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t/" "$dir/corpus/$t" "${seeds[@]}" > "$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  arts=$(find "$dir/artifacts/$t" -type f | wc -l)
  printf 'fuzz %-14s %6s s  %9s runs  coverage %5s edges  corpus %5d  findings %d%s\n' "$t" "$secs" "$runs" "$cov" \
    "$(find "$dir/corpus/$t" -type f | wc -l)" "$arts" "$([ $rc = 0 ] || echo "  (exit $rc, see $log)")"
  [ "$arts" = 0 ] && [ $rc = 0 ] || found=1
done
[ $found = 0 ] || echo "fuzz.sh: findings in $dir/artifacts/: make each a regression test (tests/fuzz/regress/<target>/)"
exit $found
