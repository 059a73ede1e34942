#!/usr/bin/env bash
# ckpt_bad_input.sh HSR_RUN HSR: one exit code per kind of bad checkpoint,
# whichever command reads it. Each damaged copy of one checkpoint goes
# through hsr ckpt inspect, verify, export and hsr train --resume (on 2
# ranks): every command must exit with the class's code (2: the manifest is
# not valid input; 1: the data cannot be read back), print the same reason,
# and do no work (no export file, no training step). The resume's message is
# printed once for the job, with no rank named twice.
set -u
run=$1; hsr=$2
t=$(mktemp -d /tmp/hsr-ckpt-bad-input-XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_bad_input: $*"; exit 1; }
train="train --layers 2 --dim 16 --classes 4 --batch 16 --no-progress"

"$hsr" $train --steps 2 --ckpt "$t/ok" >"$t/ok.out" 2>&1 || { cat "$t/ok.out"; fail "the run failed"; }
step=$(cat "$t/ok/latest")

# The manifest's own crc32 written again after an edit (a well-formed manifest of another kind).
recrc() {
  python3 - "$1" <<'PY'
import sys, zlib, re
p = sys.argv[1]; s = open(p).read()
z = re.sub(r'"manifest_crc32":\t"[0-9a-f]{8}"', '"manifest_crc32":\t"00000000"', s)
open(p, 'w').write(z.replace('"00000000"', '"%08x"' % (zlib.crc32(z.encode()) & 0xffffffff)))
PY
}

# variant  code  reason (grep -E)  how to damage it (on $m, the manifest, or $d, the first data file)
cases=(
  "nonfinite|2|optimizer.groups\[0\].lr is not a finite number|sed -i '0,/\"lr\":\t*[0-9.e-]*/s//\"lr\":\t1e999/' \$m"
  "crc|2|the manifest is corrupted|python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,\"rb\").read()); b[200]^=1; open(p,\"wb\").write(b)' \$m"
  "newer|2|format version 3 is newer than this hsr reads|sed -i 's/\"format_version\":\t2/\"format_version\":\t3/' \$m && recrc \$m"
  "layout|2|unit 0: shard_len 1, its layout rebuilt on 1 shards makes|sed -i '0,/\"shard_len\":\t*[0-9]*/s//\"shard_len\":\t1/' \$m && recrc \$m"
  "data|1|block 0 .* has crc32 .*the manifest records|python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,\"rb\").read()); b[7]^=1; open(p,\"wb\").write(b)' \$d"
)
n=0
for c in "${cases[@]}"; do
  IFS='|' read -r name want re how <<<"$c"
  cp -r "$t/ok" "$t/$name"
  m="$t/$name/$step/manifest.json" d=$(ls "$t/$name/$step"/data-* | head -1)
  eval "$how" || fail "$name: could not damage the copy"
  for cmd in inspect verify export resume; do
    o="$t/$name.$cmd.out"
    case $cmd in
      inspect | verify) timeout 60 "$hsr" ckpt $cmd "$t/$name" >"$o" 2>&1 ;;
      export) timeout 60 "$hsr" ckpt export "$t/$name" --safetensors "$t/$name.st" >"$o" 2>&1 ;;
      resume) timeout 120 "$run" -n 2 -- "$hsr" $train --steps 4 --ckpt "$t/$name" --resume latest >"$o" 2>&1 ;;
    esac
    rc=$?
    [ "$rc" = "$want" ] || { cat "$o"; fail "$name: hsr $cmd exited $rc, the class of this input is $want"; }
    k=$(grep -cE -- "$re" "$o")
    [ "$k" = 1 ] || { cat "$o"; fail "$name: hsr $cmd printed the reason $k times (once for the job)"; }
    ! grep -q "rank [0-9]*: rank " "$o" || { cat "$o"; fail "$name: hsr $cmd named a rank twice"; }
    [ ! -e "$t/$name.st" ] || fail "$name: a failed export left $t/$name.st"
    ! grep -qE '^(\[rank [0-9]+\] )?(checkpoint: step|loss )' "$o" || { cat "$o"; fail "$name: hsr $cmd trained or saved"; }
    n=$((n + 1))
  done
done
echo "ckpt_bad_input: $n cases: each damaged checkpoint gives one exit code and one message from every command"
