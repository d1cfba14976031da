# Tests of common/: the error record and the strict JSON getters.
add_executable(test_common ${CMAKE_CURRENT_SOURCE_DIR}/test_common.c)
target_link_libraries(test_common PRIVATE ts_common PkgConfig::CUNIT)
add_test(NAME common COMMAND test_common)
