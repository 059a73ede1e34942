# launch/: the PMIx bootstrap under mpirun, srun and no launcher; hsr-run; hsr CLI.
hsr_add_program(mr_boot mr_boot.c)

hsr_add_mpi_test(NAME boot_mpirun_4 NP 4 COMMAND $<TARGET_FILE:mr_boot> --size 4 --nodes 1 --launcher mpirun)
hsr_add_mpi_test(NAME boot_mpirun_8 NP 8 COMMAND $<TARGET_FILE:mr_boot> --size 8 --nodes 1)
hsr_add_mpi_test(NAME boot_mpirun_4_sim2 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_boot> --size 4 --nodes 2)
hsr_add_mpi_test(NAME boot_mpirun_8_sim4 NP 8 NODES 4 COMMAND $<TARGET_FILE:mr_boot> --size 8 --nodes 4)
add_test(NAME boot_singleton COMMAND mr_boot --size 1 --nodes 1 --launcher singleton)
set_tests_properties(boot_singleton PROPERTIES TIMEOUT 20)
add_test(NAME boot_singleton_sim_bad COMMAND mr_boot)
set_tests_properties(boot_singleton_sim_bad PROPERTIES ENVIRONMENT "HSR_SIM_NODES=2" WILL_FAIL TRUE TIMEOUT 20)

# Slurm: a controller and a daemon on this host, started by a fixture
# (HSR_SLURM_DIR, HSR_SLURM_PORT: tests/CMakeLists.txt).
add_test(NAME slurm_up COMMAND ${CMAKE_SOURCE_DIR}/tests/slurm/slurm-up.sh ${HSR_SLURM_DIR} ${HSR_SLURM_PORT})
add_test(NAME slurm_down COMMAND ${CMAKE_SOURCE_DIR}/tests/slurm/slurm-down.sh ${HSR_SLURM_DIR})
set_tests_properties(slurm_up PROPERTIES FIXTURES_SETUP slurm SKIP_RETURN_CODE 77 TIMEOUT 60)
set_tests_properties(slurm_down PROPERTIES FIXTURES_CLEANUP slurm)
# Another tree's test Slurm on this host beside this one: steps of both run
# at once (they once shared job ids and the PMIx folder: a launch flake).
math(EXPR _p2 "${HSR_SLURM_PORT} + 2000")
add_test(NAME slurm_two_trees COMMAND ${CMAKE_SOURCE_DIR}/tests/slurm/two_slurms.sh ${HSR_SLURM_DIR}-b ${_p2})
set_tests_properties(slurm_two_trees PROPERTIES FIXTURES_REQUIRED slurm RESOURCE_LOCK slurm TIMEOUT 120 LABELS slurm
                     ENVIRONMENT "SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf")
# hsr_add_srun_test(NAME n NP ranks [NODES k] COMMAND ...): through hsr-run --launcher srun.
function(hsr_add_srun_test)
  cmake_parse_arguments(T "" "NAME;NP;NODES" "COMMAND" ${ARGN})
  set(run ${HSR_RUN} --launcher srun -n ${T_NP})
  if(T_NODES)
    list(APPEND run --nodes ${T_NODES})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${run} -- ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES FIXTURES_REQUIRED slurm TIMEOUT 120 RESOURCE_LOCK slurm
                       ENVIRONMENT "SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf;HSR_BOOT_TIMEOUT=60" LABELS "slurm")
endfunction()
hsr_add_srun_test(NAME boot_srun_4 NP 4 COMMAND $<TARGET_FILE:mr_boot> --size 4 --nodes 1 --launcher srun)

# The path that ends a rank when mpirun is SIGKILLed: its lifeline's lost
# PMIx connection and its own SIGTERM (exit 143, no fallback), or the 5 s
# fallback SIGKILL where the program keeps SIGTERM (exit 137), each named.
add_test(NAME lifeline_path_mpirun COMMAND ${CMAKE_SOURCE_DIR}/tests/lifeline_path.sh ${HSR_RUN} $<TARGET_FILE:mr_boot>)
set_tests_properties(lifeline_path_mpirun PROPERTIES TIMEOUT 120 LABELS "mpi;fault")

# A rank that leaves before joining: named at once under mpirun, at
# HSR_BOOT_TIMEOUT under srun (tests/boot_absent.sh).
add_test(NAME boot_left_early_mpirun COMMAND ${CMAKE_SOURCE_DIR}/tests/boot_absent.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli> mpirun)
set_tests_properties(boot_left_early_mpirun PROPERTIES TIMEOUT 60 LABELS mpi)
add_test(NAME boot_absent_srun COMMAND ${CMAKE_SOURCE_DIR}/tests/boot_absent.sh ${HSR_RUN} $<TARGET_FILE:hsr_cli> srun)
set_tests_properties(boot_absent_srun PROPERTIES FIXTURES_REQUIRED slurm TIMEOUT 60 RESOURCE_LOCK slurm LABELS slurm
                     ENVIRONMENT "SLURM_CONF=${HSR_SLURM_DIR}/slurm.conf")
hsr_add_srun_test(NAME boot_srun_4_sim2 NP 4 NODES 2 COMMAND $<TARGET_FILE:mr_boot> --size 4 --nodes 2)

# hsr-run argument checking (exit 2 with a message) and --dry-run.
foreach(bad "-n;0" "-n;x" "-n;4;--nodes;3" "--launcher;pbs" "-n;-1" "--bogus")
  string(REPLACE ";" "_" _n "${bad}")
  add_test(NAME hsr_run_bad${_n} COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "" ${HSR_RUN} ${bad} -- true)
endforeach()
# the ranks' BLAS threads: one, unless the user set them
add_test(NAME hsr_run_dry COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0
         "mpirun -n 4 .*--oversubscribe.*-x HSR_SIM_NODES=2 -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1 prog"
         ${HSR_RUN} --launcher mpirun -n 4 --nodes 2 --dry-run -- prog)
add_test(NAME hsr_run_dry_srun COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0
         "HSR_SIM_NODES=2 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 srun --mpi=pmix -n 4 -O prog"
         ${HSR_RUN} --launcher srun -n 4 --nodes 2 --dry-run -- prog)
set_tests_properties(hsr_run_dry hsr_run_dry_srun PROPERTIES ENVIRONMENT_MODIFICATION
                     "OPENBLAS_NUM_THREADS=unset:;OMP_NUM_THREADS=unset:")
add_test(NAME hsr_run_dry_blas_set COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "--oversubscribe -x HSR_SIM_NODES=2 prog"
         ${HSR_RUN} --launcher mpirun -n 4 --nodes 2 --dry-run -- prog)
set_tests_properties(hsr_run_dry_blas_set PROPERTIES ENVIRONMENT OPENBLAS_NUM_THREADS=3)

# hsr CLI: help, version, unknown commands/flags, info under mpirun.
add_test(NAME cli_help COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "usage: hsr" $<TARGET_FILE:hsr_cli> --help)
add_test(NAME cli_version COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "NCCL" $<TARGET_FILE:hsr_cli> version)
add_test(NAME cli_unknown COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "unknown command" $<TARGET_FILE:hsr_cli> frobnicate)
add_test(NAME cli_info_badflag COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "" $<TARGET_FILE:hsr_cli> info --bogus)
add_test(NAME cli_info_mpirun COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 0 "3 +4 +1 +2 +1 +"
         ${HSR_RUN} -n 4 --nodes 2 --launcher mpirun -- $<TARGET_FILE:hsr_cli> info)

# Every flag of every command and every HSR_* variable with bad values: exit 2
# and a message naming it, before any work (table: tests/cli_walk.txt).
add_test(NAME cli_walk COMMAND ${CMAKE_SOURCE_DIR}/tests/cli_walk.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_walk PROPERTIES TIMEOUT 600 LABELS mpi)
# The HSR_* registry, docs/environment.md's table and the variables the sources read agree.
add_test(NAME env_registry COMMAND ${CMAKE_SOURCE_DIR}/tests/env_registry.sh $<TARGET_FILE:hsr_cli> ${CMAKE_SOURCE_DIR})
set_tests_properties(env_registry PROPERTIES TIMEOUT 60)
# The BOOL and CHOICE variables read by the commands and scripts, in every
# spelling the registry accepts and in any case, judged by their effect.
# Variables every rank must read alike, set differently: one line, no work
add_test(NAME env_agree COMMAND ${CMAKE_SOURCE_DIR}/tests/env_agree.sh $<TARGET_FILE:hsr_cli>)
set_tests_properties(env_agree PROPERTIES LABELS mpi TIMEOUT 120)
add_test(NAME env_spellings COMMAND ${CMAKE_SOURCE_DIR}/tests/env_spellings.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(env_spellings PROPERTIES TIMEOUT 300)
# The layer table of docs/design.md is the one CMakeLists.txt enforces.
add_test(NAME design_layers COMMAND ${CMAKE_SOURCE_DIR}/tests/design_layers.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(design_layers PROPERTIES TIMEOUT 30)
# The docs as reference: no issue numbers, every link resolves, every page in
# the README's table, every command in docs/commands.md, every module in
# design.md's table, every HSR_* name a variable or the code's
add_test(NAME docs_check COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/docs_check.py ${CMAKE_SOURCE_DIR}
         $<TARGET_FILE:hsr_cli>)
set_tests_properties(docs_check PROPERTIES TIMEOUT 60)
# The build, the tests and CI need none of the PyTorch peers' Python packages
# (torch and the rest are a benchmark harness, installed on demand).
add_test(NAME peers_free COMMAND ${CMAKE_SOURCE_DIR}/tests/peers_free.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(peers_free PROPERTIES TIMEOUT 30)

# The layer check refuses a room's private header outside its folder (and
# SHARED ones outside their module, ../ paths), on a fixture tree.
add_test(NAME layer_privacy COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DBIN=${CMAKE_CURRENT_BINARY_DIR}
         -P ${CMAKE_SOURCE_DIR}/tests/data/layers/run.cmake)
set_tests_properties(layer_privacy PROPERTIES TIMEOUT 30)
