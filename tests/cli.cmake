# Tests of the command lines (tests/test_cli.c): every tacosim command's --help
# against its parser, unknown model names, directories and files over the
# input cap given to each loader; and, where tacorun is built, its commands'
# --help without a GPU.
add_executable(test_cli ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.c)
target_link_libraries(test_cli PRIVATE ts_models PkgConfig::CUNIT)
target_compile_definitions(test_cli PRIVATE TACOSIM_BIN="$<TARGET_FILE:tacosim>" SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(test_cli tacosim)
if(TARGET tacorun)
  target_compile_definitions(test_cli PRIVATE TACORUN_BIN="$<TARGET_FILE:tacorun>")
  add_dependencies(test_cli tacorun)
endif()
add_test(NAME cli COMMAND test_cli)
