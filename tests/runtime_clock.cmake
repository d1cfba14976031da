# The clock section of `tacorun calibrate`: its plain-C arithmetic (burst
# sizing, the power controller's window) on a CPU; no CUDA needed, so it also
# runs in the ASan build.
add_executable(test_calibrate_clock ${CMAKE_SOURCE_DIR}/tests/test_calibrate_clock.c
  ${CMAKE_SOURCE_DIR}/runtime/calibrate/calibrate_clock_plan.c)
target_include_directories(test_calibrate_clock PRIVATE ${CMAKE_SOURCE_DIR}/runtime/ops ${CMAKE_SOURCE_DIR}/runtime/nccl ${CMAKE_SOURCE_DIR}/runtime/exec ${CMAKE_SOURCE_DIR}/runtime/infer ${CMAKE_SOURCE_DIR}/runtime/calibrate ${CMAKE_SOURCE_DIR}/runtime/train)
target_link_libraries(test_calibrate_clock PRIVATE ts_common PkgConfig::CUNIT m)
add_test(NAME calibrate_clock COMMAND test_calibrate_clock)
