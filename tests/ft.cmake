# ft/ (replica groups that train on across failures): the engine's side
# (outer reduction, installing a peer's state) on 2 ranks; the quorum's rules (unit).
hsr_add_unit(test_ft_quorum test_ft_quorum.c)
set_tests_properties(test_ft_quorum PROPERTIES LABELS ft)
hsr_add_program(mr_outer mr_outer.c)
hsr_add_mpi_test(NAME ft_outer_2 NP 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_outer> LABELS ft)

# The replica groups for real (tests/ft/ft.sh): an etcd of their own on
# loopback, groups of 2 ranks, faults through HSR_FAULT, every run checked
# against the single-rank reference with the live replicas of each step.
hsr_add_program(ft_check ft_check.c)
foreach(s equiv kill_heal kill_allreduce kill_healer kill_healed stop refuse coord3 coord_away resume hsr_run crash_restart
          sim_device sim_offload)
  add_test(NAME ft_${s} COMMAND ${CMAKE_SOURCE_DIR}/tests/ft/ft.sh ${s})
  set_tests_properties(ft_${s} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "mpi;ft" RESOURCE_LOCK ft
                       ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR}")
endforeach()

# A SIGKILLed coordinator's data folder reaped by the next coordinator on the host.
add_test(NAME ft_coord_reap COMMAND ${CMAKE_SOURCE_DIR}/tests/ft/coord_reap.sh $<TARGET_FILE:hsr_cli>)
set_tests_properties(ft_coord_reap PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS ft)

# A group holding the token refuses a coordinator that does not check tokens.
add_test(NAME ft_coord_noauth COMMAND ${CMAKE_SOURCE_DIR}/tests/ft/coord_noauth.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(ft_coord_noauth PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "mpi;ft"
                     ENVIRONMENT "HSR_BOOT_TIMEOUT=60;OPENBLAS_NUM_THREADS=1")

# The fault matrix of replica groups (tests/faults/groups.sh): every rank of a
# group SIGKILLed from outside, one rank stopped past the timeout.
foreach(s kill-all-step stop-rank1-step)
  add_test(NAME fault_group_${s} COMMAND ${CMAKE_SOURCE_DIR}/tests/faults/groups.sh --only "^${s}$" --timeout 4)
  set_tests_properties(fault_group_${s} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "mpi;fault;ft"
                       RESOURCE_LOCK ft ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR}")
endforeach()
set_property(TEST ft_sim_device ft_sim_offload APPEND PROPERTY LABELS sim)

# The control plane at 32 groups (hsr bench ft, simulated leaders against a real
# coordinator): one group killed, restarted with --join, one stopped past the
# timeout; --check asserts the outcomes (the same steps everywhere, the dead
# named, the joiner admitted), not the timings.
add_test(NAME ft_sim COMMAND $<TARGET_FILE:hsr_cli> bench ft --groups 32 --steps 8 --step-time 0.2 --timeout 10
                             --kill 1@2 --restart 1@1 --stop 5:9 --check)
set_tests_properties(ft_sim PROPERTIES TIMEOUT 120 LABELS ft RESOURCE_LOCK ft)
# Groups killed inside a step's commit exchange, once their vectors are given: the groups with smaller ids
# commit the step through the exchange, the others are in doubt and commit it in the coordinator (a vote on
# the next step proves it); the next step drops the dead. --check: every survivor committed the same steps.
add_test(NAME ft_sim_exchange COMMAND $<TARGET_FILE:hsr_cli> bench ft --groups 16 --steps 8 --step-time 0.2
                                      --timeout 10 --kill 2@4 --kill-in-exchange --check)
set_tests_properties(ft_sim_exchange PROPERTIES TIMEOUT 120 LABELS ft RESOURCE_LOCK ft)
# The decider killed: group 0, the smallest participant, decides every vote; killed at step 3, the next
# participant whose predecessors are gone takes over (once its record goes with its lease) and writes the
# decision; group 0 restarted with --join is admitted (40 steps: the takeover takes a lease, 5 s, and the joiner
# must find groups still running). --check: the same steps everywhere, 0 named by all.
add_test(NAME ft_sim_decider COMMAND $<TARGET_FILE:hsr_cli> bench ft --groups 16 --steps 40 --step-time 0.2
                                     --timeout 10 --kill 1@3 --kill-decider --restart 1@1 --check)
set_tests_properties(ft_sim_decider PROPERTIES TIMEOUT 120 LABELS ft RESOURCE_LOCK ft)
