# hsr-kbench: bandwidth of the kernels/ element-wise kernels (bench/kbench/).
add_executable(hsr_kbench ${CMAKE_SOURCE_DIR}/bench/kbench/kbench.c)
set_target_properties(hsr_kbench PROPERTIES OUTPUT_NAME hsr-kbench)
target_link_libraries(hsr_kbench PRIVATE hsr_static)
# the modules' INTERNAL headers by their path from the source tree
target_include_directories(hsr_kbench PRIVATE ${CMAKE_SOURCE_DIR})
install(TARGETS hsr_kbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

