#!/usr/bin/env bash
# sim_detect.sh HSR_RUN MR_RUNTIME: every ordering HSR_SIM_DROP can leave out is
#   1. reported by the stream-order check (HSR_SIM_CHECK=1): the race's kind,
#      the buffer, and the two operations with their streams, and the run fails;
#   2. seen by the equivalence test when the check is off and delays are on
#      (the run fails with a difference from the reference, not a report).
set -u
run=$1 mr=$2
rc=0
fail() { echo "sim_detect: $*"; rc=1; }
cell=device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,clip=0.05
one=device=sim,strategy=fsdp,reshard=full,prefetch=1,clip=0.05
# drop, ranks, the two streams the report must name[, what the spec adds]
cases="gather_wait:4:compute:gather reduce_wait:4:reduce:compute pool_reuse:4:compute:reduce optim_wait:1:compute:reduce
  offload_wait:1:host:reduce:off=optim"
for c in $cases; do
  IFS=: read -r drop np s1 s2 extra <<<"$c"
  spec=$cell; [ "$np" = 1 ] && spec=$one
  [ -n "$extra" ] && spec=$spec,$extra
  launch=("$run" --launcher mpirun -n "$np"); [ "$np" -gt 1 ] && launch+=(--nodes 2)
  out=$(env OPENBLAS_NUM_THREADS=1 HSR_SIM_CHECK=1 HSR_SIM_DROP="$drop" "${launch[@]}" -- "$mr" equiv "$spec" 2>&1)
  st=$?
  line=$(grep -m1 'sim stream-order check' <<<"$out")
  if [ "$st" = 0 ]; then
    fail "$drop: the run passed with the check on"
  elif [ -z "$line" ]; then
    fail "$drop: no stream-order report; the run said: $(tail -3 <<<"$out")"
  elif ! grep -Eq "(read-after-write|write-after-read|write-after-write) race on [a-z_]+ of unit [0-9]+ '" <<<"$line" ||
    ! grep -q "on stream '$s1'" <<<"$line" || ! grep -q "on stream '$s2'" <<<"$line"; then
    fail "$drop: the report does not name the race, the buffer and streams '$s1' and '$s2': $line"
  else
    echo "sim_detect: $drop reported: ${line#*hsr error: }"
  fi
  out=$(env OPENBLAS_NUM_THREADS=1 HSR_SIM_CHECK=0 HSR_SIM_DELAY=1000:7 HSR_SIM_DROP="$drop" "${launch[@]}" -- "$mr" equiv \
    "$spec" 2>&1)
  st=$?
  if [ "$st" = 0 ]; then
    fail "$drop: with delays and no check, the equivalence test saw nothing"
  elif grep -q 'sim stream-order check' <<<"$out"; then
    fail "$drop: a report with the check off"
  elif ! grep -Eq 'FAIL: .*(differs|gradient norm|nan|loss)' <<<"$out"; then
    fail "$drop: the run failed, but not on a difference from the reference: $(grep -m2 FAIL <<<"$out")"
  else
    echo "sim_detect: $drop changes the result: $(grep -m1 -o 'FAIL: .*' <<<"$out" | cut -c1-200)"
  fi
done
[ "$rc" = 0 ] && echo "sim_detect: 5 orderings, each reported by name and each changing the result"
exit "$rc"
