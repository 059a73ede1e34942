#!/usr/bin/env bash
# ckpt_export.sh HSR_RUN HSR: hsr ckpt export of a 2 x 2 run's checkpoint
# parses with an independent safetensors reader (tests/ckpt_read.py: json and
# struct only) and equals the run's master weights; hsr train --init of the
# file starts from exactly those weights (checked through a step at lr 0);
# a corrupted checkpoint exports nothing.
set -u
run=$1; hsr=$2
here=$(cd "$(dirname "$0")" && pwd)
py() { python3 "$here/ckpt_read.py" "$@"; }
t=$(mktemp -d /tmp/hsr-ckpt-export-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_export: $*"; exit 1; }
train="train --layers 2 --dim 24 --classes 6 --batch 32 --no-progress"

"$run" -n 4 --nodes 2 --launcher mpirun -- "$hsr" $train --steps 4 --ckpt "$t/A" >"$t/A.out" 2>&1 \
  || { cat "$t/A.out"; fail "the run failed"; }
"$hsr" ckpt export "$t/A" --safetensors "$t/m.safetensors" || fail "export failed"
py st-equal "$t/m.safetensors" "$t/A" || fail "the exported file does not parse or differ from the checkpoint"
"$hsr" $train --init "$t/m.safetensors" --steps 1 --lr 0 --ckpt "$t/I" >"$t/I.out" 2>&1 \
  || { cat "$t/I.out"; fail "--init of the exported file failed"; }
py st-equal "$t/m.safetensors" "$t/I" || fail "--init did not reproduce the exported weights"
f=$(ls "$t/A/step-00000004"/data-*-00001.bin)
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[7]^=1; open(p,'wb').write(b)" "$f"
out=$("$hsr" ckpt export "$t/A" --safetensors "$t/bad.safetensors" 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q corrupted <<<"$out" || { echo "$out"; fail "export of a corrupted checkpoint: exit $rc"; }
[ ! -e "$t/bad.safetensors" ] || fail "a failed export left a file"
echo "ckpt_export: ok"
