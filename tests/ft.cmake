# ft/ (replica groups that train on across failures): the engine's side
# (outer reduction, installing a peer's state) on 2 ranks.
set(_ft_mlp ${CMAKE_SOURCE_DIR}/examples/mlp.c ${CMAKE_SOURCE_DIR}/examples/mlp_nocuda.c
            ${CMAKE_SOURCE_DIR}/examples/mlp_feed.c ${CMAKE_SOURCE_DIR}/examples/mlp_rt.c)
if(HSR_HAVE_CUDA)
  list(APPEND _ft_mlp ${CMAKE_SOURCE_DIR}/examples/mlp_cuda.cu)
endif()
hsr_add_program(mr_outer mr_outer.c ${_ft_mlp})
hsr_add_mpi_test(NAME ft_outer_2 NP 2 ENV OPENBLAS_NUM_THREADS=1 COMMAND $<TARGET_FILE:mr_outer> LABELS ft)
