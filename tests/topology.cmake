# topology/: the mesh planner, discovery from hwloc XML, the gathered view, hsr topo / hsr mesh.
hsr_add_unit(test_topo_mesh test_topo_mesh.c)
hsr_add_unit(test_topo_xml test_topo_xml.c)

# The gathered view under mpirun with simulated nodes: CPU-only (one domain per
# node), DGX-like XML (2 ranks per node on GPUs 0-1), multi-node NVLink clique.
hsr_add_program(mr_topo mr_topo.c)
hsr_add_mpi_test(NAME topo_gather_4_sim2 NP 4 NODES 2 ENV HSR_TOPO_XML=
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 2 --partial 2)
hsr_add_mpi_test(NAME topo_gather_6_sim2_cpu NP 6 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/cpu-2numa.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 3 --partial 3)
hsr_add_mpi_test(NAME topo_gather_4_sim2_dgx NP 4 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/dgx-h100-like.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 2 --gpus 8 --partial 2)
hsr_add_mpi_test(NAME topo_gather_8_sim2_nvl NP 8 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/nvl-2node.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 1 --domain-size 8 --gpus 4 --partial 4)
