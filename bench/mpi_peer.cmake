# bench/mpi_peer: the same benchmark through Open MPI, for side-by-side runs
# (bench/coll_vs_mpi.sh). Built only when an MPI C compiler wrapper is found.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(mpi_peer ${CMAKE_SOURCE_DIR}/bench/mpi_peer/mpi_peer.c)
  # nccl-tests' conventions, shared with hsr bench (tools/bench/nccl_table.h)
  target_include_directories(mpi_peer PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(mpi_peer PRIVATE MPI::MPI_C m)
  message(STATUS "hsr: MPI ${MPI_C_VERSION}: building bench/mpi_peer")
else()
  message(STATUS "hsr: MPI not found (apt-get install libopenmpi-dev): bench/mpi_peer not built")
endif()
