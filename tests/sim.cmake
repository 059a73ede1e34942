# The sim device (label sim): the engine's device path (three streams, gather
# events, deferred requests, release events, the reduce stream's norm word,
# collectives in stream order) on every commit, with the stream-order check on
# and seeded delays, against the single-rank reference. A host cell shares a
# `same=` tag with sim cells: the two paths are bitwise equal where their
# arithmetic order is the same (all of these cells).
set(_sim_env OPENBLAS_NUM_THREADS=1 HSR_SIM_CHECK=1 HSR_SIM_DELAY=200:11)
set(_c "clip=0.05")
hsr_add_mpi_test(NAME rt_sim_equiv_4 NP 4 NODES 2 LABELS sim ENV ${_sim_env} COMMAND $<TARGET_FILE:mr_runtime> equiv
  # 1 x 4: every reshard policy and prefetch depth, bitwise equal to the host path
  strategy=fsdp,S=4,reshard=full,prefetch=1,${_c},same=sf4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,${_c},twice=1,same=sf4
  device=sim,strategy=fsdp,S=4,reshard=none,prefetch=2,${_c},same=sf4
  device=sim,strategy=fsdp,S=4,reshard=partial:2,prefetch=0,root=1,${_c},same=sf4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=2,live=2,${_c},same=sf4
  # micro-batches in each sync mode, rs_only's deferred all-reduce
  device=sim,strategy=fsdp,S=4,reshard=full,micro=2,sync=full,${_c}
  device=sim,strategy=fsdp,S=4,reshard=none,micro=2,sync=rs_only,${_c}
  device=sim,strategy=hybrid,S=2,reshard=partial:2,micro=2,sync=none,prefetch=2,${_c}
  # 2 x 2 and 4 x 1: the replicate stage on the reduce stream, zero1/zero2/ddp
  device=sim,strategy=zero1,S=2,R=2,micro=2,sync=rs_only,${_c}
  device=sim,strategy=zero2,S=2,R=2,${_c}
  device=sim,strategy=ddp,micro=2,sync=none,${_c}
  # bf16 parameters and reductions; a one-rank shard group in bf16
  device=sim,strategy=hybrid,S=2,pdt=bf16,rdt=bf16,${_c}
  device=sim,strategy=hybrid,S=1,R=4,pdt=bf16,${_c}
  # the outer shard (HFSDP): its outer all-gather, the step-end prefetch, the norm over R
  device=sim,strategy=hybrid,S=2,outer=optim,reshard=full,prefetch=1,pstep=1,${_c}
  device=sim,strategy=hybrid,S=2,outer=optim,pdt=bf16,rdt=f32,micro=2,sync=rs_only,${_c})
# The GPT on sim against its single-rank reference (its kernels as sim tasks).
set(_g "clip=1")
hsr_add_mpi_test(NAME gpt_sim_equiv_4 NP 4 NODES 2 LABELS sim ENV ${_sim_env} COMMAND $<TARGET_FILE:mr_gpt> equiv
  strategy=fsdp,S=4,reshard=full,prefetch=1,${_g},same=sg4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,${_g},same=sg4
  device=sim,strategy=hybrid,S=2,reshard=partial:2,prefetch=2,micro=2,sync=none,${_g}
  device=sim,strategy=hybrid,S=2,outer=optim,reshard=none,${_g},val=1)
# Recompute on sim: the recomputed block's kernels queue on the compute
# stream inside the backward window; bitwise the host path's.
hsr_add_mpi_test(NAME gpt_sim_recompute_4 NP 4 NODES 2 LABELS sim ENV ${_sim_env} COMMAND $<TARGET_FILE:mr_gpt> equiv
  strategy=fsdp,S=4,reshard=full,prefetch=1,rc=full,${_g},same=sr4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,rc=full,${_g},same=sr4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=2,rc=selective,${_g},same=sr4
  device=sim,strategy=hybrid,S=2,reshard=partial:2,micro=2,rc=full,${_g})
# The llama on sim (its RMSNorm, SwiGLU and rotary kernels as sim tasks).
hsr_add_mpi_test(NAME llama_sim_equiv_4 NP 4 NODES 2 LABELS sim ENV ${_sim_env} COMMAND $<TARGET_FILE:mr_gpt> --llama
  equiv strategy=fsdp,S=4,reshard=full,prefetch=1,${_g},same=sl4
  device=sim,strategy=fsdp,S=4,reshard=full,prefetch=1,${_g},same=sl4
  device=sim,strategy=hybrid,S=2,reshard=partial:2,micro=2,sync=rs_only,${_g})
# One rank: the device path with no collective in it.
add_test(NAME rt_sim_equiv_1 COMMAND $<TARGET_FILE:mr_runtime> equiv
  device=sim,strategy=fsdp,reshard=full,prefetch=1,${_c},twice=1
  device=sim,strategy=ddp,micro=2,sync=none,${_c}
  device=sim,strategy=fsdp,pdt=bf16,rdt=bf16,${_c})
set_tests_properties(rt_sim_equiv_1 PROPERTIES LABELS sim TIMEOUT 150 ENVIRONMENT "${_sim_env}")
# Proof that it sees: each ordering the engine needs, left out by HSR_SIM_DROP,
# is reported by the stream-order check naming both operations and streams,
# and (check off, delays on) changes what the equivalence test sees.
add_test(NAME sim_detect COMMAND ${CMAKE_SOURCE_DIR}/tests/sim_detect.sh ${HSR_RUN} $<TARGET_FILE:mr_runtime>)
set_tests_properties(sim_detect PROPERTIES LABELS "sim;mpi" TIMEOUT 300 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# hsr train --device sim with checkpoints (async save, resumes on other meshes)
# and the GPT, bitwise against the host path.
add_test(NAME train_sim COMMAND ${CMAKE_SOURCE_DIR}/tests/train_sim.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(train_sim PROPERTIES LABELS "sim;mpi" TIMEOUT 300 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# The device itself: stream and event rules, copies, bounded waits, the arena,
# the check's reports, the kernels bitwise the host kind's.
hsr_add_unit(test_sim test_sim.c)
set_tests_properties(test_sim PROPERTIES LABELS sim TIMEOUT 60)
# hsr bench step on sim: the compute stream's thread holds each unit's time
# while the host runs ahead; the trace's spans are the device's (a forward
# that holds 5 ms spans at least 5 ms, where the host only queued it).
add_test(NAME bench_step_sim COMMAND ${CMAKE_SOURCE_DIR}/tests/sim_bench_step.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(bench_step_sim PROPERTIES LABELS "sim;mpi" TIMEOUT 180 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
# A dead peer named from inside a stream: a rank killed inside an all-gather
# on sim; every survivor names it, nothing crashes while the streams skip.
add_test(NAME sim_fault COMMAND ${CMAKE_SOURCE_DIR}/tests/sim_fault.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(sim_fault PROPERTIES LABELS "sim;mpi;fault" TIMEOUT 90 ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
