# Tests of plan/: loading and validation, placement, schedules, programs.
add_executable(test_plan_load ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_load.c)
target_link_libraries(test_plan_load PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_plan_load PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
                           SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME plan_load COMMAND test_plan_load)

add_executable(test_plan_program ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_program.c)
target_link_libraries(test_plan_program PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_plan_program PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME plan_program COMMAND test_plan_program)

add_executable(test_plan_comm_options ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_comm_options.c)
target_link_libraries(test_plan_comm_options PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_plan_comm_options PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME plan_comm_options COMMAND test_plan_comm_options)

# Benchmark (prints figures, asserts nothing about time): program build time
# and ops per rank for a plan. Not a test.
add_executable(bench_plan ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_bench.c)
target_link_libraries(bench_plan PRIVATE ts_plan m)

if(TACOSIM_FUZZ)
  include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake)
  tacosim_add_fuzzer(fuzz_plan fuzz/fuzz_plan.c ts_plan)
  tacosim_add_fuzzer(fuzz_plan_infer fuzz/fuzz_plan_infer.c ts_plan)
  tacosim_add_fuzzer(fuzz_reshape fuzz/fuzz_reshape.c ts_plan)
endif()

# Data-parallel sharding (ZeRO-1/2/3) and the distributed optimizer's overlaps (plan/plan_program_zero.c).
add_executable(test_plan_zero ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_zero.c)
target_link_libraries(test_plan_zero PRIVATE ts_plan PkgConfig::CUNIT m)
add_test(NAME plan_zero COMMAND test_plan_zero)

# layout.tp_comm_overlap under sequence parallelism (plan/plan_program_tpo.c).
add_executable(test_plan_tpo ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_tpo.c)
target_link_libraries(test_plan_tpo PRIVATE ts_plan PkgConfig::CUNIT m)
add_test(NAME plan_tpo COMMAND test_plan_tpo)

add_executable(test_plan_limits ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_limits.c)
target_link_libraries(test_plan_limits PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_plan_limits PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME plan_limits COMMAND test_plan_limits)

# Context parallelism (plan/plan_program_cp.c).
add_executable(test_plan_cp ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_cp.c)
target_link_libraries(test_plan_cp PRIVATE ts_plan PkgConfig::CUNIT m)
add_test(NAME plan_cp COMMAND test_plan_cp)

# A TACO codec's "group": "auto": the data-driven reshaping's choice (plan/plan_reshape.c).
add_executable(test_plan_reshape ${CMAKE_CURRENT_SOURCE_DIR}/test_plan_reshape.c)
target_link_libraries(test_plan_reshape PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_plan_reshape PRIVATE
  RESHAPE_CSV="${CMAKE_SOURCE_DIR}/experiments/loss/emu/reshape-124m-step1000.csv"
  EXAMPLE_PLAN="${CMAKE_SOURCE_DIR}/experiments/loss/gpt-h4096-tp2-taco-auto.json"
  EXAMPLE_RESHAPE="${CMAKE_SOURCE_DIR}/experiments/loss/emu/reshape-h4096-step299.csv")
add_test(NAME plan_reshape COMMAND test_plan_reshape)
