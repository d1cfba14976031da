# ts_search: the layout search behind `tacosim search` (capacity planning).
# Included by sim/CMakeLists.txt (`include(search.cmake)`), or by
# tests/search.cmake when sim/ does not include it yet.
set(TACOSIM_SEARCH_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(ts_search STATIC
  ${TACOSIM_SEARCH_DIR}/search.c
  ${TACOSIM_SEARCH_DIR}/search_space.c
  ${TACOSIM_SEARCH_DIR}/search_estimate.c
  ${TACOSIM_SEARCH_DIR}/search_workers.c
  ${TACOSIM_SEARCH_DIR}/search_parts.c
  ${TACOSIM_SEARCH_DIR}/search_bound.c
  ${TACOSIM_SEARCH_DIR}/search_rounds.c
  ${TACOSIM_SEARCH_DIR}/search_mpi.c
  ${TACOSIM_SEARCH_DIR}/search_report.c
  ${TACOSIM_SEARCH_DIR}/search_emit.c
  ${TACOSIM_SEARCH_DIR}/search_main.c
  ${TACOSIM_SEARCH_DIR}/search_infer.c
  ${TACOSIM_SEARCH_DIR}/search_infer_main.c)
target_include_directories(ts_search PUBLIC ${TACOSIM_SEARCH_DIR})
# MPI (optional): under mpirun the search spreads its simulations over the
# processes (search_mpi.c); without MPI it is built as one process. libmpi is
# linked before SimGrid: SimGrid's library defines MPI_* too (its SMPI), and
# the first library on the link line is the one whose MPI_Init runs.
if(NOT DEFINED MPI_C_FOUND)
  find_package(MPI COMPONENTS C QUIET)
endif()
if(MPI_C_FOUND)
  target_link_libraries(ts_search PUBLIC MPI::MPI_C)
  target_compile_definitions(ts_search PRIVATE TACOSIM_HAVE_MPI=1)
endif()
target_link_libraries(ts_search PUBLIC ts_sim PkgConfig::JANSSON m)
target_compile_definitions(ts_search PRIVATE TACOSIM_CALIBRATION_DIR="${TACOSIM_CALIBRATION_DIR}")
