# Fuzzing (tests/fuzz): every parser a user hands a file to. The normal build
# runs each target over its seed corpus and every input the fuzzer ever
# crashed or hung on (tests/fuzz/regress/<target>/); -DHSR_FUZZ=ON with clang
# builds the libFuzzer executables that scripts/fuzz.sh runs.
set(HSR_FUZZ_TARGETS topo_xml topo_nccl trace ckpt_manifest ckpt_state safetensors st_index tune_bench)
set(_fz ${CMAKE_SOURCE_DIR}/tests/fuzz)
set(HSR_FUZZ_SEEDS_topo_xml ${CMAKE_SOURCE_DIR}/tests/data)
set(HSR_FUZZ_SEEDS_topo_nccl ${CMAKE_SOURCE_DIR}/tests/data/nccl)
foreach(t ${HSR_FUZZ_TARGETS})
  set(seeds ${_fz}/corpus/${t} ${HSR_FUZZ_SEEDS_${t}})
  if(HSR_FUZZ)
    add_executable(fuzz_${t} ${_fz}/fuzz_${t}.c)
    target_link_libraries(fuzz_${t} PRIVATE hsr_static PkgConfig::ZLIB)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR})
  else()
    add_executable(fuzz_${t}_regress ${_fz}/fuzz_${t}.c ${_fz}/regress_main.c)
    target_link_libraries(fuzz_${t}_regress PRIVATE hsr_static PkgConfig::ZLIB)
    target_include_directories(fuzz_${t}_regress PRIVATE ${CMAKE_SOURCE_DIR}) # INTERNAL headers
    add_test(NAME fuzz_regress_${t} COMMAND ${CMAKE_SOURCE_DIR}/tests/leaves_nothing.sh
                                             $<TARGET_FILE:fuzz_${t}_regress> ${seeds} ${_fz}/regress/${t})
    set_tests_properties(fuzz_regress_${t} PROPERTIES TIMEOUT 120 LABELS fuzz ENVIRONMENT "HSR_LOG=error")
  endif()
endforeach()
