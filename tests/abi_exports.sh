#!/usr/bin/env bash
# libhsr.so exports exactly the program API of tests/abi_exports.txt: every
# dynamic symbol it defines is listed there, every listed one is exported,
# declared with HSR_API in include/hsr/*.h (and nothing else is) and
# documented in docs/api.md; the list holds at most 100; no header outside
# include/hsr defines a type with the public prefix. With EXAMPLES (the
# example models' archive), they call no hsr_ function outside the list.
# Usage: abi_exports.sh LIBHSR_SO SOURCE_DIR [EXAMPLES_ARCHIVE]
set -u
lib=$1; src=$2; examples=${3:-}
command -v nm >/dev/null || { echo "abi_exports: nm not found (binutils): skipping"; exit 77; }
golden=$(grep -v '^#' "$src/tests/abi_exports.txt" | sed '/^$/d' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -hoE '^HSR_API [^(]*\bhsr_[a-z0-9_]+\(' "$src"/include/hsr/*.h | grep -oE 'hsr_[a-z0-9_]+\($' | tr -d '(' | sort -u)
rc=0
report() { # what, list
  [ -z "$2" ] && return
  echo "$1:"; echo "$2" | sed 's/^/  /'; rc=1
}
report "exported but not in tests/abi_exports.txt (make it internal: no HSR_API, an INTERNAL module header)" \
  "$(comm -23 <(echo "$exported") <(echo "$golden"))"
report "in tests/abi_exports.txt but not exported by $lib (not defined, or not built)" \
  "$(comm -13 <(echo "$exported") <(echo "$golden"))"
report "declared HSR_API in include/hsr but not in tests/abi_exports.txt" \
  "$(comm -23 <(echo "$declared") <(echo "$golden"))"
report "in tests/abi_exports.txt but not declared HSR_API in include/hsr" \
  "$(comm -13 <(echo "$declared") <(echo "$golden"))"
# the public prefix names the program API only: no header outside include/hsr defines an hsr_ type
internal_types=$(cd "$src" && git ls-files '*.h' 2>/dev/null | grep -v '^include/' |
  xargs -r grep -HnoE '^} hsr_[a-z0-9_]+;|typedef (struct|enum|union) hsr_[a-z0-9_]+ hsr_[a-z0-9_]+;|typedef [a-z ]+ hsr_[a-z0-9_]+;')
report "an hsr_ type outside include/hsr (internal types have no public prefix)" "$internal_types"
n=$(echo "$golden" | wc -l)
[ "$n" -le 100 ] || { echo "tests/abi_exports.txt lists $n symbols: the program API holds at most 100"; rc=1; }
undoc=""
for s in $golden; do grep -qs "\`$s(" "$src/docs/api.md" || undoc="$undoc$s"$'\n'; done
report "not documented in docs/api.md (as \`name(...)\`)" "$(echo -n "$undoc")"
if [ -n "$examples" ]; then
  used=$(nm -u "$examples" 2>/dev/null | awk '{print $NF}' | grep -E '^hsr_' | sort -u)
  report "called by the example models (examples/) but not in the program API" "$(comm -23 <(echo "$used") <(echo "$golden"))"
fi
[ $rc = 0 ] && echo "abi_exports: $n symbols, exactly tests/abi_exports.txt, all declared and documented"
exit $rc
