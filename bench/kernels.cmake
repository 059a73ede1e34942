# hsr-kbench: bandwidth of the kernels/ element-wise kernels (bench/kbench/).
add_executable(hsr_kbench ${CMAKE_SOURCE_DIR}/bench/kbench/kbench.c)
set_target_properties(hsr_kbench PROPERTIES OUTPUT_NAME hsr-kbench)
target_link_libraries(hsr_kbench PRIVATE hsr_static)
install(TARGETS hsr_kbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The host loops of kernels/ (this file is included at the top level, where
# the library target lives): sqrtf without errno so the AdamW loop is
# branch-free and vectorises; sqrt stays IEEE correctly rounded.
set_source_files_properties(${CMAKE_SOURCE_DIR}/kernels/loops.c PROPERTIES COMPILE_OPTIONS -fno-math-errno)
