#!/usr/bin/env bash
# leaves_nothing.sh CMD...: runs CMD with TMPDIR a fresh empty folder and
# passes its exit status and output on; when CMD succeeded, anything it left
# in that folder (a temporary file or folder not removed) fails the test.
set -u
t=$(mktemp -d "${TMPDIR:-/tmp}/hsr-leaves-nothing-XXXXXX")
trap 'rm -rf "$t"' EXIT
TMPDIR=$t "$@"
rc=$?
[ "$rc" = 0 ] || exit "$rc"
left=$(find "$t" -mindepth 1 -maxdepth 2 | sed "s#^$t/##" | head -10)
[ -z "$left" ] || { echo "leaves_nothing: '$*' left in its TMPDIR:"; echo "$left" | sed 's/^/  /'; exit 1; }
