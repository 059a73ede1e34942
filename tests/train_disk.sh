#!/usr/bin/env bash
# train_disk.sh HSR: the space a run's checkpoints need is checked before
# its first step. In a private mount namespace with a 512 KiB tmpfs: a run
# whose one checkpoint (1.6 MiB) cannot fit is refused with exit 2, needed
# against available, before any step (no step line, no checkpoint); with
# 4 MiB, two checkpoints fit but the run would keep four: it is said once
# (a warning), and the run goes on; on 2 ranks with --async-save the save that
# does not fit is said once for the job. Skips (77) where mounts are not allowed.
set -u
hsr=$1
command -v unshare >/dev/null || { echo "train_disk: no unshare: skipping"; exit 77; }
unshare -m true 2>/dev/null || { echo "train_disk: private mount namespaces not permitted: skipping"; exit 77; }
t=$(mktemp -d /tmp/hsr-train-disk-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "train_disk: $*"; exit 1; }
inside() { # SIZE CMD...: CMD with $t/small a tmpfs of SIZE, in a mount namespace of its own
  local size=$1; shift
  unshare -m sh -c 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"' sh "$size" "$t/small" "$@"
}
mkdir -p "$t/small"
inside 1K true || { echo "train_disk: tmpfs mounts not permitted: skipping"; exit 77; }
out=$(inside 512k "$hsr" train --steps 20 --ckpt "$t/small/ck" 2>&1); rc=$?
echo "$out"
[ "$rc" = 2 ] || fail "exit $rc, expected 2"
grep -qE -- "--ckpt .*/small/ck: one checkpoint needs 1\.[0-9]+ MiB, the file system holding it has 512 KiB available" <<<"$out" ||
  fail "no needed-against-available message"
! grep -qE '^\[|step [0-9]+/|^checkpoint:' <<<"$out" || fail "steps ran before the refusal"
out=$(inside 4m "$hsr" train --steps 8 --save-every 2 --no-progress --ckpt "$t/small/ck" 2>&1); rc=$?
echo "$out"
n=$(grep -cE "warning: --ckpt .*: the run keeps 4 checkpoints of 1\.[0-9]+ MiB at once" <<<"$out")
[ "$n" = 1 ] || fail "the keep-all warning was said $n times, expected once"
# the same on 2 ranks with --async-save: the save that does not fit fails in the
# background; the job says it once (rank 0, the writers agreed), exit 1
run=$(dirname "$hsr")/hsr-run
if [ -x "$run" ]; then
  out=$(inside 4m "$run" -n 2 -- "$hsr" train --steps 8 --save-every 2 --async-save --no-progress --ckpt "$t/small/ck" 2>&1); rc=$?
  [ "$rc" = 1 ] || { echo "$out"; fail "async save on a full disk: exit $rc, expected 1"; }
  n=$(grep -cE "hsr train: HSR_ERR_IO: the background save of step [0-9]+ failed: .*No space left on device" <<<"$out")
  [ "$n" = 1 ] || { echo "$out"; fail "the full disk of the background save said $n times, once for the job"; }
fi
echo "train_disk: ok"
