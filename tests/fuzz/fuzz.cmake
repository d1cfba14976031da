# Fuzz targets: every JSON loader has one, built only with -DTACOSIM_FUZZ=ON
# (clang; scripts/fuzz.sh configures that build and runs every fuzz_* target).
#
# To add a target for your loader, in your tests/<module>.cmake:
#   if(TACOSIM_FUZZ)
#     include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake)
#     tacosim_add_fuzzer(fuzz_topo fuzz/fuzz_topo.c ts_topologies)
#   endif()
# then put a few valid input files in tests/fuzz/corpus/fuzz_topo/ as seeds
# and, optionally, a libFuzzer dictionary in tests/fuzz/fuzz_topo.dict.
include_guard(GLOBAL)

if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TACOSIM_FUZZ needs clang (configure with CC=clang)")
endif()

# tacosim_add_fuzzer(NAME SOURCE LIBRARY...): a libFuzzer executable NAME
# built from SOURCE (relative to tests/) and linked with the libraries.
function(tacosim_add_fuzzer name source)
  add_executable(${name} ${CMAKE_CURRENT_SOURCE_DIR}/${source})
  target_link_libraries(${name} PRIVATE ${ARGN})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
endfunction()
