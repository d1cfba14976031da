# Tests of the calibration transfer between GPUs (sim/sim_transfer.c,
# sim/sim_cost_source.c) and the ceiling refusal of the simulator.
add_executable(test_sim_transfer ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_transfer.c)
target_link_libraries(test_sim_transfer PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME sim_transfer COMMAND test_sim_transfer)
target_compile_definitions(test_sim_transfer PRIVATE
  PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
