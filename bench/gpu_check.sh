#!/usr/bin/env bash
# gpu_check.sh OUTDIR: the one-script GPU check, sized for a 10-minute lease.
#   1. configures hsr with CUDA (HSR_WITH_CUDA=ON, Release) and builds only
#      what the GPU tests, hsr and hsr-kbench need
#   2. runs every CTest test labelled `gpu` (the GPU counterparts of the sim
#      matrix: kernels and the models vs CPU on the same inputs, the engine on
#      one GPU vs the CPU reference for every strategy one GPU runs, the GPT)
#   3. runs the example training for a few steps on the GPU
#   4. checkpoints on the GPU: a run with --async-save (staging on the
#      device's streams), resumed from its middle: the last checkpoint bitwise
#   5. runs the kernel benchmark (hsr-kbench: AdamW and casts as a fraction of
#      a device-to-device copy timed in the same run)
# and writes logs, JSON and summary.txt (each phase's seconds) into OUTDIR.
# Exit: 0 all passed, 1 something failed, 2 usage, 77 no GPU (built, nothing run).
# Env: HSR_GPU_BUILD_DIR (default <src>/build-gpu), HSR_GPU_CHECK_JOBS (make -j),
#      HSR_GPU_CHECK_TRAIN_ARGS (default "--device cuda --steps 5"),
#      HSR_KBENCH_ARGS (extra hsr-kbench flags).
set -u
if [ $# -ne 1 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -eq 1 ] && [ "$1" = "--help" -o "$1" = "-h" ] && exit 0
  exit 2
fi
OUT=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
prog=gpu_check.sh
. "$SRC/scripts/argcheck.sh"
case "$OUT" in -*) ac_die "unknown option '$OUT' (usage: gpu_check.sh OUTDIR)" ;; esac
ac_newdir OUTDIR "$OUT"
ac_env newdir HSR_GPU_BUILD_DIR
ac_env int HSR_GPU_CHECK_JOBS 1 4096
ac_env args HSR_GPU_CHECK_TRAIN_ARGS
ac_env args HSR_KBENCH_ARGS
BUILD=${HSR_GPU_BUILD_DIR:-$SRC/build-gpu}
JOBS=${HSR_GPU_CHECK_JOBS:-$(nproc)}
TRAIN_ARGS=${HSR_GPU_CHECK_TRAIN_ARGS:---device cuda --steps 5}
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
TP=$T0
declare -a SUMMARY
note() { SUMMARY+=("$1"); echo "== $1"; }
phase() { # the seconds since the last phase ended, into the summary
  local now; now=$(date +%s)
  SUMMARY+=("  ($1: $((now - TP)) s)")
  TP=$now
}
failed=0     # a build, test or run failure
perf_missed=0 # kernels below their bandwidth target

finish() {
  local rc=$1
  {
    echo "hsr GPU check ($(date -u +%FT%TZ), $(($(date +%s) - T0)) s, source $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null))"
    for l in "${SUMMARY[@]}"; do echo "  $l"; done
    case $rc in
      0) echo "RESULT: PASS";;
      77) echo "RESULT: SKIPPED (no GPU)";;
      *) [ $failed -eq 0 ] && [ $perf_missed -ne 0 ] &&
           echo "RESULT: FAIL (correct, but $perf_missed kernel(s) below the bandwidth target)" ||
           echo "RESULT: FAIL";;
    esac
  } | tee "$OUT/summary.txt"
  exit "$rc"
}

# ---- 1. build -----------------------------------------------------------------
(nvidia-smi 2>&1 || echo "nvidia-smi not available") >"$OUT/nvidia-smi.txt"
# the targets the gpu-labelled tests run (their commands' programs under the
# build tree), hsr and hsr-kbench: not the whole suite
targets() {
  ctest --test-dir "$BUILD" -L gpu --show-only=json-v1 2>/dev/null |
    python3 -c '
import json, os, sys
b = os.path.realpath(sys.argv[1]); out = {"hsr_cli", "hsr_kbench"}
for t in json.load(sys.stdin).get("tests", []):
    for a in t.get("command", []):
        a = os.path.realpath(a)
        if a.startswith(b + os.sep):
            n = os.path.basename(a)
            out.add({"hsr": "hsr_cli", "hsr-kbench": "hsr_kbench", "hsr-run": "hsr_cli"}.get(n, n))
print(" ".join(sorted(out)))' "$BUILD"
}
if ! timeout 120 cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHSR_WITH_CUDA=ON >"$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  note "configure: FAILED (see build.log)"
  finish 1
fi
read -r -a tgts <<<"$(targets)"
if ! timeout 360 cmake --build "$BUILD" -j"$JOBS" --target "${tgts[@]}" >>"$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  note "build: FAILED (see build.log)"
  finish 1
fi
note "build: ok (CUDA, Release, $BUILD; targets ${tgts[*]})"
phase build

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -eq 0 ]; then
  note "no GPU visible (nvidia-smi lists none): GPU tests, training and benchmarks not run"
  finish 77
fi
note "GPUs: $ngpu ($(nvidia-smi -L | head -1 | sed 's/ (UUID.*//'))"

# ---- 2. GPU tests --------------------------------------------------------------
ctest --test-dir "$BUILD" -N -L gpu 2>/dev/null | grep -E '^ +Test +#' | sed 's/.*: //' >"$OUT/gpu_tests.txt"
if [ ! -s "$OUT/gpu_tests.txt" ]; then
  note "gpu tests: none registered (FAIL: test_kernels_gpu should be)"
  failed=1
else
  timeout 200 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 150 \
    --output-junit "$OUT/ctest_gpu.xml" >"$OUT/ctest_gpu.log" 2>&1
  rc=$?
  line=$(grep -E 'tests passed' "$OUT/ctest_gpu.log" | tail -1)
  skipped=$(grep -c '\*\*\*Skipped\|Not Run' "$OUT/ctest_gpu.log" || true)
  verdict=ok
  [ $rc -ne 0 ] && verdict="FAILED, see ctest_gpu.log"
  # a GPU is visible here: a skipped GPU test did not find it
  [ "$skipped" -ne 0 ] && verdict="FAILED: $skipped skipped although a GPU is visible, see ctest_gpu.log"
  [ "$verdict" = ok ] || failed=1
  note "gpu tests ($(tr '\n' ' ' <"$OUT/gpu_tests.txt" | sed 's/ $//')): ${line:-ctest exit $rc} -> $verdict"
  grep -q -i 'equiv' "$OUT/gpu_tests.txt" ||
    note "runtime equivalence test on one GPU: not in this tree (no gpu-labelled equivalence test)"
fi
phase "gpu tests"

# ---- 3. example training -----------------------------------------------------------
if "$BUILD/hsr" --help 2>/dev/null | grep -qE '^ +train '; then
  read -r -a targs <<<"$TRAIN_ARGS" # split at whitespace, never glob-expanded
  timeout 120 "$BUILD/hsr" train "${targs[@]}" >"$OUT/train.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    note "hsr train $TRAIN_ARGS: ok ($(grep -iE 'loss' "$OUT/train.log" | tail -1 | cut -c1-100))"
  else
    failed=1
    note "hsr train $TRAIN_ARGS: FAILED (exit $rc, see train.log; HSR_GPU_CHECK_TRAIN_ARGS sets the flags)"
  fi
else
  note "example training: 'hsr train' is not in this tree yet (skipped)"
fi
phase train

# ---- 4. checkpoints on the GPU -------------------------------------------------------
ck="$OUT/ckpt"
ctrain=(train --device cuda --layers 2 --dim 64 --steps 8 --batch 32 --clip 0.5 --no-progress)
if timeout 120 "$BUILD/hsr" "${ctrain[@]}" --ckpt "$ck/A" --save-every 4 --async-save >"$OUT/ckpt.log" 2>&1 &&
   timeout 120 "$BUILD/hsr" "${ctrain[@]}" --ckpt "$ck/B" --resume "$ck/A/step-00000004" >>"$OUT/ckpt.log" 2>&1 &&
   python3 "$SRC/tests/ckpt_read.py" compare "$ck/A" "$ck/B" >>"$OUT/ckpt.log" 2>&1; then
  note "checkpoints: --async-save on the GPU, resumed from step 4: step 8 bitwise equal"
else
  failed=1
  note "checkpoints: FAILED (see ckpt.log)"
fi
rm -rf "$ck"
phase checkpoints

# ---- 5. kernel benchmark -----------------------------------------------------------
read -r -a kargs <<<"${HSR_KBENCH_ARGS:-}" # split at whitespace, never glob-expanded
timeout 150 "$BUILD/hsr-kbench" --device cuda --json "$OUT/kbench.json" "${kargs[@]}" >"$OUT/kbench.txt" 2>&1
rc=$?
cat "$OUT/kbench.txt"
if [ $rc -ne 0 ]; then
  failed=1
  note "kernel benchmark: FAILED (exit $rc, see kbench.txt)"
else
  note "kernel benchmark: $(tail -1 "$OUT/kbench.txt")"
  while read -r name gbs frac tgt verdict; do
    note "  $name: $gbs GB/s = $frac of the copy (target $tgt: $verdict)"
    [ "$verdict" = ok ] || perf_missed=$((perf_missed + 1))
  done < <(awk '$NF=="ok" || $NF=="MISS" {print $1, $4, $5, $(NF-1), $NF}' "$OUT/kbench.txt")
fi

phase "kernel benchmark"
[ $failed -eq 0 ] && [ $perf_missed -eq 0 ] && finish 0
finish 1
