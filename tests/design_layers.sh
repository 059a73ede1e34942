#!/usr/bin/env bash
# design_layers.sh SRC: the layer table of docs/design.md (between
# <!-- layers --> and <!-- end layers -->) is the one the build enforces:
# every hsr_module(NAME m DEPS ...) of CMakeLists.txt has a row "| m | deps |"
# with the same modules, and the page lists no module the build lacks.
set -u
src=$1
rc=0
fail() { echo "design_layers: $*"; rc=1; }
# "module dep" pairs ("module -" for none), from the CMake calls (a call may span lines: join them)
build=$(tr '\n' ' ' <"$src/CMakeLists.txt" | grep -oE 'hsr_module\(NAME [a-z_]+( DEPS( [a-z_]+)+)?' |
  sed -E 's/hsr_module\(NAME ([a-z_]+)( DEPS)?/\1/' |
  awk '{ if (NF == 1) print $1 " -"; for (i = 2; i <= NF; i++) print $1 " " $i }' | grep -vE ' (HEADERS|LIBS|SOURCES)$' | sort)
page=$(sed -n '/^<!-- layers -->$/,/^<!-- end layers -->$/p' "$src/docs/design.md" | grep -E '^\| [a-z_]+ \|' |
  grep -v '^| module |' |
  awk -F'|' '{ m = $2; gsub(/ /, "", m); d = $3; gsub(/nothing of hsr/, "", d); gsub(/ /, "", d);
               n = split(d, a, ","); if (n == 0) print m " -"; for (i = 1; i <= n; i++) print m " " a[i] }' | sort)
[ -n "$build" ] || { echo "design_layers: no hsr_module() calls found in CMakeLists.txt"; exit 1; }
[ -n "$page" ] || { echo "design_layers: no layer table between <!-- layers --> and <!-- end layers --> in docs/design.md"; exit 1; }
if [ "$build" != "$page" ]; then
  fail "docs/design.md's layer table is not the build's (CMakeLists.txt hsr_module DEPS); < build, > page:"
  diff <(echo "$build") <(echo "$page")
fi
[ $rc = 0 ] && echo "design_layers: $(echo "$build" | cut -d" " -f1 | sort -u | wc -l) modules: docs/design.md's table = the build's DEPS"
exit $rc
