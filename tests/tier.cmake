# The second tier on one host (hsr-run --emulate-net): the namespace fixture
# (made, shaped, removed on every exit path; skipped with 77 where not
# permitted), hsr's UCX traffic on TCP through it under mpirun and srun, a
# shaped cross-node all-gather measurably slower than the intra-node one in
# the same run; hsr-run's bounds on -n.
set(_ok ${CMAKE_SOURCE_DIR}/tests/netns_ok.sh)
set(_x ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh)
set(_hsr $<TARGET_FILE:hsr_cli>)

add_test(NAME tier_emulate_fixture COMMAND ${CMAKE_SOURCE_DIR}/tests/emulate_net.sh ${HSR_RUN})
set_tests_properties(tier_emulate_fixture PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "mpi;netns")
# the counters on an emulated network, and every cross-node endpoint on TCP over loopback
add_test(NAME tier_emulate_counters COMMAND ${_ok} ${_x} 0 "cross-node\\): tcp/lo"
         ${HSR_RUN} --launcher mpirun --emulate-net 1gbit --nodes 2 -n 4 -- $<TARGET_FILE:mr_counters> --split 2 --counts 7,20001)
set_tests_properties(tier_emulate_counters PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "mpi;netns"
                     ENVIRONMENT "HSR_BOOT_TIMEOUT=60;HSR_LOG=info;HSR_UCX_CHUNK=4K")
# the shaped link is slower: the replicate groups' all-gather (across the two
# nodes) against the shard groups' (inside one), a ratio of the same run
add_test(NAME tier_emulate_ratio COMMAND ${_ok} sh -c
  "${HSR_RUN} --emulate-net 1gbit --nodes 2 -n 4 -- ${_hsr} bench all_gather --group shard,replicate -b 1M -e 1M -n 3 -w 1 -J ${CMAKE_BINARY_DIR}/tier_ratio.json >/dev/null && jq -e '
    .hsr.emulated_net == \"1gbit\" and .results[0].hsr.group == \"shard\" and .results[1].hsr.group == \"replicate\"
    and .results[1].out_of_place.time > 2 * .results[0].out_of_place.time
    and .results[1].in_place.time > 2 * .results[0].in_place.time
    and .results[1].hsr.out_of_place.fabric_bytes_per_op > 0 and .results[0].hsr.out_of_place.fabric_bytes_per_op == 0' ${CMAKE_BINARY_DIR}/tier_ratio.json")
set_tests_properties(tier_emulate_ratio PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "mpi;netns")
# under srun the tasks start outside the namespace (slurmstepd serves PMIx over TCP loopback);
# hsr enters it after joining the job
add_test(NAME tier_emulate_srun COMMAND ${_ok} ${_x} 0 "entered network namespace hsr-"
         ${HSR_RUN} --launcher srun --emulate-net 1gbit --nodes 2 -n 4 -- $<TARGET_FILE:mr_counters> --split 2 --counts 7,1000)
set_tests_properties(tier_emulate_srun PROPERTIES FIXTURES_REQUIRED slurm RESOURCE_LOCK slurm TIMEOUT 180
                     SKIP_RETURN_CODE 77 LABELS "slurm;netns"
                     ENVIRONMENT "SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf;HSR_BOOT_TIMEOUT=60;HSR_LOG=info")

# hsr-run: absurd -n refused up front (exit 2, the valid range); --emulate-net's rate checked
foreach(bad "-n;99999999999" "-n;5000" "-n;0x10" "--emulate-net;fast" "--emulate-net;0gbit" "--emulate-net")
  string(REPLACE ";" "_" _n "${bad}")
  add_test(NAME hsr_run_bad${_n} COMMAND ${_x} 2 "" ${HSR_RUN} ${bad} -- true)
endforeach()
add_test(NAME hsr_run_max_ranks COMMAND ${_x} 2 "from 1 to 4096" ${HSR_RUN} -n 99999999999 -- true)
add_test(NAME hsr_run_dry_emulate COMMAND ${_x} 0
         "ip netns exec hsr-[0-9]+-X+ mpirun -n 4 --mca orte_tmpdir_base /tmp/hsr-run"
         ${HSR_RUN} --launcher mpirun --emulate-net 200mbit --nodes 2 -n 4 --dry-run -- prog)
add_test(NAME hsr_run_dry_emulate_srun COMMAND ${_x} 0 "HSR_EMULATE_NET=1gbit HSR_EMULATE_NET_NS=hsr-[0-9]+-X+ srun --mpi=pmix -n 2 prog"
         ${HSR_RUN} --launcher srun --emulate-net 1gbit -n 2 --dry-run -- prog)

# hsr train --log / --json: calls, bytes sent, bytes received, fabric bytes and full buffers per step and group
add_test(NAME tier_train_comm COMMAND ${CMAKE_SOURCE_DIR}/tests/train_comm.sh ${HSR_RUN} ${_hsr} ${CMAKE_BINARY_DIR}/train_comm)
set_tests_properties(tier_train_comm PROPERTIES TIMEOUT 240 LABELS "mpi" ENVIRONMENT "HSR_BOOT_TIMEOUT=60")
