# runtime/: layout and config (unit), the example model (unit), the engine (multi-rank).
hsr_add_unit(test_rt_layout test_rt_layout.c)
hsr_add_unit(test_mlp test_mlp.c ${CMAKE_SOURCE_DIR}/examples/mlp.c)
