hsr_add_unit(test_common test_common.c)
add_test(NAME install_find_package COMMAND ${CMAKE_SOURCE_DIR}/tests/install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(install_find_package PROPERTIES TIMEOUT 180)
