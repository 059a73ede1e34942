#!/usr/bin/env bash
# ckpt_crash.sh HSR_RUN HSR: a crash at each stage of the commit of the step-12
# save (HSR_CKPT_FAULT: rank 0 exits there) leaves step 6 as `latest`; the same
# command run again (--resume latest, a fresh start the first time) resumes
# from it and ends bitwise equal to an uninterrupted run. Then the same with
# --async-save, the crash in the background save of step 8 while steps 9-12
# train: `latest` stays at step 4, and the rerun resumes from it.
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
  grep -q "no checkpoint under .* yet: starting at step 0" <<<"$out" || fail "$stage: --resume latest did not start fresh"
  py latest "$d" step-00000006 || fail "$stage: latest moved"
  case $stage in
    after_data) [ ! -e "$d/step-00000012/manifest.json" ] || fail "$stage: a manifest exists" ;;
    before_manifest_rename) [ -e "$d/step-00000012/manifest.json.tmp" ] && [ ! -e "$d/step-00000012/manifest.json" ] \
      || fail "$stage: expected only the temporary manifest" ;;
    before_latest) "$hsr" ckpt verify "$d/step-00000012" >/dev/null || fail "$stage: the committed step 12 is broken" ;;
  esac
  "$hsr" ckpt verify "$d" >/dev/null || fail "$stage: the previous checkpoint does not verify"
  out=$(r2 --ckpt "$d" --save-every 6 --resume latest 2>&1) || { echo "$out"; fail "$stage: the resume failed"; }
  grep -q "^resume: .*step-00000006: step 6" <<<"$out" || { echo "$out"; fail "$stage: did not resume from step 6"; }
  py compare "$t/ref" "$d" || fail "$stage: the resumed run differs from the uninterrupted one"
  [ -z "$(ls "$d/step-00000012" | grep -v -e '^manifest.json$' -e '^data-')" ] || fail "$stage: leftovers: $(ls "$d/step-00000012")"
  echo "ckpt_crash: $stage: previous checkpoint intact, resumed bitwise"
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
  grep -q "^resume: .*step-00000004: step 4" <<<"$out" || { echo "$out"; fail "async $stage: did not resume from step 4"; }
  py compare "$t/ref" "$d" || fail "async $stage: the resumed run differs from the uninterrupted one"
  [ -z "$(ls "$d/step-00000008" | grep -v -e '^manifest.json$' -e '^data-')" ] || fail "async $stage: leftovers: $(ls "$d/step-00000008")"
  echo "ckpt_crash: async $stage: previous checkpoint intact, resumed bitwise"
done
out=$(HSR_CKPT_FAULT=sometime "$hsr" $train --ckpt "$t/x" 2>&1); rc=$?
[ "$rc" != 0 ] && grep -qF "HSR_CKPT_FAULT='sometime' (valid: after_data|before_manifest_rename|before_latest" <<<"$out" || fail "bad HSR_CKPT_FAULT accepted"
echo "ckpt_crash: ok"
