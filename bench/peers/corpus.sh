#!/usr/bin/env bash
# bench/peers/corpus.sh REV|FILE OUT: the text `hsr train --model gpt` trains
# on by default (build/hsr-corpus.txt: the repository's docs and sources, each
# file preceded by a line naming it, in the order of cmake/corpus.cmake), as it
# was at commit REV, into OUT (a FILE is copied). The peers' tables train on a
# pinned commit's text, so that a later change to the tree changes neither
# their data nor their losses.
set -eu
prog=peers/corpus.sh
case ${1:-} in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
[ $# = 2 ] || { echo "usage: $prog REV|FILE OUT" >&2; exit 2; }
rev=$1 out=$2
if [ -f "$rev" ]; then
  [ "$rev" -ef "$out" ] || cp "$rev" "$out"
  exit
fi
SRC=$(cd "$(dirname "$0")/../.." && pwd)
git -C "$SRC" rev-parse -q --verify "$rev^{commit}" >/dev/null ||
  { echo "$prog: '$rev' is not a commit of $SRC (a clone with its history is needed)" >&2; exit 2; }
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
: >"$tmp"
# CMake's glob (CMakeLists.txt), byte order as its list(SORT), build trees left out
git -C "$SRC" ls-tree -r --name-only "$rev" |
  grep -E '(\.md|\.c|\.h|\.cu|\.cmake|\.sh|\.py|CMakeLists\.txt)$' | grep -Ev '(^|/)build[^/]*/' | LC_ALL=C sort |
  while IFS= read -r f; do
    printf '==> %s <==\n' "$f" >>"$tmp"
    git -C "$SRC" cat-file blob "$rev:$f" >>"$tmp"
    printf '\n' >>"$tmp"
  done
mv "$tmp" "$out"
