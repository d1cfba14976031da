# runtime/exec_ref.c is plain C: its test builds on every machine, GPU or not.
add_executable(test_exec_ref ${CMAKE_SOURCE_DIR}/tests/test_exec_ref.c ${CMAKE_SOURCE_DIR}/runtime/exec_ref.c)
target_include_directories(test_exec_ref PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_link_libraries(test_exec_ref PRIVATE ts_common PkgConfig::CUNIT m)
add_test(NAME exec_ref COMMAND test_exec_ref)
