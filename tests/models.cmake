# Tests of models/: the zoo, per-layer ops, totals, and the loader's rules.
add_executable(test_models ${CMAKE_CURRENT_SOURCE_DIR}/test_models.c)
target_link_libraries(test_models PRIVATE ts_models PkgConfig::CUNIT m)
add_test(NAME models COMMAND test_models)

if(TACOSIM_FUZZ)
  include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake)
  tacosim_add_fuzzer(fuzz_model fuzz/fuzz_model.c ts_models)
endif()
