#!/usr/bin/env bash
# shm_small.sh HSR_RUN HSR: Docker's default 64 MB /dev/shm is no limit for
# hsr, whose node-shared memory is memfds (charged to memory and the memory
# cgroup, not to /dev/shm's tmpfs). In a private mount namespace with a
# 64 MiB /dev/shm: a training run whose shared memory is about 145 MiB, and a
# benchmark with 128 MiB of registered buffers, both run (they were refused:
# "does not fit in /dev/shm"); /dev/shm holds no hsr file afterwards. Skips
# (77) where mounts are not allowed.
set -u
run=$1 hsr=$2
command -v unshare >/dev/null && unshare -m true 2>/dev/null || { echo "shm_small: no private mount namespaces: skipping"; exit 77; }
unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm' 2>/dev/null || { echo "shm_small: tmpfs mounts not permitted: skipping"; exit 77; }
# shellcheck disable=SC2016
out=$(unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && df -h /dev/shm | tail -1 &&
  "$1" -n 2 -- "$2" train --layers 8 --dim 512 --steps 2 --no-progress &&
  "$1" -n 2 -- "$2" bench all_gather -b 32M -e 32M -n 2 -w 1 -R 1 &&
  echo "hsr files left in /dev/shm: $(ls /dev/shm | grep -c "^hsr")"' sh "$run" "$hsr" 2>&1)
rc=$?
echo "$out"
fail() { echo "shm_small: $*"; exit 1; }
[ "$rc" = 0 ] || fail "exit $rc"
grep -q '^loss .* over 2 steps' <<<"$out" || fail "the training run did not finish"
grep -q '# Avg bus bandwidth' <<<"$out" || fail "the benchmark did not finish"
grep -q 'hsr files left in /dev/shm: 0' <<<"$out" || fail "hsr files were left in /dev/shm"
echo "shm_small: ok"
