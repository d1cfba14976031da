# The clock section of `tacorun calibrate`: its plain-C arithmetic (burst
# sizing, the power controller's window) on a CPU; no CUDA needed, so it also
# runs in the ASan build.
add_executable(test_calibrate_clock ${CMAKE_SOURCE_DIR}/tests/test_calibrate_clock.c)
target_link_libraries(test_calibrate_clock PRIVATE ts_calibrate_cpu ts_common PkgConfig::CUNIT m)
add_test(NAME calibrate_clock COMMAND test_calibrate_clock)

# The power phase of `tacorun calibrate`: its pattern planner, fractions,
# speeds, JSON and TSV writers, and NVML's open path without the library; CPU only.
add_executable(test_calibrate_power ${CMAKE_SOURCE_DIR}/tests/test_calibrate_power.c)
target_link_libraries(test_calibrate_power PRIVATE ts_calibrate_cpu ts_common PkgConfig::JANSSON PkgConfig::CUNIT m)
add_test(NAME calibrate_power COMMAND test_calibrate_power)
