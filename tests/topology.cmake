# topology/: the mesh planner, discovery from hwloc XML, the gathered view, hsr topo / hsr mesh.
hsr_add_unit(test_topo_mesh test_topo_mesh.c)
# The planner enumerated over placements (spanning domains, non-block, unequal nodes, thousands of ranks).
hsr_add_unit(test_mesh_props test_mesh_props.c)
hsr_add_unit(test_topo_xml test_topo_xml.c)
hsr_add_unit(test_topo_nccl test_topo_nccl.c)

# The gathered view under mpirun with simulated nodes: CPU-only (one domain per
# node), DGX-like XML (2 ranks per node on GPUs 0-1), multi-node NVLink clique, DGX-2.
hsr_add_program(mr_topo mr_topo.c)
hsr_add_mpi_test(NAME topo_gather_4_sim2 NP 4 NODES 2 ENV HSR_TOPO_XML=
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 2 --partial 2)
hsr_add_mpi_test(NAME topo_gather_6_sim2_cpu NP 6 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/cpu-2numa.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 3 --partial 3)
hsr_add_mpi_test(NAME topo_gather_4_sim2_dgx NP 4 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/dgx-h100-like.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 2 --gpus 8 --partial 2)
hsr_add_mpi_test(NAME topo_gather_8_sim2_nvl NP 8 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/nvl-2node.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 1 --domain-size 8 --gpus 4 --partial 4)
# DGX-2: the 16 NVSwitch GPUs of a node are one domain (here 2 ranks of it per node).
hsr_add_mpi_test(NAME topo_gather_4_sim2_dgx2 NP 4 NODES 2 ENV HSR_TOPO_XML=${CMAKE_SOURCE_DIR}/tests/data/nvidiaDGX2.xml
                 COMMAND $<TARGET_FILE:mr_topo> --domains 2 --domain-size 2 --gpus 16 --partial 2)

# hsr topo / hsr mesh / hsr-bind: output, JSON, exit codes (2 = bad flags or values).
set(_x ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh)
set(_d ${CMAKE_SOURCE_DIR}/tests/data)
set(_hsr $<TARGET_FILE:hsr_cli>)
function(hsr_topo_cli name code regex)
  add_test(NAME ${name} COMMAND ${_x} ${code} "${regex}" ${ARGN})
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 ENVIRONMENT "HSR_TOPO_XML=")
endfunction()
hsr_topo_cli(cli_topo_help 0 "usage: hsr topo" ${_hsr} topo --help)
hsr_topo_cli(cli_topo_live 0 "node 0: " ${_hsr} topo)
hsr_topo_cli(cli_topo_dgx 0 "0000:93:00.0 +4 +1 .* mlx5_4 PIX +mlx5_4\\(PIX\\) mlx5_5\\(NODE\\)" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_dgx_summary 0 "summary: 8 GPUs, one NVSwitch domain, 8 NICs at PIX" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_dgx_rule 0 "domain rule: nvswitch \\(every GPU with NVSwitch links" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_dgx_unit 0 "NVLink bandwidth, GPU row to GPU column \\(MB/s per direction" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_dgx2 0 "summary: 16 GPUs, one NVSwitch domain" ${_hsr} topo --xml ${_d}/nvidiaDGX2.xml)
hsr_topo_cli(cli_topo_snc2 0 "  0 +0000:03:00.0 +- +0,1 +0-7 " ${_hsr} topo --xml ${_d}/snc2-gpu.xml)
hsr_topo_cli(cli_topo_dgx_domains 0 "NVLink domains: \\[0 1 2 3 4 5 6 7\\]$" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_json 0 "^\\{\"nodes\":\\[\\{\"host\":\"pcie-4gpu\".*\"index\":0,\"pci\":\"0000:04:00.0\",\"numa\":0.*\"nics\":\\[\\{\"name\":\"mlx5_0\",\"pci\":\"0000:08:00.0\",\"path\":\"PXB\"\\}.*\"nvlink_domains\":\\[\\[0\\],\\[1\\],\\[2\\],\\[3\\]\\]"
             ${_hsr} topo --xml ${_d}/pcie-4gpu.xml --json)
hsr_topo_cli(cli_topo_badflag 2 "unknown option" ${_hsr} topo --bogus)
hsr_topo_cli(cli_topo_extra_arg 2 "unexpected argument" ${_hsr} topo extra)
hsr_topo_cli(cli_topo_missing_xml 1 "cannot open topology XML '/nonexistent.xml'" ${_hsr} topo --xml /nonexistent.xml)
hsr_topo_cli(cli_topo_malformed_xml 1 "not a valid hwloc topology" ${_hsr} topo --xml ${_d}/README.md)
hsr_topo_cli(cli_topo_bind 0 "^8-15$" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml --bind-cpuset 5 --local-size 8)
hsr_topo_cli(cli_topo_bind_cpu 0 "^4-7$" ${_hsr} topo --xml ${_d}/cpu-2numa.xml --bind-cpuset 3 --local-size 4)
hsr_topo_cli(cli_topo_bind_snc2 0 "^0-7$" ${_hsr} topo --xml ${_d}/snc2-gpu.xml --bind-cpuset 0 --local-size 2)
hsr_topo_cli(cli_topo_nccl 0 "summary: 8 GPUs, one NVSwitch domain, 8 NICs at PIX" ${_hsr} topo --nccl-xml ${_d}/nccl/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_nccl_vendor 0 "notes: NCCL input file \\(no <gpu> elements\\)" ${_hsr} topo --nccl-xml ${_d}/nccl/azure-ndv5-topo.xml)
hsr_topo_cli(cli_topo_nccl_host 0 "\"host\":\"nvl-2host#1\".*\"pci\":\"0009:12:00.0\"" ${_hsr} topo --nccl-xml ${_d}/nccl/nvl-2host.xml --nccl-host 1 --json)
hsr_topo_cli(cli_topo_nccl_bad_host 2 "has 2 hosts: host 5 is not in 0..1" ${_hsr} topo --nccl-xml ${_d}/nccl/nvl-2host.xml --nccl-host 5)
hsr_topo_cli(cli_topo_nccl_hwloc_file 1 "is an hwloc topology \\(root <topology>\\).*read it with --xml" ${_hsr} topo --nccl-xml ${_d}/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_nccl_missing 1 "cannot open NCCL topology '/nonexistent.xml'" ${_hsr} topo --nccl-xml /nonexistent.xml)
hsr_topo_cli(cli_topo_nccl_and_xml 2 "give one, or both with --compare-nccl" ${_hsr} topo --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_nccl_host_alone 2 "--nccl-host goes with --nccl-xml" ${_hsr} topo --nccl-host 1)
hsr_topo_cli(cli_topo_bind_nccl 2 "--bind-cpuset reads hwloc" ${_hsr} topo --nccl-xml ${_d}/nccl/dgx-h100-like.xml --bind-cpuset 0)
hsr_topo_cli(cli_topo_compare 0 "vs NCCL \\(dgx-h100-disagree, nccl-xml\\): 10 differences$"
             ${_hsr} topo --compare-nccl --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-disagree.xml)
hsr_topo_cli(cli_topo_compare_nic 0 "^  GPU 0000:43:00.0 NIC: hwloc mlx5_3 PIX, NCCL mlx5_0 PHB$"
             ${_hsr} topo --compare-nccl --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-disagree.xml)
hsr_topo_cli(cli_topo_compare_agree 0 "nccl-xml\\): 0 differences$"
             ${_hsr} topo --compare-nccl --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_compare_node 0 "24 GPU-NIC pairs are NODE in hwloc and PHB in NCCL"
             ${_hsr} topo --compare-nccl --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-like.xml)
hsr_topo_cli(cli_topo_compare_xml_live 2 "drop --xml" ${_hsr} topo --compare-nccl --xml ${_d}/dgx-h100-like.xml)
add_test(NAME topo_golden COMMAND ${CMAKE_SOURCE_DIR}/tests/topo_golden.sh ${_hsr} ${CMAKE_SOURCE_DIR})
set_tests_properties(topo_golden PROPERTIES TIMEOUT 120)
add_test(NAME topo_nccl_live COMMAND ${CMAKE_SOURCE_DIR}/tests/topo_nccl_live.sh ${CMAKE_BINARY_DIR})
set_tests_properties(topo_nccl_live PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "mpi;gpu")
hsr_topo_cli(cli_topo_bind_bad 2 "--bind-cpuset" ${_hsr} topo --bind-cpuset x)
hsr_topo_cli(cli_topo_bind_range 2 "local rank 4 must be below the local size 4" ${_hsr} topo --bind-cpuset 4 --local-size 4)
hsr_topo_cli(cli_mesh_help 0 "usage: hsr mesh" ${_hsr} mesh --help)
hsr_topo_cli(cli_mesh_dgx2 0 "R x S = 2 x 8, partial K = 8" ${_hsr} mesh --xml ${_d}/dgx-h100-like.xml --nodes 2)
hsr_topo_cli(cli_mesh_grid 0 "^r1 +\\|8@1/0 +\\|9@1/1 " ${_hsr} mesh --xml ${_d}/dgx-h100-like.xml --nodes 2)
hsr_topo_cli(cli_mesh_dgx2_16 0 "R x S = 2 x 16, partial K = 16" ${_hsr} mesh --xml ${_d}/nvidiaDGX2.xml --nodes 2)
hsr_topo_cli(cli_mesh_nccl 0 "R x S = 1 x 8, partial K = 4" ${_hsr} mesh --nccl-xml ${_d}/nccl/nvl-2host.xml --nodes 2)
hsr_topo_cli(cli_mesh_nccl_and_xml 2 "give one of --xml" ${_hsr} mesh --xml ${_d}/dgx-h100-like.xml --nccl-xml ${_d}/nccl/dgx-h100-like.xml)
hsr_topo_cli(cli_mesh_world6 0 "R x S = 2 x 3, partial K = 3" ${_hsr} mesh --world 6 --nodes 2 --shard 3 --xml ${_d}/cpu-2numa.xml)
hsr_topo_cli(cli_mesh_json 0 "\"shard_groups\":\\[\\[0,1,2,3\\],\\[4,5,6,7\\]\\],\"replicate_groups\":\\[\\[0,4\\],"
             ${_hsr} mesh --world 8 --nodes 2 --json)
hsr_topo_cli(cli_mesh_bad_shard 2 "rule 'S divides the world'.*valid S: 1, 2, 4, 8" ${_hsr} mesh --world 8 --shard 3)
hsr_topo_cli(cli_mesh_bad_domain 2 "union of whole domains.*valid S: 1, 2, 6" ${_hsr} mesh --world 6 --nodes 3 --shard 3)
hsr_topo_cli(cli_mesh_bad_partial 2 "rule 'K divides S'.*valid K: 1, 2, 4" ${_hsr} mesh --world 8 --shard 4 --partial 3)
hsr_topo_cli(cli_mesh_bad_value 2 "--shard must be a positive integer or 'auto'" ${_hsr} mesh --shard x)
hsr_topo_cli(cli_mesh_bad_world 2 "--world" ${_hsr} mesh --world 0)
hsr_topo_cli(cli_mesh_badflag 2 "unknown option" ${_hsr} mesh --bogus)
hsr_topo_cli(cli_mesh_too_many 2 "8 GPUs per node" ${_hsr} mesh --xml ${_d}/dgx-h100-like.xml --world 16)
hsr_topo_cli(cli_mesh_missing_xml 1 "cannot open topology XML" ${_hsr} mesh --xml /nonexistent.xml)
hsr_topo_cli(cli_topo_mpirun 0 "^node 1: .*#1" ${HSR_RUN} -n 4 --nodes 2 --launcher mpirun -- ${_hsr} topo)
hsr_topo_cli(cli_mesh_mpirun 0 "R x S = 2 x 2, partial K = 2; world 4 on 2 nodes" ${HSR_RUN} -n 4 --nodes 2 --launcher mpirun -- ${_hsr} mesh)
hsr_topo_cli(hsr_bind_print 0 "^4-7$" env OMPI_COMM_WORLD_LOCAL_RANK=2 OMPI_COMM_WORLD_LOCAL_SIZE=4
             HSR_TOPO_XML=${_d}/cpu-2numa.xml ${CMAKE_BINARY_DIR}/hsr-bind --print)
hsr_topo_cli(hsr_bind_no_rank 2 "no local rank" env -u OMPI_COMM_WORLD_LOCAL_RANK -u SLURM_LOCALID -u PMIX_LOCAL_RANK
             ${CMAKE_BINARY_DIR}/hsr-bind -- true)
hsr_topo_cli(hsr_bind_badflag 2 "unknown option" ${CMAKE_BINARY_DIR}/hsr-bind --bogus)
add_test(NAME hsr_run_bind_auto COMMAND ${CMAKE_SOURCE_DIR}/tests/topo_bind.sh ${CMAKE_BINARY_DIR} ${_d}/cpu-2x1.xml)
set_tests_properties(hsr_run_bind_auto PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS mpi)
add_test(NAME hsr_run_bind_auto_srun COMMAND ${CMAKE_SOURCE_DIR}/tests/topo_bind.sh ${CMAKE_BINARY_DIR} ${_d}/cpu-2x1.xml srun)
set_tests_properties(hsr_run_bind_auto_srun PROPERTIES FIXTURES_REQUIRED slurm RESOURCE_LOCK slurm TIMEOUT 120
                     SKIP_RETURN_CODE 77 LABELS slurm ENVIRONMENT "SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf")
