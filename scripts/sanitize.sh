#!/usr/bin/env bash
# sanitize.sh [address|thread] [ctest args...]: builds hsr with sanitizers into
# build-asan/ or build-tsan/ (host-only, Debug) and runs the test suite under
# them. address = AddressSanitizer + UndefinedBehaviorSanitizer (the whole
# suite, leaks included); thread = ThreadSanitizer (default: the collectives,
# runtime and training tests, `-L mpi`). Extra arguments go to ctest, e.g.
#   scripts/sanitize.sh thread -R coll_
# Exit status: ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
prog=sanitize.sh
. scripts/argcheck.sh
ac_env int HSR_JOBS 1 4096
kind=${1:-address}; [ $# -gt 0 ] && shift
case "$kind" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "sanitize.sh: '$kind' is not a sanitizer (valid: address, thread)" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DHSR_SANITIZE="$kind" -DHSR_WITH_CUDA=OFF >/dev/null
cmake --build "$dir" -j "${HSR_JOBS:-$(nproc)}" >/dev/null
supp="$(pwd)/tests/sanitize"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ "$kind" = address ]; then
  # fast_unwind_on_malloc=0: full stacks, so suppressions can see through dlopen'd plugins
  export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=0
  export LSAN_OPTIONS=suppressions=$supp/lsan.supp
  args=("$@")
else
  export TSAN_OPTIONS="suppressions=$supp/tsan.supp halt_on_error=1 second_deadlock_stack=1"
  export UCX_MEM_EVENTS=no # UCX's malloc hooks crash under TSan
  [ $# -gt 0 ] && args=("$@") || args=(-L mpi)
fi
ctest --test-dir "$dir" -j "${HSR_JOBS:-$(nproc)}" --output-on-failure "${args[@]}"
