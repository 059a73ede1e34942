#!/usr/bin/env bash
# Stops the Slurm daemons that slurm-up.sh started in DIR and removes DIR
# (its state, spool and logs).
dir=$1
for f in "$dir/d.pid" "$dir/ctld.pid"; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); kill "$pid" 2>/dev/null
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$f"
done
grep -qs "^ClusterName=hsrtest$" "$dir/slurm.conf" && rm -rf "$dir" # only what slurm-up.sh made
exit 0
