#!/usr/bin/env bash
# Rewrites tests/golden/ (the expected hsr topo / hsr mesh outputs of every
# topology in tests/data/) from the current build, for review: check
# `git diff tests/golden` before committing. Adding a machine: put its XML in
# tests/data/ (NCCL files in tests/data/nccl/), add a line to
# tests/golden/cases.txt, run this. Environment: HSR_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
prog=regen_golden.sh
. scripts/argcheck.sh
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) ac_die "takes no arguments (got '$1')" ;;
esac
ac_env newdir HSR_BUILD_DIR
build=${HSR_BUILD_DIR:-build}
[ -x "$build/hsr" ] || { echo "regen_golden: no $build/hsr (run scripts/setup.sh first)" >&2; exit 1; }
tests/topo_golden.sh "$build/hsr" "$PWD" --update
git status --short tests/golden
