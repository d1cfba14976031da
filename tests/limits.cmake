# Limits of the loaders: the load-time benchmark of large calibration files
# (an executable that prints figures, not a test: build/tests/bench_calibration_load).
add_executable(bench_calibration_load ${CMAKE_CURRENT_SOURCE_DIR}/bench_calibration_load.c)
target_link_libraries(bench_calibration_load PRIVATE ts_schema)
