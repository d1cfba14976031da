# Tests of schema/ and sim/: calibration and result files (no SimGrid), and
# simulations (each scenario runs in a forked child: SimGrid initialises once
# per process).
add_executable(test_sim_schema ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_schema.c)
target_link_libraries(test_sim_schema PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME sim_schema COMMAND test_sim_schema)

# the calibration's "attention_shapes": loader, lookup, transfer, the simulator's attention ops
add_executable(test_calib_attn ${CMAKE_CURRENT_SOURCE_DIR}/test_calib_attn.c)
target_link_libraries(test_calib_attn PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_calib_attn PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME calib_attn COMMAND test_calib_attn)

add_executable(test_sim_engine ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_engine.c)
target_link_libraries(test_sim_engine PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_engine PRIVATE
  PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  CALIBRATION_FILE="${CMAKE_SOURCE_DIR}/calibration/h200-derived.json"
  NVLINK_CALIBRATION_FILE="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json"
  TACOSIM_BIN="$<TARGET_FILE:tacosim>")
add_dependencies(test_sim_engine tacosim)
add_test(NAME sim_engine COMMAND test_sim_engine)

# issue 20: DP 32-256, plain and ZeRO-1, reduced against full mode; simulator failures exit 3
add_executable(test_sim_dp_scale ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_dp_scale.c)
target_link_libraries(test_sim_dp_scale PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_dp_scale PRIVATE
  CALIBRATION_FILE="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME sim_dp_scale COMMAND test_sim_dp_scale)

if(TACOSIM_FUZZ)
  include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake)
  tacosim_add_fuzzer(fuzz_calibration fuzz/fuzz_calibration.c ts_schema)
  tacosim_add_fuzzer(fuzz_result fuzz/fuzz_result.c ts_schema)
endif()

# scripts/bundle-tacosim.sh: the GPU machine's tacosim (no SimGrid there) predicts what the installed one does
add_test(NAME bundle_tacosim COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bundle_tacosim.sh $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(bundle_tacosim PROPERTIES LABELS "nosan")

# The NCCL model (sim/sim_nccl.c): its known limits as tests; against published
# and measured figures as a benchmark program (experiments/nccl/run.sh; prints, asserts nothing).
add_executable(test_sim_nccl ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_nccl.c)
target_link_libraries(test_sim_nccl PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_nccl PRIVATE CALIBRATION_DIR="${CMAKE_SOURCE_DIR}/calibration")
add_test(NAME sim_nccl COMMAND test_sim_nccl)

add_executable(bench_nccl_model ${CMAKE_CURRENT_SOURCE_DIR}/bench_nccl_model.c)
target_link_libraries(bench_nccl_model PRIVATE ts_sim m)

add_executable(test_sim_trace_ranks ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_trace_ranks.c)
target_link_libraries(test_sim_trace_ranks PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_trace_ranks PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
                           TACOSIM_CALIBRATION_DIR="${TACOSIM_CALIBRATION_DIR}")
add_test(NAME sim_trace_ranks COMMAND test_sim_trace_ranks)

# sim_collapse.c: --collapse on predicts exactly what --collapse off does (in-node, rings, trees, DP+TP+PP)
add_executable(test_sim_collapse ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_collapse.c)
target_link_libraries(test_sim_collapse PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_collapse PRIVATE
  CALIBRATION_FILE="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME sim_collapse COMMAND test_sim_collapse)

# The calibration's "tp_comm_overlap_sm" section (schema/calibration.h, calibration/tpo-sm/): loader,
# interpolation by hand, writer, the shipped files.
add_executable(test_calib_tpo_sm ${CMAKE_CURRENT_SOURCE_DIR}/test_calib_tpo_sm.c)
target_link_libraries(test_calib_tpo_sm PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_calib_tpo_sm PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME calib_tpo_sm COMMAND test_calib_tpo_sm)

# The calibration's "power" section (schema/calibration_power.c): the fit recovers known parameters, refuses
# what it cannot determine, the clock of a mix under the cap by hand, the writer and loader, bad input.
add_executable(test_power_clock ${CMAKE_CURRENT_SOURCE_DIR}/test_power_clock.c)
target_link_libraries(test_power_clock PRIVATE ts_schema PkgConfig::CUNIT PkgConfig::JANSSON m)
add_test(NAME power_clock COMMAND test_power_clock)

# The calibration's "op_power" section (schema/calibration_op_power.c) and the clock of a window of ops under the
# cap from it (sim/sim_op_power.c): loader, writer, bad input, the nearest attention row, the clock by hand.
add_executable(test_op_power ${CMAKE_CURRENT_SOURCE_DIR}/test_op_power.c)
target_link_libraries(test_op_power PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME op_power COMMAND test_op_power)
