hsr_add_unit(test_common test_common.c)
# (not in sanitizer builds: the consumer project is built without the sanitizer runtime)
if(HSR_SANITIZE STREQUAL "none")
  add_test(NAME install_find_package COMMAND ${CMAKE_SOURCE_DIR}/tests/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(install_find_package PROPERTIES TIMEOUT 180)
endif()
# libhsr.so exports the program API of tests/abi_exports.txt and nothing else
# (-fvisibility=hidden + HSR_API), each documented in docs/api.md; the example
# models call nothing else. install_test.sh checks the installed library too.
add_test(NAME abi_exports COMMAND ${CMAKE_SOURCE_DIR}/tests/abi_exports.sh $<TARGET_FILE:hsr> ${CMAKE_SOURCE_DIR}
                                  $<TARGET_FILE:hsr_examples>)
set_tests_properties(abi_exports PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
