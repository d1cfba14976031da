# Tests of the layout search (sim/search*.c): enumeration counts worked by
# hand, the memory filter, the estimate's ranking against simulation, and the
# command line's answers to bad flags.
if(NOT TARGET ts_search)
  include(${CMAKE_SOURCE_DIR}/sim/search.cmake)
endif()

# `search_cli` runs sim_search_main as `tacosim search` does, for the tests
# and for experiments/ before the command is wired into tacosim.
add_executable(search_cli ${CMAKE_CURRENT_SOURCE_DIR}/test_search_cli.c)
target_link_libraries(search_cli PRIVATE ts_search)

add_executable(test_search ${CMAKE_CURRENT_SOURCE_DIR}/test_search.c)
target_link_libraries(test_search PRIVATE ts_search PkgConfig::CUNIT m)
target_compile_definitions(test_search PRIVATE SEARCH_CLI="$<TARGET_FILE:search_cli>"
                           TACOSIM_CALIBRATION_DIR="${TACOSIM_CALIBRATION_DIR}")
add_test(NAME search COMMAND test_search)

# The search's feasibility against the plan loader on every zoo cluster x
# model (memory only), and --emit-plans' files against `tacosim simulate`.
add_executable(test_search_feasible ${CMAKE_CURRENT_SOURCE_DIR}/test_search_feasible.c)
target_link_libraries(test_search_feasible PRIVATE ts_search PkgConfig::CUNIT PkgConfig::JANSSON m)
if(TARGET tacosim)
  target_compile_definitions(test_search_feasible PRIVATE TACOSIM_BIN="$<TARGET_FILE:tacosim>")
  add_dependencies(test_search_feasible tacosim)
endif()
add_test(NAME search_feasible COMMAND test_search_feasible)

# The pruned search prints what the exhaustive one prints; the bound holds.
add_executable(test_search_prune ${CMAKE_CURRENT_SOURCE_DIR}/test_search_prune.c)
target_link_libraries(test_search_prune PRIVATE ts_search PkgConfig::CUNIT m)
add_test(NAME search_prune COMMAND test_search_prune)

# Under mpirun -np 2 the search prints the ranking one process prints
# (scripts compare the outputs without their time lines).
if(NOT DEFINED MPI_C_FOUND)
  find_package(MPI COMPONENTS C QUIET) # (found in sim/'s scope too; variables do not cross directories)
endif()
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  add_test(NAME search_mpi COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/search_mpi.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:search_cli>)
  # nosan: under LeakSanitizer the two MPI processes exit non-zero for Open MPI's own allocations
  # (libmpi's ompi_op_base_op_select and its unloaded plugins, never tacosim's); the search it runs
  # is checked under the sanitizers in one process by the other search tests.
  set_tests_properties(search_mpi PROPERTIES LABELS "nosan"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_warn_on_fork=0")
endif()
