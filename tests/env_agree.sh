#!/usr/bin/env bash
# env_agree.sh HSR: the variables that decide what every rank of a collective
# runs (HSR_ALGO_ALLREDUCE, HSR_ALGO_ALLREDUCE_RD_MAX, HSR_UCX_CHUNK,
# HSR_ALGO_TWO_LEVEL, HSR_UCX_PEER_ERRORS, HSR_SIM_NODES) set differently on
# different ranks (mpirun's application contexts, each with its own
# environment): the bootstrap refuses the job with one line naming the
# variable, both ranks and both values, before any work (hsr info prints no
# table); the same value spelled two ways (RING, ring; 1M, 1048576) runs.
set -u
hsr=$1
fail() { echo "env_agree: $*"; exit 1; }
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
two() { # VAR VALUE0 VALUE1 (a value "-" leaves it unset on that rank)
  local a=() b=()
  [ "$2" = - ] || a=("$1=$2")
  [ "$3" = - ] || b=("$1=$3")
  timeout 60 "${mpi[@]}" -np 1 env "${a[@]}" "$hsr" info : -np 2 env "${b[@]}" "$hsr" info 2>&1
}
for c in "HSR_ALGO_ALLREDUCE ring rd" "HSR_ALGO_ALLREDUCE_RD_MAX 64K 1M" "HSR_UCX_CHUNK - 64K" \
         "HSR_ALGO_TWO_LEVEL off -" "HSR_UCX_PEER_ERRORS on off" "HSR_SIM_NODES 1 3"; do
  set -- $c
  out=$(two "$1" "$2" "$3"); rc=$?
  [ "$rc" != 0 ] || fail "$1 differing: exit 0: $out"
  n=$(grep -c "^hsr info: HSR_ERR_MISMATCH: $1 differs between ranks: rank 0 has" <<<"$out")
  [ "$n" = 1 ] || fail "$1 differing: $n lines naming it (want 1): $out"
  grep -q "rank 1 has" <<<"$out" || fail "$1: the message does not name rank 1: $out"
  ! grep -q "^rank .*size" <<<"$out" || fail "$1: hsr info ran despite the mismatch: $out"
  echo "env_agree: $1 $2 / $3: refused once: $(grep "^hsr info" <<<"$out")"
done
out=$(two HSR_ALGO_ALLREDUCE RING ring) || fail "RING and ring refused: $out"
out=$(two HSR_UCX_CHUNK 1M 1048576) || fail "1M and 1048576 refused: $out"
grep -q "^rank .*size" <<<"$out" || fail "hsr info printed no table: $out"
echo "env_agree: ok"
