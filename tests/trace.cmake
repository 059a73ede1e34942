# runtime/: memory ledger and lifecycle trace.
hsr_add_unit(test_ledger_trace test_ledger_trace.c)
# hsr trace summarize on generated traces with known answers, and properties on random ones.
hsr_add_unit(test_trace_sum test_trace_sum.c)
target_link_libraries(test_ledger_trace PRIVATE PkgConfig::CJSON)
hsr_add_program(mr_trace mr_trace.c)
target_link_libraries(mr_trace PRIVATE PkgConfig::CJSON)
hsr_add_mpi_test(NAME trace_mpirun_4 NP 4 COMMAND $<TARGET_FILE:mr_trace> ${CMAKE_BINARY_DIR}/mr_trace.json 1200)
add_test(NAME cli_trace_missing COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "No such file"
         $<TARGET_FILE:hsr_cli> trace summarize /nonexistent.json)
add_test(NAME cli_trace_badaction COMMAND ${CMAKE_SOURCE_DIR}/tests/expect_exit.sh 2 "valid: summarize"
         $<TARGET_FILE:hsr_cli> trace frob)
# 100,000 steps summarized inside the test's bound: the summary is O(n log n) (tests/trace_big.sh)
add_test(NAME trace_big COMMAND ${CMAKE_SOURCE_DIR}/tests/trace_big.sh $<TARGET_FILE:hsr_cli>)
set_tests_properties(trace_big PROPERTIES TIMEOUT 120)
