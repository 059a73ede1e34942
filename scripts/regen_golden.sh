#!/usr/bin/env bash
# Rewrites tests/golden/ (the expected hsr topo / hsr mesh outputs of every
# topology in tests/data/) from the current build, for review: check
# `git diff tests/golden` before committing. Adding a machine: put its XML in
# tests/data/ (NCCL files in tests/data/nccl/), add a line to
# tests/golden/cases.txt, run this. Environment: HSR_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HSR_BUILD_DIR:-build}
[ -x "$build/hsr" ] || { echo "regen_golden: no $build/hsr (run scripts/setup.sh first)" >&2; exit 1; }
tests/topo_golden.sh "$build/hsr" "$PWD" --update
git status --short tests/golden
