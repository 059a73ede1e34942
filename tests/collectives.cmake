# collectives/: every op, dtype and buffer kind against a reference, on the
# shared-memory path (one node), the UCX path (simulated nodes) and splits.
hsr_add_unit(test_coll_kern test_coll_kern.c)
# every row of every host transport's table has the volume the tuner reads (common/coll_model.h)
hsr_add_unit(test_coll_model test_coll_model.c)
hsr_add_program(mr_coll mr_coll.c)
# Peer communicators (collectives/peer_internal.h) inside one job: the all-reduce's bits,
# point to point, and a member that skips a step named alone while the world goes on.
hsr_add_program(mr_peer mr_peer.c)
hsr_add_mpi_test(NAME coll_peer NP 3 COMMAND $<TARGET_FILE:mr_peer> TIMEOUT 120 LABELS ft)

hsr_add_mpi_test(NAME coll_world4 NP 4 COMMAND $<TARGET_FILE:mr_coll> --big)
hsr_add_mpi_test(NAME coll_world4_split2x2 NP 4 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,7 --concurrent)
hsr_add_mpi_test(NAME coll_world8_split4x2 NP 8 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 1,1000003 --dtypes f32)
hsr_add_mpi_test(NAME coll_world8_split2x4 NP 8 COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 7 --concurrent)
hsr_add_mpi_test(NAME coll_world4_inline NP 4 ENV HSR_PROGRESS=inline COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,1,7 --concurrent)
# Two simulated nodes: world and replicate groups cross nodes (UCX), shard groups stay inside (shm).
hsr_add_mpi_test(NAME coll_world4_sim2 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,1,7,100003 --concurrent)
hsr_add_mpi_test(NAME coll_world4_sim2_flat NP 4 NODES 2 ENV HSR_ALGO_TWO_LEVEL=off HSR_UCX_CHUNK=16K COMMAND $<TARGET_FILE:mr_coll> --counts 1,7,100003)
hsr_add_mpi_test(NAME coll_world8_sim2_interleave NP 8 NODES 2 COMMAND $<TARGET_FILE:mr_coll> --counts 7 --interleave)
hsr_add_mpi_test(NAME coll_world8_sim2_rd NP 8 NODES 2 ENV HSR_ALGO_ALLREDUCE=rd COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 1,7,1000 --dtypes f32)
hsr_add_mpi_test(NAME coll_world4_sim2_inline NP 4 NODES 2 ENV HSR_PROGRESS=inline COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 7 --dtypes f32 --concurrent)
hsr_add_mpi_test(NAME coll_timeout NP 4 ENV HSR_COMM_TIMEOUT=1.5 COMMAND $<TARGET_FILE:mr_coll> --timeout-case TIMEOUT 60)
hsr_add_mpi_test(NAME coll_timeout_sim2 NP 4 NODES 2 ENV HSR_COMM_TIMEOUT=1.5 COMMAND $<TARGET_FILE:mr_coll> --timeout-case --loose TIMEOUT 60)
hsr_add_mpi_test(NAME coll_bad_args NP 2 COMMAND $<TARGET_FILE:mr_coll> --bad-args TIMEOUT 60)
# Four simulated nodes: the world is two-level with a 4-member UCX ring; replicate groups are flat rings.
hsr_add_mpi_test(NAME coll_world8_sim4 NP 8 NODES 4 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 1,7,1003)
hsr_add_mpi_test(NAME coll_world8_sim4_ring NP 8 NODES 4 ENV HSR_ALGO_ALLREDUCE=ring HSR_UCX_CHUNK=4K COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 7,1003,100003 --dtypes f32)

# NCCL backend: device memory, one rank per GPU (up to 4); skipped (exit 77)
# without NCCL or a GPU. Label gpu: bench/gpu_check.sh runs it.
hsr_add_program(mr_nccl mr_nccl.c)
add_test(NAME coll_nccl_world4 COMMAND ${CMAKE_SOURCE_DIR}/tests/nccl_check.sh ${HSR_RUN} $<TARGET_FILE:mr_nccl>)
set_tests_properties(coll_nccl_world4 PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "mpi;gpu"
                     ENVIRONMENT "HSR_BOOT_TIMEOUT=60")

# bf16/f16 reductions whose results need rounding, bit for bit against a model of
# where each transport rounds (mr_round.c): shared memory (one node); two-level,
# node pairs and cross-node pairs (two nodes); the flat UCX ring over 4 ranks in
# 4K chunks (sizes not multiples of a chunk); recursive doubling.
hsr_add_program(mr_round mr_round.c)
hsr_add_mpi_test(NAME coll_round_4 NP 4 COMMAND $<TARGET_FILE:mr_round>)
hsr_add_mpi_test(NAME coll_round_4_sim2 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_round>)
hsr_add_mpi_test(NAME coll_round_4_sim2_ring NP 4 NODES 2 ENV HSR_ALGO_TWO_LEVEL=off HSR_ALGO_ALLREDUCE=ring
                 HSR_UCX_CHUNK=4K COMMAND $<TARGET_FILE:mr_round>)
hsr_add_mpi_test(NAME coll_round_4_sim2_rd NP 4 NODES 2 ENV HSR_ALGO_TWO_LEVEL=off HSR_ALGO_ALLREDUCE=rd
                 COMMAND $<TARGET_FILE:mr_round> --counts 1,7,1003)
add_test(NAME coll_shm_cleanup COMMAND ${CMAKE_SOURCE_DIR}/tests/coll_shm_cleanup.sh ${HSR_RUN} $<TARGET_FILE:mr_coll>
         $<TARGET_FILE:hsr_cli>)
set_tests_properties(coll_shm_cleanup PROPERTIES TIMEOUT 60 LABELS "mpi")
# A 64 MiB /dev/shm (Docker's default) refuses nothing: node-shared memory is
# memfds, which draw on memory and the memory cgroup (tests/shm_small.sh)
add_test(NAME shm_small_devshm COMMAND ${CMAKE_SOURCE_DIR}/tests/shm_small.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(shm_small_devshm PROPERTIES TIMEOUT 180 LABELS "mpi" SKIP_RETURN_CODE 77)
# A job on one host listens on loopback only (UCX_NET_DEVICES for hsr's UCX context: tests/exposure.sh)
add_test(NAME exposure_loopback COMMAND ${CMAKE_SOURCE_DIR}/tests/exposure.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli>)
set_tests_properties(exposure_loopback PROPERTIES TIMEOUT 120 LABELS "mpi" SKIP_RETURN_CODE 77)

# No call loop among the module's files: each transport (its table and its
# algorithms name each other by design) is one node, every other file its own;
# the graph comes from the symbols the object files define and use (nm).
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/objects-collectives.txt
     CONTENT "$<JOIN:$<TARGET_OBJECTS:hsr_collectives>,\n>\n")
add_test(NAME coll_call_graph COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/call_graph.py collectives --group "shm=shm(_.*)?"
         --group "ucx=ucx(_.*)?" --group "two=two(_.*)?" @${CMAKE_BINARY_DIR}/objects-collectives.txt)
set_tests_properties(coll_call_graph PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
# The check counts calls to public entry points too: a loop closed only by one is found (a compiled fixture).
add_test(NAME call_graph_self_test COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/call_graph.py --self-test)
set_tests_properties(call_graph_self_test PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
