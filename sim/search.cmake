# ts_search: the layout search behind `tacosim search` (capacity planning).
# Included by sim/CMakeLists.txt (`include(search.cmake)`), or by
# tests/search.cmake when sim/ does not include it yet.
set(TACOSIM_SEARCH_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(ts_search STATIC
  ${TACOSIM_SEARCH_DIR}/search.c
  ${TACOSIM_SEARCH_DIR}/search_space.c
  ${TACOSIM_SEARCH_DIR}/search_estimate.c
  ${TACOSIM_SEARCH_DIR}/search_workers.c
  ${TACOSIM_SEARCH_DIR}/search_report.c
  ${TACOSIM_SEARCH_DIR}/search_emit.c
  ${TACOSIM_SEARCH_DIR}/search_main.c)
target_include_directories(ts_search PUBLIC ${TACOSIM_SEARCH_DIR})
target_link_libraries(ts_search PUBLIC ts_sim PkgConfig::JANSSON m)
target_compile_definitions(ts_search PRIVATE TACOSIM_CALIBRATION_DIR="${TACOSIM_CALIBRATION_DIR}")
