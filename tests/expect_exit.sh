#!/usr/bin/env bash
# expect_exit.sh CODE REGEX CMD...: runs CMD, passes when it exits with CODE and
# (if REGEX is not empty) its stdout+stderr matches REGEX.
want=$1; re=$2; shift 2
out=$("$@" 2>&1); rc=$?
echo "$out"
if [ "$rc" != "$want" ]; then echo "expect_exit: exit code $rc, expected $want"; exit 1; fi
if [ -n "$re" ] && ! grep -Eq -- "$re" <<<"$out"; then echo "expect_exit: output does not match /$re/"; exit 1; fi
exit 0
