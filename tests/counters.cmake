# Communicator counters (calls, bytes sent/received, fabric bytes, full buffer)
# for every op against hand-computed values, on every host transport: shared
# memory (one node), two-level (groups spanning nodes with equal members per
# node), flat UCX rings (replicate groups; the world with two-level off, where
# some ring neighbours share a node), multi-chunk rings (HSR_UCX_CHUNK=4K,
# sizes not multiples of it), recursive doubling and ring all-reduce.
hsr_add_program(mr_counters mr_counters.c)
hsr_add_mpi_test(NAME counters_shm4 NP 4 COMMAND $<TARGET_FILE:mr_counters> --split 2 --counts 0,1,7,1000)
hsr_add_mpi_test(NAME counters_sim2_4 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_counters> --split 2 --counts 0,1,7,1000,20001)
hsr_add_mpi_test(NAME counters_sim2_8_flat_chunks NP 8 NODES 2 ENV HSR_ALGO_TWO_LEVEL=off HSR_UCX_CHUNK=4K
                 COMMAND $<TARGET_FILE:mr_counters> --split 4 --counts 1,7,3001,20001)
hsr_add_mpi_test(NAME counters_sim2_8_two NP 8 NODES 2 ENV HSR_UCX_CHUNK=4K
                 COMMAND $<TARGET_FILE:mr_counters> --split 2 --counts 7,1000,20001)
hsr_add_mpi_test(NAME counters_sim4_8_ring NP 8 NODES 4 ENV HSR_ALGO_ALLREDUCE=ring HSR_UCX_CHUNK=4K
                 COMMAND $<TARGET_FILE:mr_counters> --split 4 --counts 1,7,3001,20001)
hsr_add_mpi_test(NAME counters_sim4_8_rd NP 8 NODES 4 ENV HSR_ALGO_ALLREDUCE=rd
                 COMMAND $<TARGET_FILE:mr_counters> --split 4 --counts 7,1000,20001)
