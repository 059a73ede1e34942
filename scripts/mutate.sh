#!/usr/bin/env bash
# scripts/mutate.sh: the mutation check. Applies each deliberate bug of
# scripts/mutations.txt, one at a time, to a scratch copy of this checkout,
# rebuilds, runs the tests of the bug's module (or the whole suite) and
# prints which bugs the suite caught.
#
# usage: scripts/mutate.sh [--only ID[,ID...]] [--full] [--list] [--keep]
#                          [--head] [--no-baseline] [--jobs N] [--json FILE]
#   --only IDS      run these mutations only
#   --full          run the whole suite for every mutation (default: the
#                   module's tests, or the mutation's own '=' regex)
#   --list          print the mutations and exit
#   --check         only check that every mutation still applies (seconds)
#   --keep          keep the scratch copy (printed at the end)
#   --head          copy HEAD (git archive) instead of the working tree
#                   (tracked and untracked, not ignored, files as they are now)
#   --rev REV       copy commit REV (git archive), e.g. main: what its tests catch
#   --lenient       a mutation that does not apply is reported (n/a), not fatal
#   --no-baseline   skip the run of every selected test on the unmutated copy
#   --jobs N        build and ctest parallelism (default: nproc)
#   --json FILE     write the results as JSON
# Env: HSR_MUTATE_DIR (scratch directory; default a new one under $TMPDIR or
# /tmp), HSR_MUTATE_TIMEOUT (seconds per test, default 120).
# Exit: 0 every mutation caught, 1 some survived, 2 usage, 3 a mutation no
# longer applies, the build fails or the baseline does not pass.
# Not part of CTest: a whole run takes about 15-25 minutes on 2 cores.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
prog=mutate.sh
. "$src/scripts/argcheck.sh"
list=$src/scripts/mutations.txt
only="" full=0 do_list=0 do_check=0 keep=0 rev="" lenient=0 baseline=1 jobs=$(nproc) json=""
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --only|--rev|--jobs|--json) ac_need "$1" $# "${2:-}" ;;&
    --only) only=$2; shift ;;
    --full) full=1 ;;
    --list) do_list=1 ;;
    --check) do_check=1 ;;
    --keep) keep=1 ;;
    --head) rev=HEAD ;;
    --rev) rev=$2; shift ;;
    --lenient) lenient=1 ;;
    --no-baseline) baseline=0 ;;
    --jobs) jobs=$2; shift ;;
    --json) json=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) ac_die "unknown argument '$1'" ;;
  esac
  shift
done
ac_int --jobs "$jobs" 1 4096
ac_env int HSR_MUTATE_TIMEOUT 1 86400
ac_env newdir HSR_MUTATE_DIR
tmo=${HSR_MUTATE_TIMEOUT:-120}

# The tests each module's mutations run by default (ctest -R).
declare -A module_tests=(
  [runtime]='^(rt_equiv|rt_bad_use|sched_|test_sched|test_rt_layout|train_run_4)'
  [tune]='^(sched_ledger|sched_wrap|test_sched|bench_step_4)'
  [collectives]='^(coll_|counters_|test_coll_kern)'
  [topology]='^(test_topo_mesh|test_mesh_props|topo_gather|cli_mesh)'
  [trace]='^(test_trace_sum|test_ledger_trace|trace_mpirun|sched_trace|cli_trace)'
  [common]='^(test_common|env_registry|env_spellings|rt_bad_use|cli_walk)$'
  [tools]='^(size_checks|env_spellings|init_mesh|train_run_4|cli_walk)$'
  [ft]='^(test_ft_quorum|ft_outer_2|ft_equiv|ft_kill_heal|ft_kill_allreduce|ft_coord_noauth)$'
  [launch]='^(boot_|lifeline_path|fault_launcher|fault_train-kill-boot)'
)

# mutations.txt -> one line per mutation: id<TAB>module<TAB>file<TAB>regex<TAB>what
# (python: the file's '<'/'>' blocks are literal text, not patterns)
table() {
  python3 - "$list" <<'PY'
import sys
cur = None
out = []
for ln in open(sys.argv[1], encoding="utf-8"):
    ln = ln.rstrip("\n")
    if ln.startswith("@ "):
        f = ln[2:].split()
        if len(f) != 3: sys.exit(f"mutations.txt: bad '@' line: {ln}")
        cur = {"id": f[0], "module": f[1], "file": f[2], "re": "", "what": ""}
        out.append(cur)
    elif cur and ln.startswith("? "): cur["what"] = ln[2:]
    elif cur and ln.startswith("= "): cur["re"] = ln[2:]
for m in out:
    print("\t".join([m["id"], m["module"], m["file"], m["re"] or "-", m["what"]]))
PY
}

# apply ID ROOT: replaces the mutation's original text (exactly one occurrence) in ROOT/FILE.
apply() {
  python3 - "$list" "$1" "$2" <<'PY'
import sys
path, want, root = sys.argv[1:]
cur = m = None
for ln in open(path, encoding="utf-8"):
    ln = ln.rstrip("\n")
    if ln.startswith("@ "):
        f = ln[2:].split()
        cur = {"file": f[2], "old": [], "new": []} if f[0] == want else None
        m = cur or m
    elif cur is not None and ln.startswith("<"): cur["old"].append(ln[2:])
    elif cur is not None and ln.startswith(">"): cur["new"].append(ln[2:])
if m is None or not m["old"]: sys.exit(f"mutation {want}: not in {path} (or no '<' lines)")
target = f"{root}/{m['file']}"
text = open(target, encoding="utf-8").read()
old = "\n".join(m["old"])
new = "\n".join(m["new"])
if not m["new"]: old += "\n"  # deleting whole lines
n = text.count(old)
if n != 1:
    sys.exit(f"mutation {want} no longer applies: its original text occurs {n} times in {m['file']}:\n  {old!r}")
open(target, "w", encoding="utf-8").write(text.replace(old, new))
PY
}

mapfile -t rows < <(table) || exit 3
[ ${#rows[@]} -gt 0 ] || { echo "mutate: no mutations in $list" >&2; exit 3; }
if [ $do_list = 1 ]; then
  printf '%-20s %-12s %-36s %s\n' ID MODULE FILE WHAT
  for r in "${rows[@]}"; do IFS=$'\t' read -r id mod file re what <<<"$r"; printf '%-20s %-12s %-36s %s\n' "$id" "$mod" "$file" "$what"; done
  exit 0
fi
if [ $do_check = 1 ]; then
  chk=$(mktemp -d "${TMPDIR:-/tmp}/hsr-mutate-check.XXXXXX")
  bad=0
  for r in "${rows[@]}"; do
    IFS=$'\t' read -r id mod file re what <<<"$r"
    mkdir -p "$chk/$(dirname "$file")" && cp "$src/$file" "$chk/$file"
    if apply "$id" "$chk"; then echo "ok   $id"; else bad=1; fi
    cp "$src/$file" "$chk/$file"
  done
  rm -rf "$chk"
  [ $bad = 0 ] && echo "mutate: all ${#rows[@]} mutations apply" || exit 3
  exit 0
fi
sel=()
for r in "${rows[@]}"; do
  IFS=$'\t' read -r id mod file re what <<<"$r"
  [ -n "${module_tests[$mod]:-}" ] || { echo "mutate: $id: unknown module '$mod'" >&2; exit 3; }
  if [ -n "$only" ] && ! [[ ",$only," == *",$id,"* ]]; then continue; fi
  sel+=("$r")
done
[ ${#sel[@]} -gt 0 ] || { echo "mutate: --only '$only' matches no mutation (see --list)" >&2; exit 2; }

work=${HSR_MUTATE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/hsr-mutate.XXXXXX")}
mkdir -p "$work/src" "$work/orig" || exit 3
cleanup() { [ $keep = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
echo "mutate: scratch copy in $work (${rev:-the working tree})"
stage=$work/incoming
rm -rf "$stage" && mkdir -p "$stage" || exit 3
if [ -n "$rev" ]; then
  git -C "$src" archive "$rev" | tar -C "$stage" -xf - || exit 3
else
  (cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$stage" -xf - || exit 3
fi
# Into the copy, only the files that differ, each with a new mtime (tar keeps
# the original mtimes: in a reused HSR_MUTATE_DIR an edited source older than
# its object would not be rebuilt), and out of it the files the tree no
# longer has (moved or deleted: the build lists every source).
python3 - "$stage" "$work/src" <<'PY' || exit 3
import filecmp, os, shutil, sys
src, dst = sys.argv[1:]
have = set()
for root, _, files in os.walk(src):
    for f in files:
        a = os.path.join(root, f)
        rel = os.path.relpath(a, src)
        have.add(rel)
        b = os.path.join(dst, rel)
        if os.path.isfile(b) and filecmp.cmp(a, b, shallow=False):
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        shutil.copyfile(a, b)
        shutil.copymode(a, b)
for root, _, files in os.walk(dst):
    for f in files:
        b = os.path.join(root, f)
        if os.path.relpath(b, dst) not in have:
            os.remove(b)
PY
rm -rf "$stage"
build() { cmake --build "$work/build" -j "$jobs" >"$work/build.log" 2>&1; }
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHSR_WITH_CUDA=OFF >"$work/build.log" 2>&1 &&
  build || { tail -20 "$work/build.log"; echo "mutate: the unmutated copy does not build" >&2; exit 3; }
export HSR_COMM_TIMEOUT=${HSR_COMM_TIMEOUT:-30} # a hang becomes an error, not a timeout of the test

# run_tests REGEX LOG: ctest, then the failed tests once more (a test that
# fails only once is a flake, not a catch); prints the tests that failed both
# times (empty: all passed)
failed_in() { sed -n '/The following tests FAILED/,$p' "$1" | awk '/ - /{print $3}' | tr '\n' ' '; }
run_tests() {
  local args=(--test-dir "$work/build" -j "$jobs" --timeout "$tmo")
  [ "$1" != ALL ] && args+=(-R "$1")
  ctest "${args[@]}" >"$2" 2>&1
  local rc=$?
  [ $rc = 0 ] && return 0
  grep -q 'The following tests FAILED' "$2" || { echo "(ctest exit $rc)"; return 0; }
  ctest --test-dir "$work/build" -j "$jobs" --timeout "$tmo" --rerun-failed >"$2.again" 2>&1 && return 0
  failed_in "$2.again"
}
regex_of() { # the tests a mutation runs
  local mod=$1 re=$2
  if [ $full = 1 ]; then echo ALL; elif [ "$re" != - ]; then echo "$re"; else echo "${module_tests[$mod]}"; fi
}

if [ $baseline = 1 ]; then
  all=() ; for r in "${sel[@]}"; do IFS=$'\t' read -r id mod file re what <<<"$r"; all+=("$(regex_of "$mod" "$re")"); done
  if [ $full = 1 ]; then bre=ALL; else bre=$(printf '%s\n' "${all[@]}" | sort -u | paste -sd'|'); fi
  echo "mutate: baseline (the selected tests on the unmutated copy) ..."
  failed=$(run_tests "$bre" "$work/baseline.log")
  if [ -n "$failed" ]; then
    echo "mutate: the baseline fails ($failed); see $work/baseline.log. Fix that first." >&2; keep=1; exit 3
  fi
fi

results=() caught=0 survived=0 T0=$(date +%s)
for r in "${sel[@]}"; do
  IFS=$'\t' read -r id mod file re what <<<"$r"
  t0=$(date +%s)
  cp "$work/src/$file" "$work/orig/$(echo "$file" | tr / _)"
  if ! msg=$(apply "$id" "$work/src" 2>&1); then
    echo "$msg" >&2
    [ $lenient = 1 ] || { keep=1; exit 3; }
    verdict=n/a failed="(does not apply)"
  elif ! build; then
    verdict="BUILD-FAILED" failed="(see build.log)"
    tail -5 "$work/build.log" >&2
  else
    failed=$(run_tests "$(regex_of "$mod" "$re")" "$work/$id.log")
    if [ -n "$failed" ]; then verdict=caught; caught=$((caught + 1)); else verdict=SURVIVED; survived=$((survived + 1)); fi
  fi
  cp "$work/orig/$(echo "$file" | tr / _)" "$work/src/$file" # restored (a new mtime: rebuilt next time)
  dt=$(($(date +%s) - t0))
  printf '%-20s %-12s %-9s %4ss  %s\n' "$id" "$mod" "$verdict" "$dt" "$failed"
  results+=("$id"$'\t'"$mod"$'\t'"$verdict"$'\t'"$dt"$'\t'"$failed"$'\t'"$what")
  [ "$verdict" = BUILD-FAILED ] && [ $lenient = 0 ] && { keep=1; exit 3; }
done
total=${#results[@]}
echo "mutate: $caught of $total mutations caught, $survived survived ($(($(date +%s) - T0)) s)"
if [ -n "$json" ]; then
  printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
rows = [l.rstrip("\n").split("\t") for l in sys.stdin if l.strip()]
out = [{"id": r[0], "module": r[1], "verdict": r[2], "seconds": int(r[3]), "failed_tests": r[4].split(), "what": r[5]} for r in rows]
json.dump({"caught": sum(r["verdict"] == "caught" for r in out), "total": len(out), "mutations": out}, open(sys.argv[1], "w"), indent=1)
' "$json"
fi
[ $keep = 1 ] && echo "mutate: kept $work"
[ $survived = 0 ]
