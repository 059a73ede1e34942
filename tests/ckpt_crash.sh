#!/usr/bin/env bash
# ckpt_crash.sh HSR_RUN HSR: a crash at each stage of the commit of the step-12
# save (HSR_CKPT_FAULT: rank 0 exits there) leaves step 6 as `latest`. Before
# the manifest is in place, step 12 does not exist: the same command run again
# (--resume latest, a fresh start the first time) resumes step 6 and ends
# bitwise equal to an uninterrupted run. After it (before_latest), step 12 is
# committed though `latest` still names step 6: the rerun resumes step 12, the
# newest committed checkpoint, says so, and never saves over it (here nothing
# is left to train: refused, step 12 unchanged and equal to the uninterrupted
# run's). The same with `latest` deleted, and a new run (no --resume) over it
# is refused before its first step. Then the same with --async-save, the crash
# in the background save of step 8 while steps 9-12 train: `latest` stays at
# step 4; the rerun resumes step 4, or the committed step 8 after
# before_latest, and ends bitwise equal to the uninterrupted run.
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-ckpt-crash-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_crash: $*"; exit 1; }
train="train --layers 2 --dim 24 --classes 6 --steps 12 --batch 32 --warmup 3 --lr-min 3e-4 --clip 0.5 --no-progress"
r2() { "$run" -n 2 --launcher mpirun -- "$hsr" $train "$@"; }

r2 --ckpt "$t/ref" --save-every 6 >"$t/ref.out" 2>&1 || { cat "$t/ref.out"; fail "the uninterrupted run failed"; }
for stage in after_data before_manifest_rename before_latest; do
  d="$t/$stage"
  out=$(HSR_CKPT_FAULT=$stage:12 r2 --ckpt "$d" --save-every 6 --resume latest 2>&1); rc=$?
  [ "$rc" != 0 ] || fail "$stage: the run with the fault did not fail"
  grep -q "HSR_CKPT_FAULT: rank 0 exits at $stage" <<<"$out" || { echo "$out"; fail "$stage: the hook did not fire"; }
  grep -q "no committed checkpoint under .* yet: starting at step 0" <<<"$out" || fail "$stage: --resume latest did not start fresh"
  py latest "$d" step-00000006 || fail "$stage: latest moved"
  case $stage in
    after_data) [ ! -e "$d/step-00000012/manifest.json" ] || fail "$stage: a manifest exists" ;;
    before_manifest_rename) [ -e "$d/step-00000012/manifest.json.tmp" ] && [ ! -e "$d/step-00000012/manifest.json" ] \
      || fail "$stage: expected only the temporary manifest" ;;
    before_latest) "$hsr" ckpt verify "$d/step-00000012" >/dev/null || fail "$stage: the committed step 12 is broken" ;;
  esac
  "$hsr" ckpt verify "$d" >/dev/null || fail "$stage: the previous checkpoint does not verify"
  if [ "$stage" = before_latest ]; then
    sum=$(cat "$d"/step-00000012/* | md5sum)
    out=$(r2 --ckpt "$d" --save-every 6 --resume latest 2>&1); rc=$?
    grep -q "latest names step-00000006, but step-00000012 (step 12) is newer and committed" <<<"$out" ||
      { echo "$out"; fail "$stage: the rerun did not take the committed step 12"; }
    [ "$rc" = 2 ] && grep -q "checkpoint is at step 12 and --steps is 12" <<<"$out" ||
      { echo "$out"; fail "$stage: exit $rc, expected 2: nothing left to train"; }
    rm "$d/latest"
    out=$(r2 --ckpt "$d" --save-every 6 --resume latest --steps 12 2>&1)
    grep -q "latest is missing or names no checkpoint: resuming the newest committed one, step-00000012" <<<"$out" ||
      { echo "$out"; fail "$stage: without latest the rerun did not take step 12"; }
    out=$(r2 --ckpt "$d" --save-every 6 2>&1); rc=$?
    [ "$rc" = 2 ] && grep -q "would save step 6 over the committed checkpoint .*step-00000006" <<<"$out" ||
      { echo "$out"; fail "$stage: a new run over committed checkpoints was not refused (exit $rc)"; }
    [ "$(cat "$d"/step-00000012/* | md5sum)" = "$sum" ] || fail "$stage: step 12 was written over"
    py compare "$t/ref" "$d/step-00000012" || fail "$stage: the committed step 12 differs from the uninterrupted run's"
    echo "ckpt_crash: $stage: step 12 committed, taken by the rerun, never written over"
    continue
  fi
  out=$(r2 --ckpt "$d" --save-every 6 --resume latest 2>&1) || { echo "$out"; fail "$stage: the resume failed"; }
  grep -q "^resume: .*step-00000006: step 6" <<<"$out" || { echo "$out"; fail "$stage: did not resume from step 6"; }
  py compare "$t/ref" "$d" || fail "$stage: the resumed run differs from the uninterrupted one"
  [ -z "$(ls "$d/step-00000012" | grep -v -e '^manifest.json$' -e '^data-')" ] || fail "$stage: leftovers: $(ls "$d/step-00000012")"
  echo "ckpt_crash: $stage: previous checkpoint intact, resumed bitwise"
done
# inputs that are not regular files: a FIFO in place of a data file or of the
# manifest is refused at once (it hung hsr ckpt verify), exit 1 naming it
for f in data manifest; do
  cp -r "$t/ref" "$t/fifo-$f"
  victim=$(ls "$t/fifo-$f/step-00000012" | grep -m1 "^$f")
  rm "$t/fifo-$f/step-00000012/$victim" && mkfifo "$t/fifo-$f/step-00000012/$victim"
  out=$(timeout 30 "$hsr" ckpt verify "$t/fifo-$f" 2>&1); rc=$?
  [ "$rc" = 1 ] && grep -q "$victim' is a FIFO, not a regular file" <<<"$out" ||
    { echo "$out"; fail "a FIFO as the $f file: exit $rc (124: it hung), expected 1 naming it"; }
  echo "ckpt_crash: a FIFO as the $f file: refused at once"
done
for stage in after_data before_manifest_rename before_latest; do
  d="$t/async-$stage"
  out=$(HSR_CKPT_FAULT=$stage:8 r2 --ckpt "$d" --save-every 4 --async-save --resume latest 2>&1); rc=$?
  [ "$rc" != 0 ] || fail "async $stage: the run with the fault did not fail"
  grep -q "HSR_CKPT_FAULT: rank 0 exits at $stage of the save of step 8" <<<"$out" || { echo "$out"; fail "async $stage: the hook did not fire"; }
  grep -q "^checkpoint: step 8 -> .*writing in the background" <<<"$out" || { echo "$out"; fail "async $stage: step 8 was not saved in the background"; }
  py latest "$d" step-00000004 || fail "async $stage: latest moved"
  [ ! -e "$d/step-00000012" ] || fail "async $stage: a step-12 checkpoint exists"
  case $stage in
    after_data) [ ! -e "$d/step-00000008/manifest.json" ] || fail "async $stage: a manifest exists" ;;
    before_manifest_rename) [ -e "$d/step-00000008/manifest.json.tmp" ] && [ ! -e "$d/step-00000008/manifest.json" ] \
      || fail "async $stage: expected only the temporary manifest" ;;
    before_latest) "$hsr" ckpt verify "$d/step-00000008" >/dev/null || fail "async $stage: the committed step 8 is broken" ;;
  esac
  "$hsr" ckpt verify "$d" >/dev/null || fail "async $stage: the previous checkpoint does not verify"
  out=$(r2 --ckpt "$d" --save-every 4 --async-save --resume latest 2>&1) || { echo "$out"; fail "async $stage: the resume failed"; }
  if [ "$stage" = before_latest ]; then # step 8 is committed: the newest, whatever latest says
    grep -q "latest names step-00000004, but step-00000008 (step 8) is newer and committed" <<<"$out" &&
      grep -q "^resume: .*step-00000008: step 8" <<<"$out" || { echo "$out"; fail "async $stage: did not resume from the committed step 8"; }
  else
    grep -q "^resume: .*step-00000004: step 4" <<<"$out" || { echo "$out"; fail "async $stage: did not resume from step 4"; }
  fi
  py compare "$t/ref" "$d" || fail "async $stage: the resumed run differs from the uninterrupted one"
  [ -z "$(ls "$d/step-00000008" | grep -v -e '^manifest.json$' -e '^data-')" ] || fail "async $stage: leftovers: $(ls "$d/step-00000008")"
  echo "ckpt_crash: async $stage: previous checkpoint intact, resumed bitwise"
done
out=$(HSR_CKPT_FAULT=sometime "$hsr" $train --ckpt "$t/x" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -qF "HSR_CKPT_FAULT='sometime' (valid: after_data|before_manifest_rename|before_latest" <<<"$out" || fail "bad HSR_CKPT_FAULT accepted"
echo "ckpt_crash: ok"
