#!/usr/bin/env bash
# train_comm.sh HSR_RUN HSR OUTDIR: hsr train's per-step, per-group counters
# (--log lines and the --json summary) on 4 ranks as 2 simulated nodes:
# calls, bytes sent, bytes received, fabric bytes and the full buffers are
# there for every group and op, agree with the call counts, and obey what
# the groups' placement implies (hand-derived below).
set -u
run=$1; hsr=$2; out=$3
mkdir -p "$out"
fail=0
check() { # FILE JQ-EXPR WHAT
  jq -e "$2" "$1" >/dev/null || { echo "FAIL: $3"; fail=1; }
}
# hybrid 2 x 2: shard groups inside a node (shared memory), replicate pairs across the nodes
"$run" -n 4 --nodes 2 -- "$hsr" train --steps 4 --shard 2 --no-progress --log "$out/h.jsonl" --json "$out/h.json" \
  >"$out/h.txt" || { echo "FAIL: hybrid run"; cat "$out/h.txt"; exit 1; }
jq -s . "$out/h.jsonl" >"$out/h.steps.json"
check "$out/h.steps.json" 'length == 4 and all(.[]; .comm | has("shard", "replicate", "partial"))' "log lines carry comm per group"
check "$out/h.steps.json" 'all(.[]; .comm[] | .[] | has("calls", "bytes_sent", "bytes_recv", "fabric_sent", "fabric_recv", "bytes_full"))' \
  "every op has the six counters"
check "$out/h.steps.json" 'all(.[]; . as $s | all(["shard", "replicate", "partial"][]; . as $g |
  all(["all_gather", "reduce_scatter", "all_reduce", "broadcast", "barrier"][]; $s.comm[$g][.].calls == $s.calls[$g][.])))' \
  "comm calls equal the calls object"
# shard groups of 2 on shared memory: an all-gather receives half its gathered buffer, a reduce-scatter
# sends half its input, nothing crosses a node
check "$out/h.steps.json" 'all(.[1:][]; .comm.shard.all_gather.calls > 0 and .comm.shard.all_gather.bytes_recv * 2 == .comm.shard.all_gather.bytes_full
  and .comm.shard.reduce_scatter.bytes_sent * 2 == .comm.shard.reduce_scatter.bytes_full
  and .comm.shard.total.fabric_sent == 0 and .comm.shard.total.fabric_recv == 0)' "shard counters (shared memory, S = 2)"
# replicate pairs span the nodes: an all-reduce of V bytes sends V (ring or recursive doubling at n = 2), all of it fabric
check "$out/h.steps.json" 'all(.[1:][]; .comm.replicate.all_reduce.calls > 0
  and .comm.replicate.all_reduce.bytes_sent == .comm.replicate.all_reduce.bytes_full
  and .comm.replicate.all_reduce.fabric_sent == .comm.replicate.all_reduce.bytes_sent
  and .comm.replicate.all_reduce.fabric_recv == .comm.replicate.all_reduce.bytes_recv)' "replicate counters (2 nodes)"
check "$out/h.steps.json" 'all(.[]; .comm.shard.total.bytes_full != .comm.shard.total.bytes_sent and .comm.shard.total.calls != .comm.shard.total.bytes_sent)' \
  "calls, bytes and full buffers are different numbers"
check "$out/h.json" '.comm_per_step.replicate.all_reduce.fabric_sent > 0 and .comm_per_step.shard.total.fabric_sent == 0
  and .fabric_bytes_per_step_all_ranks.shard == 0 and .fabric_bytes_per_step_all_ranks.replicate > 0
  and .fabric_bytes_per_step_all_ranks.total == .fabric_bytes_per_step_all_ranks.replicate' "--json summary per step"
grep -q "bytes across nodes per step, all ranks" "$out/h.txt" || { echo "FAIL: report line"; fail=1; }
# the same run with the outer shard: the replicate all-reduce becomes a reduce-scatter and (after AdamW)
# an all-gather over the pair, as many bytes across the nodes (up to the padding: the outer shard pads
# each unit to S x R x align elements instead of S x align, under 1% here), plus the norm's 8-byte
# all-reduce over R
"$run" -n 4 --nodes 2 -- "$hsr" train --steps 4 --shard 2 --outer-shard optim --no-progress --log "$out/o.jsonl" \
  --json "$out/o.json" >"$out/o.txt" || { echo "FAIL: outer-shard run"; cat "$out/o.txt"; exit 1; }
jq -s . "$out/o.jsonl" >"$out/o.steps.json"
grep -q "outer-shard optim" "$out/o.txt" || { echo "FAIL: the header does not say outer-shard optim"; fail=1; }
jq -e --slurpfile h "$out/h.steps.json" '. as $o | [range(1; length)] | all(. as $i | $o[$i].comm.replicate as $r |
  $h[0][$i].comm.replicate.all_reduce as $a | $r.reduce_scatter.calls > 0 and $r.all_gather.calls == $r.reduce_scatter.calls
  and $r.all_reduce.calls == 1 and $r.all_reduce.fabric_sent == 8
  and ($r.reduce_scatter.fabric_sent + $r.all_gather.fabric_sent - $a.fabric_sent) as $d | $d >= 0
  and $d <= 0.01 * $a.fabric_sent and $r.total.fabric_sent == $a.fabric_sent + $d + 8
  and $o[$i].comm.shard.total.fabric_sent == 0)' "$out/o.steps.json" \
  >/dev/null || { echo "FAIL: outer shard's fabric bytes per step (RS + AG over R = AR over R, + the norm's 8)"; fail=1; }
# persistent bytes per parameter x S, f32: 16 without (FSDP2: master, m, v, accumulator), with it the f32
# shard 4 + (master is in it) m, v, accumulator 12 / R = 6 (padding adds a little to both)
jq -e --slurpfile h "$out/h.json" '.persistent_bytes_per_param_times_S >= 10 and .persistent_bytes_per_param_times_S < 10.5
  and $h[0].persistent_bytes_per_param_times_S >= 16 and $h[0].persistent_bytes_per_param_times_S < 16.8' "$out/o.json" \
  >/dev/null || { echo "FAIL: persistent bytes per parameter x S: 16 without the outer shard, 4 + 12/R with it"; fail=1; }
# fsdp over both nodes with partial:2: the shard group crosses, the partial groups (one node each) do not
"$run" -n 4 --nodes 2 -- "$hsr" train --steps 3 --strategy fsdp --shard 4 --reshard partial:2 --no-progress \
  --log "$out/p.jsonl" >"$out/p.txt" || { echo "FAIL: partial run"; cat "$out/p.txt"; exit 1; }
jq -s . "$out/p.jsonl" >"$out/p.steps.json"
check "$out/p.steps.json" 'all(.[1:][]; .comm.partial.all_gather.calls > 0 and .comm.partial.total.fabric_sent == 0
  and .comm.shard.total.fabric_sent > 0 and .comm.shard.total.fabric_sent < .comm.shard.total.bytes_sent)' \
  "partial:2 stays in the node, the 4-rank shard group crosses (two-level: only the cross stage)"
[ "$fail" = 0 ] && echo "train_comm: ok"
exit $fail
