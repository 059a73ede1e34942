# collectives/: every op, dtype and buffer kind against a reference, on the
# shared-memory path (one node), the UCX path (simulated nodes) and splits.
hsr_add_program(mr_coll mr_coll.c)

hsr_add_mpi_test(NAME coll_world4 NP 4 COMMAND $<TARGET_FILE:mr_coll> --big)
hsr_add_mpi_test(NAME coll_world4_split2x2 NP 4 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,7 --concurrent)
hsr_add_mpi_test(NAME coll_world8_split4x2 NP 8 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 1,1000003 --dtypes f32)
hsr_add_mpi_test(NAME coll_world8_split2x4 NP 8 COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 7 --concurrent)
hsr_add_mpi_test(NAME coll_world4_inline NP 4 ENV HSR_PROGRESS=inline COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,1,7 --concurrent)
# Two simulated nodes: world and replicate groups cross nodes (UCX), shard groups stay inside (shm).
hsr_add_mpi_test(NAME coll_world4_sim2 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 0,1,7,100003 --concurrent)
hsr_add_mpi_test(NAME coll_world8_sim2_rd NP 8 NODES 2 ENV HSR_ALGO_ALLREDUCE=rd COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 1,7,1000 --dtypes f32)
hsr_add_mpi_test(NAME coll_world4_sim2_inline NP 4 NODES 2 ENV HSR_PROGRESS=inline COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 7 --dtypes f32 --concurrent)
hsr_add_mpi_test(NAME coll_timeout NP 4 ENV HSR_COMM_TIMEOUT=1.5 COMMAND $<TARGET_FILE:mr_coll> --timeout-case TIMEOUT 60)
hsr_add_mpi_test(NAME coll_bad_args NP 2 COMMAND $<TARGET_FILE:mr_coll> --bad-args TIMEOUT 60)
# Four simulated nodes: the world is two-level with a 4-member UCX ring; replicate groups are flat rings.
hsr_add_mpi_test(NAME coll_world8_sim4 NP 8 NODES 4 COMMAND $<TARGET_FILE:mr_coll> --split 2 --counts 1,7,1003)
hsr_add_mpi_test(NAME coll_world8_sim4_ring NP 8 NODES 4 ENV HSR_ALGO_ALLREDUCE=ring COMMAND $<TARGET_FILE:mr_coll> --split 4 --counts 7,1003 --dtypes f32)
