# tools/: the front ends' rooms (cli, models, train, ckpt, tune, bench and
# the top folder of commands) call each other without a loop; the graph of
# the objects of the hsr binary and its two archives, by folder.
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/objects-tools.txt
     CONTENT "$<JOIN:$<TARGET_OBJECTS:hsr_cli_common>;$<TARGET_OBJECTS:hsr_train>;$<TARGET_OBJECTS:hsr_cli>,\n>\n")
add_test(NAME tools_call_graph COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/call_graph.py tools --by-dir
         @${CMAKE_BINARY_DIR}/objects-tools.txt)
set_tests_properties(tools_call_graph PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
# ... and their files too: each file its own node, but for the collective
# benchmark (bench_coll*.c: the sweep and its output name each other by design).
add_test(NAME tools_file_call_graph COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/call_graph.py tools
         --group "bench_coll=bench_coll(_.*)?" @${CMAKE_BINARY_DIR}/objects-tools.txt)
set_tests_properties(tools_file_call_graph PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# examples/train_run.c: a program over the training driver (tools/train/train.h)
# trains, and is the same job as hsr train with the same settings: the same
# loss at every step, the same --json fields (tests/example_train.sh).
add_test(NAME example_train_run COMMAND ${CMAKE_SOURCE_DIR}/tests/example_train.sh $<TARGET_FILE:hsr_example_train>
         $<TARGET_FILE:hsr_cli>)
set_tests_properties(example_train_run PROPERTIES TIMEOUT 120 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
