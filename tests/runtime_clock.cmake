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
if(TACOSIM_HAVE_GPU AND TARGET tacorun)
  # its options: bad input fails before any GPU work, naming the option
  add_test(NAME calibrate_power_needs_json COMMAND tacorun calibrate --only power)
  set_tests_properties(calibrate_power_needs_json PROPERTIES PASS_REGULAR_EXPRESSION
                       "--power-json: required by the power phase")
  add_test(NAME calibrate_power_bad_window COMMAND tacorun calibrate --only power --power-json p.json --power-timed-s 0)
  set_tests_properties(calibrate_power_bad_window PROPERTIES PASS_REGULAR_EXPRESSION
                       "--power-timed-s: '0' must be a number of seconds in \\[0.1, 60\\]")
  add_test(NAME calibrate_power_json_alone COMMAND tacorun calibrate --only clock --power-json p.json)
  set_tests_properties(calibrate_power_json_alone PROPERTIES PASS_REGULAR_EXPRESSION
                       "--power-json: only the power phase writes it")
  add_test(NAME calibrate_power_no_out COMMAND tacorun calibrate --only power --power-json p.json --out c.json)
  set_tests_properties(calibrate_power_no_out PROPERTIES PASS_REGULAR_EXPRESSION
                       "--out: --only power writes no calibration file")
endif()
