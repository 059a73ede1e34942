#!/usr/bin/env bash
# ckpt_in_place_agree.sh HSR: HSR_CKPT_IN_PLACE set differently on the ranks
# (mpirun's application contexts): a load goes in place only where every rank
# does, so a resume with rank 0 "on" and rank 1 "off" is held on both, says
# so, and trains the same steps as a resume with "off" everywhere.
set -u
hsr=$1
t=$(mktemp -d "${TMPDIR:-/tmp}/hsr-inplace.XXXXXX")
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_in_place_agree: $*"; exit 1; }
mpi=(timeout 120 mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
tr="train --steps 6 --save-every 3 --no-progress --strategy fsdp"
"${mpi[@]}" -np 2 "$hsr" $tr --steps 3 --ckpt "$t/a" >"$t/a.out" 2>&1 || { cat "$t/a.out"; fail "the first run failed"; }
resume() { # NAME VALUE0 VALUE1
  "${mpi[@]}" -np 1 env HSR_CKPT_IN_PLACE="$2" "$hsr" $tr --ckpt "$t/$1" --resume "$t/a/step-00000003" --log "$t/$1.jsonl" \
    : -np 1 env HSR_CKPT_IN_PLACE="$3" "$hsr" $tr --ckpt "$t/$1" --resume "$t/a/step-00000003" --log "$t/$1.jsonl" \
    >"$t/$1.out" 2>&1 || { cat "$t/$1.out"; fail "$1 (HSR_CKPT_IN_PLACE $2 / $3) failed"; }
}
resume mixed on off
resume held off off
grep -q '^resume: .*(one read, held)$' "$t/mixed.out" ||
  fail "on / off: the resume is not held on every rank: $(grep '^resume:' "$t/mixed.out")"
n=$(grep -c '"loss"' "$t/held.jsonl")
[ "$n" -ge 3 ] || fail "the held resume logged $n steps (want 3)"
diff <(grep -o '"loss": *[0-9.e+-]*' "$t/mixed.jsonl") <(grep -o '"loss": *[0-9.e+-]*' "$t/held.jsonl") >/dev/null ||
  fail "on / off trains other losses than off / off"
echo "ckpt_in_place_agree: ok ($(grep '^resume:' "$t/mixed.out" | sed 's/.*(//; s/)$//'))"
