#!/usr/bin/env bash
# cli_walk.sh BUILD SRC: every flag of every command and every HSR_* variable
# with bad values, each refused before any work starts with exit 2 and a
# message naming the flag or variable.
#   1. the cases of tests/cli_walk.txt: `CODE @REGEX@ COMMAND`, one a line;
#      COMMAND is bash (quotes work) with $HSR, $RUN (hsr-run), $BIND
#      (hsr-bind), $KB (hsr-kbench), $BOOT (tests' mr_boot: a program of
#      libhsr's own), $SRC and $T (a scratch folder holding file, dir/ and
#      empty.json) set; it must exit CODE and print (stdout + stderr)
#      something matching REGEX (grep -E).
#   2. generated from the registry (hsr env --json): every variable with the
#      bad values of its kind (set but empty, not a number, negative, below
#      the minimum, above the maximum, a wrong suffix, an unknown choice, a
#      missing file, a directory for a file ...) through libhsr's own check
#      (hsr_boot_init, in mr_boot: exit 1), and its first bad value through
#      hsr version (every command checks before it starts: exit 2) and each
#      command or script that reads it.
#   3. every command and script once with a bad HSR_LOG.
# The cases run in parallel (hsr on a CUDA build spends ~0.1 s of CPU in
# cuBLAS' constructors per start). Nothing here starts real work: a case that
# got past its check would run into its 30 s timeout and fail.
set -u
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
HSR=$build/hsr RUN=$build/hsr-run BIND=$build/hsr-bind KB=$build/hsr-kbench BOOT=$build/tests/mr_boot SRC=$src
T=$(mktemp -d /tmp/hsr-cli-walk.XXXXXX)
export HSR RUN BIND KB BOOT SRC T
trap 'rm -rf "$T"' EXIT
echo x >"$T/file"
mkdir "$T/dir" "$T/res"
echo '{"traceEvents":[]}' >"$T/empty.json"
# the walk's own environment: none of the caller's HSR_* settings
for v in $(env | grep -o '^HSR_[A-Za-z0-9_]*'); do unset "$v"; done
for x in "$HSR" "$RUN" "$BIND" "$KB" "$BOOT"; do [ -x "$x" ] || { echo "cli_walk: $x is missing"; exit 1; }; done

cases=$T/cases # CODE \t REGEX \t COMMAND
: >"$cases"
add() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$cases"; }

# ---- 1. the table ---------------------------------------------------------------
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in '' | '#'*) continue ;; esac
  code=${line%% *} rest=${line#* }
  re=${rest#@} re=${re%%@*} cmd=${rest#@*@ }
  add "$code" "$re" "$cmd"
done <"$src/tests/cli_walk.txt"
ntable=$(wc -l <"$cases")

# ---- 2. every registered variable, bad values of its kind -----------------------
vars=$("$HSR" env --json | jq -r '.variables[] | [.name, .kind, (.min // 0), (.max // 0), .reader] | @tsv') || {
  echo "cli_walk: hsr env --json failed"
  exit 1
}
bad_values() { # kind min max: one bad value a line (the first: set but empty)
  echo ""
  case "$1" in
    int) printf '%s\n' x -1 1.5 99999999999 $((${2%.*} - 1)) $((${3%.*} + 1)) ;;
    float) printf '%s\n' x -5 1e30 nan ;;
    size) printf '%s\n' x -1 1Q 4KiBs 99999999T ;;
    choice) echo bogus ;;
    bool) echo maybe ;;
    stage) printf '%s\n' sometime after_data:x ;;
    rate) printf '%s\n' fast 0gbit ;;
    name) echo a/b ;;
    file) printf '%s\n' /nonexistent/x "$T/dir" ;;
    dir | wdir) printf '%s\n' /nonexistent/x "$T/file" ;;
    path) echo "$T/file" ;;
  esac
}
readers() { # what reads it, besides hsr version (the check every command runs first): one a line
  case "$1" in
    common | launch | collectives | runtime | topology) ;; # $BOOT above: the library's own check
    "hsr train") echo '$HSR train --steps 1' ;;
    "hsr bench") echo '$HSR bench all_gather -b 4K -e 4K' ;;
    "hsr topo") echo '$HSR topo' ;;
    hsr-run) echo '$RUN -n 1 -- true' ;;
    scripts/setup.sh) printf '%s\n' '$SRC/scripts/setup.sh' '$SRC/scripts/sanitize.sh address' ;;
    bench/gpu_check.sh) echo '$SRC/bench/gpu_check.sh $T/gpu' ;;
    bench/train_vs_torch.sh) echo '$SRC/bench/train_vs_torch.sh' ;;
    scripts/mutate.sh) echo '$SRC/scripts/mutate.sh --list' ;;
  esac
}
nvars=0
while IFS=$'\t' read -r name kind min max reader; do
  nvars=$((nvars + 1))
  while IFS= read -r val; do
    add 1 "$name" "$name=$(printf %q "$val") \$BOOT"
  done < <(bad_values "$kind" "$min" "$max")
  add 2 "$name is set but empty" "$name= \$HSR version"
  while IFS= read -r c; do
    [ "$c" = '$SRC/scripts/sanitize.sh address' ] && [ "$name" != HSR_JOBS ] && continue # it reads HSR_JOBS only
    add 2 "$name" "$name= $c"
  done < <(readers "$reader")
done <<<"$vars"

# ---- 3. every command and script with a bad HSR_LOG --------------------------------
for c in version info "topo" "mesh" "trace summarize $T/empty.json" "bench all_gather" "bench copy" "bench step" "bench ft" \
  "bench coll --op all_reduce" "train" "ckpt inspect $T/dir" "ckpt verify $T/dir" "ckpt export $T/dir --safetensors x" \
  "ckpt bench" "eval --init $T/file --data $T/file" "sample --init $T/file" "tune --params 7e9 --shard 8"; do
  add 2 "HSR_LOG: 'loud' is not valid" "HSR_LOG=loud \$HSR $c"
done
add 2 "HSR_LOG: 'loud' is not valid" 'HSR_LOG=loud $RUN -n 2 -- true'
add 2 "HSR_LOG: 'loud' is not valid" 'HSR_LOG=loud OMPI_COMM_WORLD_LOCAL_RANK=0 $BIND --print'
add 2 "HSR_LOG: 'loud' is not valid" 'HSR_LOG=loud $KB'

# ---- run them, in parallel -----------------------------------------------------------
one() { # index \t code \t regex \t command
  local i=${1%%$'\t'*} rest=${1#*$'\t'}
  local want=${rest%%$'\t'*} rest2=${rest#*$'\t'}
  local re=${rest2%%$'\t'*} cmd=${rest2#*$'\t'} rc out=$T/res/$i.out
  (cd "$T" && timeout 30 bash -c "$cmd" </dev/null >"$out" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -Eq -- "$re" "$out" || grep -Eq 'Segmentation|Aborted|core dumped|hsr fatal: ' "$out"; then
    { echo "FAIL (exit $rc, want $want, /$re/): $cmd"; sed 's/^/    /' "$out" | head -5; } >"$T/res/$i.fail"
  fi
  rm -f "$out"
}
export -f one
jobs=$(($(nproc) * 2))
t0=$(date +%s)
nl -ba -w1 -s$'\t' "$cases" | tr '\n' '\0' | xargs -0 -P "$jobs" -I{} bash -c 'one "$1"' _ {}
total=$(wc -l <"$cases") nfail=$(find "$T/res" -name '*.fail' | wc -l)
cat "$T"/res/*.fail 2>/dev/null
echo "cli_walk: $ntable table cases, $((total - ntable)) generated ($nvars variables); $((total - nfail)) passed," \
  "$nfail failed in $(($(date +%s) - t0)) s ($jobs at a time)"
[ "$nfail" = 0 ]
