# Faults: a subset of the fault matrix (tests/faults/matrix.sh) as tests, with
# HSR_COMM_TIMEOUT=4: every survivor names the victim (one of a lost node's
# ranks), the job exits non-zero within the timeout + 15 s (a `timeout` kills
# it later, failing the test), and leaves no hsr file in /dev/shm and no
# process; a rank slower than the others by less than the timeout fails
# nothing; when the launcher itself dies (Ctrl-C on a terminal, twice, a
# process-group SIGTERM, SIGKILL to hsr-run or to mpirun) every rank has ended
# within 10 s by the path each case takes (its lifeline's line); a rank killed
# in the bootstrap, the last step, the final barrier or the teardown, with UCX
# peer errors on and off (-peoff), is named by every survivor, and no healthy
# rank is blamed. The whole matrix: docs/faults.md.
set(_fm ${CMAKE_SOURCE_DIR}/tests/faults/matrix.sh)
foreach(s train-kill-all_gather-mpirun-2n bench-kill-all_gather-mpirun-2n train-stop-reduce_scatter-mpirun-2n
          train-kill-step-mpirun-1n train-kill-ckpt_save-mpirun-2n train-kill-ckpt_async-mpirun-2n
          train-stop-ckpt_async-mpirun-1n train-sleep:2-all_gather-mpirun-2n train-kill-ckpt_last-mpirun-2n
          train-kill-ckpt_done-mpirun-2n train-kill-boot-mpirun-1n train-kill-last_step-mpirun-2n
          train-kill-final-mpirun-2n-peoff train-kill-teardown-mpirun-1n train-kill-teardown-mpirun-2n
          train-kill-ckpt_done-mpirun-2n-peoff
          train-killnode-all_gather-mpirun-2n train-killnode-all_gather-mpirun-2n-peoff launcher-ctrlc-mpirun-2n launcher-ctrlc2-mpirun-2n
          launcher-pgterm-mpirun-2n launcher-kill9-mpirun-2n launcher-kill9launcher-mpirun-2n)
  string(REPLACE ":" "" _n "fault_${s}")
  add_test(NAME ${_n} COMMAND ${_fm} --only "^${s}$" --timeout 4)
  set_tests_properties(${_n} PROPERTIES TIMEOUT 90 LABELS "mpi;fault" ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR}")
endforeach()
# at HSR_COMM_TIMEOUT's floor, a rank 0.5 s late is accused of nothing
add_test(NAME fault_floor_train-sleep0.5-all_gather-mpirun-2n COMMAND ${_fm} --only "^train-sleep:0.5-all_gather-mpirun-2n$" --timeout 1)
set_tests_properties(fault_floor_train-sleep0.5-all_gather-mpirun-2n PROPERTIES TIMEOUT 90 LABELS "mpi;fault"
                     ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR}")
# (a survivor whose teardown fence fails before it learns of the death names
# the one rank of its host whose process is gone: launch/roll.c)
# (a rank's death does not end an srun step: launch/hold.c holds its PMIx
# connection, so the survivors of a lost node with UCX peer errors off live to
# name it at the timeout, and those of a rank killed in the bootstrap name it
# from /proc and the pids the peers put)
foreach(s train-stop-all_reduce-srun-2n train-kill-reduce_scatter-srun-1n train-killnode-all_reduce-srun-2n
          launcher-kill9-srun-2n train-kill-ckpt_done-srun-2n train-kill-final-srun-2n-peoff
          train-kill-teardown-srun-2n train-kill-boot-srun-1n train-kill-boot-srun-2n train-kill-boot-srun-2n-peoff
          train-killnode-all_gather-srun-2n-peoff train-killnode-all_reduce-srun-2n-peoff)
  string(REPLACE ":" "" _n "fault_${s}")
  add_test(NAME ${_n} COMMAND ${_fm} --only "^${s}$" --timeout 4)
  set_tests_properties(${_n} PROPERTIES TIMEOUT 90 LABELS "slurm;fault" FIXTURES_REQUIRED slurm RESOURCE_LOCK slurm
                       ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR};SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf")
endforeach()
# The kind of the verdict, so which path saw the death first: the node-local
# exit watch (a victim reaped at once or a zombie for longer than the
# timeout), its notice on the other node, UCX peer errors for a victim alone
# on its node, SIGSTOP; "stopped responding" only where nothing knew more.
add_test(NAME fault_verdict COMMAND ${CMAKE_SOURCE_DIR}/tests/faults/verdict.sh --timeout 4)
set_tests_properties(fault_verdict PROPERTIES TIMEOUT 300 LABELS "mpi;fault" ENVIRONMENT "HSR_BUILD=${CMAKE_BINARY_DIR}")
# a rank that crashes reports its signal, thread and caller (common/crash.c); its node peer names it
add_test(NAME crash_report COMMAND ${CMAKE_SOURCE_DIR}/tests/crash_report.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(crash_report PROPERTIES TIMEOUT 120 LABELS "mpi;fault" ENVIRONMENT "HSR_BOOT_TIMEOUT=120")
