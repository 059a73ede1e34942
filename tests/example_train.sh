#!/usr/bin/env bash
# example_train.sh TRAIN_RUN HSR: examples/train_run.c trains through the
# training driver (tools/train/train.h) and is hsr train's job: the same
# settings give the same first and last loss, bit for bit, and the same
# --json fields; the loss falls; a bad argument exits 2 before any work.
set -u
prog=$1; hsr=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rc=0
fail() { echo "example_train: $*"; rc=1; }
"$prog" mlp 12 "$tmp/a.json" >"$tmp/a.out" 2>&1 || { cat "$tmp/a.out"; fail "train_run mlp 12 exited $?"; }
"$hsr" train --model mlp --steps 12 --layers 2 --dim 64 --batch 8 --lr 3e-3 --no-progress --json "$tmp/b.json" \
  >"$tmp/b.out" 2>&1 || { cat "$tmp/b.out"; fail "hsr train exited $?"; }
[ $rc = 0 ] || exit 1
python3 - "$tmp/a.json" "$tmp/b.json" <<'PY' || rc=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
if a["loss_first"] != b["loss_first"] or a["loss_last"] != b["loss_last"]:
    bad.append(f"losses differ: train_run {a['loss_first']} -> {a['loss_last']}, hsr train {b['loss_first']} -> {b['loss_last']}")
if not a["loss_last"] < a["loss_first"]:
    bad.append(f"the loss did not fall: {a['loss_first']} -> {a['loss_last']}")
if sorted(a) != sorted(b):
    bad.append(f"--json fields differ: {sorted(set(a) ^ set(b))}")
for m in bad:
    print("example_train:", m)
if not bad:
    print(f"example_train: train_run = hsr train: loss {a['loss_first']:.6f} -> {a['loss_last']:.6f}, {len(a)} fields")
sys.exit(1 if bad else 0)
PY
la=$(grep '^loss ' "$tmp/a.out" | sed 's/, [0-9.]* ms.*//'); lb=$(grep '^loss ' "$tmp/b.out" | sed 's/, [0-9.]* ms.*//')
[ -n "$la" ] && [ "$la" = "$lb" ] || fail "the loss lines differ: '$la' vs '$lb'"
"$prog" frob >"$tmp/c.out" 2>&1; c=$?
[ $c = 2 ] && grep -q "not one of mlp, gpt, llama" "$tmp/c.out" || fail "train_run frob: exit $c (want 2 naming the valid models)"
"$prog" mlp 0 >"$tmp/d.out" 2>&1; c=$?
[ $c = 2 ] && grep -q "STEPS '0'" "$tmp/d.out" || fail "train_run mlp 0: exit $c (want 2 naming STEPS)"
exit $rc
