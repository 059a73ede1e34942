# Seeing the schedule: ledger prediction vs measurement, the trace of a real
# hsr train run, the wrap diagnostic, hsr bench step.
hsr_add_unit(test_sched test_sched.c)
hsr_add_program(mr_sched mr_sched.c)
hsr_add_mpi_test(NAME sched_ledger_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_sched> ledger
  strategy=fsdp,S=4,reshard=full,prefetch=0
  strategy=fsdp,S=4,reshard=full,prefetch=1
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=2
  strategy=fsdp,S=4,reshard=none,prefetch=1
  strategy=fsdp,S=4,reshard=partial:2,prefetch=2,root=1
  strategy=fsdp,S=4,reshard=partial:2,prefetch=1,micro=2,sync=none
  strategy=fsdp,S=4,reshard=full,prefetch=1,wrap=linear
  strategy=fsdp,S=4,reshard=full,prefetch=1,pstep=1
  strategy=hybrid,S=2,reshard=partial:2,prefetch=2,pstep=1,micro=2,sync=rs_only
  strategy=fsdp,S=4,pdt=bf16,rdt=bf16,reshard=partial:2,prefetch=1
  strategy=hybrid,S=2,reshard=full,prefetch=1,micro=2,sync=rs_only
  strategy=hybrid,S=2,reshard=partial:2,prefetch=2,micro=2,sync=full,rdt=bf16
  strategy=zero1,S=4
  strategy=zero2,S=2,R=2,micro=2,sync=rs_only
  strategy=ddp
  # the outer shard: pieces of 1/(S R), the f32 master inside the shard or bf16 beside it
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1
  strategy=hybrid,S=2,outer=optim,reshard=partial:2,prefetch=2,pdt=bf16,micro=2,sync=rs_only
  strategy=hybrid,S=2,outer=optim,reshard=none,pdt=bf16,rdt=bf16,micro=2,sync=none
  # bf16 without it: every gather's input a transient copy cast from the master
  strategy=hybrid,S=2,reshard=full,prefetch=2,pdt=bf16)
# On the sim device with offload optim: the host categories (master, m, v,
# the accumulator and the staging in pinned host memory) and the device's
# (the parameter shard beside the transients) predicted to the byte.
hsr_add_mpi_test(NAME sched_ledger_sim_4 NP 4 NODES 2 LABELS sim ENV OPENBLAS_NUM_THREADS=1 HSR_SIM_CHECK=1 COMMAND
  $<TARGET_FILE:mr_sched> ledger
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,off=optim
  device=sim,strategy=fsdp,S=4,reshard=partial:2,prefetch=2,pstep=1,pdt=bf16,off=optim
  device=sim,strategy=hybrid,S=2,reshard=partial:2,prefetch=2,micro=2,sync=full,rdt=bf16,pdt=bf16,off=optim
  device=sim,strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1,off=optim
  device=sim,strategy=zero2,S=2,R=2,off=optim
  device=sim,strategy=ddp,pdt=bf16,off=optim
  device=sim,strategy=hybrid,S=2,outer=optim,reshard=partial:2,prefetch=2,pdt=bf16,micro=2,sync=rs_only,off=optim)
hsr_add_mpi_test(NAME sched_ledger_8 NP 8 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_sched> ledger
  strategy=hybrid,S=4,R=2,reshard=partial:2,prefetch=2,micro=2,sync=rs_only
  strategy=hybrid,S=4,R=2,reshard=full,prefetch=1,pdt=bf16
  strategy=hybrid,S=4,R=2,outer=optim,reshard=full,prefetch=1,pdt=bf16
  strategy=hybrid,S=2,R=4,outer=optim,reshard=partial:2,prefetch=1,micro=2,sync=full)
# The engine's own gathers of a steady-state step (trace order: unit/group)
# against hand-written expectations; the model is a root unit wrapping blk0..blk2.
hsr_add_mpi_test(NAME sched_events_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_sched> events
  ${CMAKE_BINARY_DIR}/sched_events_4.json
  # partial:2: forward from the shard group, backward from the partial group; the root stays full
  strategy=fsdp,S=4,reshard=partial:2,prefetch=1
  "root/shard blk0/shard blk1/shard blk2/shard blk2/partial blk1/partial blk0/partial"
  # the root follows reshard full (root=1): gathered again for its backward, first
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=2,root=1
  "root/shard blk0/shard blk1/shard blk2/shard root/shard blk2/shard blk1/shard blk0/shard"
  # step-end prefetch: the next step's root gather is issued by (and counted in) step 2
  strategy=hybrid,S=2,reshard=partial:2,prefetch=1,pstep=1
  "blk0/shard blk1/shard blk2/shard blk2/partial blk1/partial blk0/partial root/shard"
  # a one-rank shard group: local copies, no collective
  strategy=hybrid,S=1,R=4,reshard=full,prefetch=1
  "root/shard(copy) blk0/shard(copy) blk1/shard(copy) blk2/shard(copy) blk2/shard(copy) blk1/shard(copy) blk0/shard(copy)"
  # zero2: no gathers in forward or backward; the step re-gathers every unit
  strategy=zero2,S=2,R=2
  "root/shard blk0/shard blk1/shard blk2/shard"
  # the outer shard: the step gathers every unit's shard back over the replicate group, the next
  # forward's first unit (the root) first; the step-end gather of the root in the shard group is
  # posted right after it and completes last
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1
  "blk0/shard blk1/shard blk2/shard blk2/shard blk1/shard blk0/shard root/replicate blk0/replicate blk1/replicate blk2/replicate root/shard")
add_test(NAME sched_trace_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/sched_check.sh trace ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
add_test(NAME sched_wrap_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/sched_check.sh wrap ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(sched_trace_4 sched_wrap_4 PROPERTIES TIMEOUT 180 ENVIRONMENT "HSR_BOOT_TIMEOUT=120;OPENBLAS_NUM_THREADS=1")
add_test(NAME train_bad_wrap COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: block, linear"
         $<TARGET_FILE:hsr_cli> train --wrap layer)
# hsr bench step: a short real run on 4 ranks (table + JSON with every configuration), bad input.
add_test(NAME bench_step_4 COMMAND ${CMAKE_SOURCE_DIR}/tests/sched_check.sh bench ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(bench_step_4 PROPERTIES TIMEOUT 180 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
add_test(NAME bench_step_bad_reshard COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: full, none, partial:K"
         $<TARGET_FILE:hsr_cli> bench step --reshard half)
add_test(NAME bench_step_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr bench step"
         $<TARGET_FILE:hsr_cli> bench step --help)
# Every unit's lifecycle in a steady-state step, from the engine's trace: gathers
# posted (+unit/group), completed (=unit), resharded (-unit: nothing kept, ~unit:
# its 1/K slice), released after backward (!unit), and the most units alive.
# Written by hand from the rules (runtime/sched/schedule.h), for every reshard policy,
# prefetch depth 0/1/2 and live cap; the model is a root unit wrapping blk0..blk2,
# the root kept full after forward unless root=1.
hsr_add_mpi_test(NAME sched_life_4 NP 4 NODES 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_sched> life
  ${CMAKE_BINARY_DIR}/sched_life_4.json
  # no prefetch: each unit is gathered by its own begin call; at most the root and one block
  strategy=fsdp,S=4,reshard=full,prefetch=0
  "+root/shard =root +blk0/shard =blk0 -blk0 +blk1/shard =blk1 -blk1 +blk2/shard =blk2 -blk2 +blk2/shard =blk2 !blk2 +blk1/shard =blk1 !blk1 +blk0/shard =blk0 !blk0 !root"
  2
  # depth 1: the next unit is posted before the current one's compute
  strategy=fsdp,S=4,reshard=full,prefetch=1
  "+root/shard =root +blk0/shard =blk0 +blk1/shard -blk0 =blk1 +blk2/shard -blk1 =blk2 -blk2 +blk2/shard =blk2 +blk1/shard !blk2 =blk1 +blk0/shard !blk1 =blk0 !blk0 !root"
  3
  # depth 2, no cap: two ahead; backward from the root has nothing before it
  strategy=fsdp,S=4,reshard=full,prefetch=2
  "+root/shard =root +blk0/shard +blk1/shard =blk0 +blk2/shard -blk0 =blk1 -blk1 =blk2 -blk2 +blk2/shard =blk2 +blk1/shard +blk0/shard !blk2 =blk1 !blk1 =blk0 !blk0 !root"
  4
  # depth 2, cap 3: the cap stops the second unit ahead while three are alive
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=3
  "+root/shard =root +blk0/shard +blk1/shard =blk0 -blk0 =blk1 +blk2/shard -blk1 =blk2 -blk2 +blk2/shard =blk2 +blk1/shard !blk2 =blk1 +blk0/shard !blk1 =blk0 !blk0 !root"
  3
  # depth 2, cap 2: the root kept full holds one slot, so only the root's own prefetch fits
  strategy=fsdp,S=4,reshard=full,prefetch=2,live=2
  "+root/shard =root +blk0/shard =blk0 -blk0 +blk1/shard =blk1 -blk1 +blk2/shard =blk2 -blk2 +blk2/shard =blk2 !blk2 +blk1/shard =blk1 !blk1 +blk0/shard =blk0 !blk0 !root"
  2
  # reshard none: gathered once in forward, released after backward, no backward gathers
  strategy=fsdp,S=4,reshard=none,prefetch=1
  "+root/shard =root +blk0/shard =blk0 +blk1/shard =blk1 +blk2/shard =blk2 !blk2 !blk1 !blk0 !root"
  4
  # partial:2: forward keeps a 1/2 slice; backward gathers (and prefetches) from the partial group
  strategy=fsdp,S=4,reshard=partial:2,prefetch=1
  "+root/shard =root +blk0/shard =blk0 +blk1/shard ~blk0 =blk1 +blk2/shard ~blk1 =blk2 ~blk2 +blk2/partial =blk2 +blk1/partial !blk2 =blk1 +blk0/partial !blk1 =blk0 !blk0 !root"
  3
  # partial:2 with the root resharded too (root=1), depth 2 under cap 2
  strategy=fsdp,S=4,reshard=partial:2,prefetch=2,live=2,root=1
  "+root/shard =root +blk0/shard =blk0 ~blk0 +blk1/shard =blk1 ~blk1 +blk2/shard =blk2 ~blk2 ~root +root/partial =root +blk2/partial =blk2 !blk2 +blk1/partial =blk1 !blk1 +blk0/partial =blk0 !blk0 !root"
  2
  # step-end prefetch: the root's gather is posted under the optimizer and completes before the step returns
  strategy=fsdp,S=4,reshard=full,prefetch=1,pstep=1
  "+blk0/shard =blk0 +blk1/shard -blk0 =blk1 +blk2/shard -blk1 =blk2 -blk2 +blk2/shard =blk2 +blk1/shard !blk2 =blk1 +blk0/shard !blk1 =blk0 !blk0 !root +root/shard =root"
  3
  # the outer shard: the forward and backward of reshard full, then the step's gathers over R of
  # every unit's shard (posted after each update, waited for in unit order; nothing more alive)
  strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1
  "+root/shard =root +blk0/shard =blk0 +blk1/shard -blk0 =blk1 +blk2/shard -blk1 =blk2 -blk2 +blk2/shard =blk2 +blk1/shard !blk2 =blk1 +blk0/shard !blk1 =blk0 !blk0 !root =root/replicate =blk0/replicate =blk1/replicate =blk2/replicate"
  3
  # a one-rank shard group: local copies stand in for the gathers
  strategy=hybrid,S=1,R=4,reshard=full,prefetch=1
  "+root/shard =root(copy) +blk0/shard =blk0(copy) +blk1/shard -blk0 =blk1(copy) +blk2/shard -blk1 =blk2(copy) -blk2 +blk2/shard =blk2(copy) +blk1/shard !blk2 =blk1(copy) +blk0/shard !blk1 =blk0(copy) !blk0 !root"
  3)
