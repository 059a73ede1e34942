#!/usr/bin/env bash
# env_spellings.sh BUILD SRC: the BOOL and CHOICE variables read outside the
# library's own tests (tests/test_common.c walks the readers; mr_runtime
# HSR_POISON's effect; fault_verdict HSR_UCX_PEER_ERRORS'), walked through
# every spelling the registry accepts (`hsr env --json`), as written and in
# another case, and judged by their EFFECT:
#   HSR_BENCH_CHECK_FAULT  hsr bench all_gather exits 3 (one wrong element)
#                          for a true spelling, 0 for a false one
#   HSR_LOG                a debug line appears exactly at debug
#   HSR_LAUNCHER           hsr-run --dry-run starts that launcher
#   setup.sh's choices     scripts/argcheck.sh passes the list's own spelling
#                          on (CMake compares ON/OFF/AUTO as written)
# and, for the scripts' own readers, hsr env --check agrees on what is valid
# (the commands run that check themselves).
set -u
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
hsr=$build/hsr run=$build/hsr-run
for v in $(env | grep -o '^HSR_[A-Za-z0-9_]*'); do unset "$v"; done
rc=0 n=0
fail() { echo "env_spellings: $*"; rc=1; }
valid() { "$hsr" env --json | jq -r --arg n "$1" '.variables[] | select(.name == $n) | .valid'; }
# as written and in another case: lower case, or UPPER for a spelling that
# is lower case (the readers' every case is walked by test_common; here each
# spelling's effect)
cases() {
  local l=${1,,}
  printf '%s\n' "$1"
  if [ "$l" != "$1" ]; then printf '%s\n' "$l"; elif [ "${1^^}" != "$1" ]; then printf '%s\n' "${1^^}"; fi
}
means() { case "$1" in 0 | false | no | off) echo 0 ;; 1 | true | yes | on) echo 1 ;; *) echo "?" ;; esac; }
checked() { # NAME VALUE: hsr env --check takes it (the scripts' own readers must agree)
  env "$1=$2" "$hsr" env --check --quiet "$1" >/dev/null 2>&1 || fail "hsr env --check refuses $1=$2"
}

# ---- HSR_BENCH_CHECK_FAULT (bool) ----
IFS='|' read -ra words <<<"$(valid HSR_BENCH_CHECK_FAULT)"
[ ${#words[@]} -ge 8 ] || fail "HSR_BENCH_CHECK_FAULT: only ${#words[@]} spellings"
for w in "${words[@]}"; do
  m=$(means "$w")
  [ "$m" != "?" ] || { fail "HSR_BENCH_CHECK_FAULT accepts '$w', which this test gives no meaning"; continue; }
  while read -r s; do
    HSR_BENCH_CHECK_FAULT=$s "$hsr" bench all_gather -b 1K -e 1K -n 1 -w 0 >/dev/null 2>&1
    got=$?
    want=0; [ "$m" = 1 ] && want=3
    [ "$got" = "$want" ] || fail "HSR_BENCH_CHECK_FAULT=$s: hsr bench exit $got, expected $want ($s means $m)"
    n=$((n + 1))
  done < <(cases "$w")
done

# ---- HSR_LOG (choice): the levels in order ----
IFS='|' read -ra levels <<<"$(valid HSR_LOG)"
for i in "${!levels[@]}"; do
  while read -r s; do
    d=$(HSR_LOG=$s "$hsr" bench all_gather -b 1K -e 1K -n 1 -w 0 2>&1 | grep -c 'hsr debug:')
    want=0; [ "${levels[$i]}" = debug ] && want=1
    [ "$((d > 0))" = "$want" ] || fail "HSR_LOG=$s: $d debug lines"
    n=$((n + 1))
  done < <(cases "${levels[$i]}")
done

# ---- HSR_LAUNCHER (choice, read by hsr-run) ----
IFS='|' read -ra ls <<<"$(valid HSR_LAUNCHER)"
for l in "${ls[@]}"; do
  while read -r s; do
    out=$(HSR_LAUNCHER=$s "$run" --dry-run -n 2 -- true 2>&1) || fail "HSR_LAUNCHER=$s: hsr-run refuses it: $out"
    cmd=$out
    [ "${cmd%% *}" = setsid ] && cmd=${cmd#* -- } # the launcher in its own session, ended with hsr-run
    [ "${cmd%% *}" = "$l" ] || fail "HSR_LAUNCHER=$s: hsr-run would start '${cmd%% *}', not $l"
    n=$((n + 1))
  done < <(cases "$l")
done

# ---- setup.sh's choices (scripts/argcheck.sh) ----
for v in HSR_BUILD_TYPE HSR_WITH_CUDA HSR_WERROR; do
  list=$(valid "$v")
  [ -n "$list" ] || { fail "$v is not in the registry"; continue; }
  grep -q "ac_env choice $v '$list'" "$src/scripts/setup.sh" || fail "setup.sh does not check $v against the registry's $list"
  IFS='|' read -ra cs <<<"$list"
  for c in "${cs[@]}"; do
    while read -r s; do
      checked "$v" "$s"
      got=$(env "$v=$s" bash -c '. "$1/scripts/argcheck.sh"; prog=t; ac_env choice "$2" "$3" && echo "${!2}"' _ "$src" "$v" "$list" 2>&1)
      [ "$got" = "$c" ] || fail "$v=$s: argcheck passes on '$got', not $c"
      n=$((n + 1))
    done < <(cases "$c")
  done
  got=$(env "$v=bogus" bash -c '. "$1/scripts/argcheck.sh"; prog=t; ac_env choice "$2" "$3"' _ "$src" "$v" "$list" 2>&1)
  [[ "$got" == *"$v 'bogus' is not valid (valid: $list)"* ]] || fail "$v=bogus: '$got'"
done
[ $rc = 0 ] && echo "env_spellings: $n spellings, each with its effect"
exit $rc
