#!/usr/bin/env bash
# topo_golden.sh HSR SRC [--update]: hsr's reading of every topology in
# SRC/tests/data against the expected output committed in SRC/tests/golden
# (cases in tests/golden/cases.txt), the way hwloc's own tests/hwloc/xml
# compare X.xml with X.output. JSON is compared after `python3 -m json.tool
# --indent 1` (the committed form). --update rewrites the expected files
# instead (scripts/regen_golden.sh); review the diff before committing.
set -u
hsr=$1; src=$2; update=${3:-}
data=$src/tests/data; gold=$src/tests/golden; cases=$gold/cases.txt
fail=0; checked=0
tmp=$(mktemp -d /tmp/hsr-golden-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

check() { # EXPECTED-FILE COMMAND...
  local want=$1; shift
  local out rc
  out=$(env -u HSR_TOPO_XML -u HSR_SIM_NODES "$@" 2>&1); rc=$?
  if [ "$rc" != 0 ]; then echo "FAIL ${want#"$src"/}: '$*' exited $rc: $out"; fail=1; return; fi
  if ! printf '%s\n' "$out" | python3 -m json.tool --indent 1 >"$tmp/got" 2>"$tmp/err"; then
    echo "FAIL ${want#"$src"/}: '$*' printed no JSON: $(cat "$tmp/err")"; fail=1; return
  fi
  checked=$((checked + 1))
  if [ -n "$update" ]; then
    mkdir -p "$(dirname "$want")"
    cmp -s "$tmp/got" "$want" 2>/dev/null || { cp "$tmp/got" "$want"; echo "wrote ${want#"$src"/}"; }
    return
  fi
  if [ ! -f "$want" ]; then echo "FAIL: no expected file ${want#"$src"/} (run scripts/regen_golden.sh)"; fail=1; return; fi
  if ! diff -u "$want" "$tmp/got" >"$tmp/diff"; then
    echo "FAIL ${want#"$src"/} differs from '$*':"; head -60 "$tmp/diff"; fail=1
  fi
}

# Every topology file has a case, and every case's file exists.
listed=$(awk '!/^#/ && NF == 3 && $1 != "compare" {print $1}' "$cases" | sort)
present=$(cd "$data" && ls *.xml nccl/*.xml | sort)
missing=$(comm -13 <(echo "$listed") <(echo "$present"))
gone=$(comm -23 <(echo "$listed") <(echo "$present"))
[ -z "$missing" ] || { echo "FAIL: topologies without a line in tests/golden/cases.txt: $missing"; fail=1; }
[ -z "$gone" ] || { echo "FAIL: cases.txt lists files that are not in tests/data: $gone"; fail=1; }

while read -r a b c; do
  case "$a" in ''|'#'*) continue ;; esac
  if [ "$a" = compare ]; then
    sa=$(basename "$b" .xml); sb=$(basename "$c" .xml)
    check "$gold/compare/$sa--$sb.json" "$hsr" topo --compare-nccl --xml "$data/$b" --nccl-xml "$data/$c" --json
    continue
  fi
  flag=--xml; case "$a" in nccl/*) flag=--nccl-xml ;; esac
  base=$gold/${a%.xml}
  check "$base.topo.json" "$hsr" topo "$flag" "$data/$a" --json
  check "$base.mesh.json" "$hsr" mesh "$flag" "$data/$a" --world "$b" --nodes "$c" --json
done <"$cases"

# Expected files that no case produces any more.
if [ -z "$update" ]; then
  while read -r f; do
    rel=${f#"$gold"/}
    case "$rel" in
      compare/*) grep -Eq "^compare [^ ]*/?$(basename "${rel%%--*}").xml " "$cases" || { echo "FAIL: stale $rel"; fail=1; } ;;
      *) grep -Eq "^${rel%.*.json}.xml " "$cases" || { echo "FAIL: stale golden file tests/golden/$rel"; fail=1; } ;;
    esac
  done < <(find "$gold" -name '*.json' | sort)
fi
[ "$fail" = 0 ] && echo "topo_golden: $checked outputs match tests/golden"
exit $fail
