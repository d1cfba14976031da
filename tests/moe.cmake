# Tests of the mixture-of-experts side (models/, plan/): zoo counts against the
# published figures, loader rules, EP groups, per-rank token traffic, memory.
add_executable(test_moe ${CMAKE_CURRENT_SOURCE_DIR}/test_moe.c)
target_link_libraries(test_moe PRIVATE ts_plan PkgConfig::CUNIT m)
target_compile_definitions(test_moe PRIVATE SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME moe COMMAND test_moe)

# The layout search's EP enumeration (sim/search_space.c).
if(NOT TARGET ts_search)
  include(${CMAKE_SOURCE_DIR}/sim/search.cmake)
endif()
add_executable(test_moe_search ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_search.c)
target_link_libraries(test_moe_search PRIVATE ts_search PkgConfig::CUNIT m)
add_test(NAME moe_search COMMAND test_moe_search)

# The simulator on MoE ops, by hand (a2a on a switch, the imbalance wait).
add_executable(test_moe_sim ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_sim.c)
target_link_libraries(test_moe_sim PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME moe_sim COMMAND test_moe_sim)

# The MoE tables of a calibration: the routing kernels' reference, the
# grouped-GEMM names and loader rules, the simulator pricing from them.
add_executable(test_moe_costs ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_costs.c)
target_link_libraries(test_moe_costs PRIVATE ts_sim ts_kernels_ref PkgConfig::CUNIT m)
add_test(NAME moe_costs COMMAND test_moe_costs)

# The host clock (sim/sim_host.h): host- and GPU-bound phases by hand, the
# calibration's "host" section, the plan's launch counts, a whole iteration.
add_executable(test_sim_host ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_host.c)
target_link_libraries(test_sim_host PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME sim_host COMMAND test_sim_host)

# layout.recompute_modules (plan/plan_recompute.c): rules, bytes by hand, recompute ops.
add_executable(test_recompute_modules ${CMAKE_CURRENT_SOURCE_DIR}/test_recompute_modules.c)
target_link_libraries(test_recompute_modules PRIVATE ts_plan PkgConfig::CUNIT m)
add_test(NAME recompute_modules COMMAND test_recompute_modules)

# The flex (DeepEP) dispatcher across nodes: copy counts against brute force,
# the RDMA / NVLink legs' groups and bytes, the loader's rule, the RDMA leg simulated.
add_executable(test_moe_nodes ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_nodes.c)
target_link_libraries(test_moe_nodes PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME moe_nodes COMMAND test_moe_nodes)

# The flex dispatcher's kernels at their published rates: each link share by hand, one HybridEP dispatch of
# the GB200 row (destinations, bytes, kernels, time), layout.moe_hybridep_num_sms's rules.
add_executable(test_moe_flex ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_flex.c)
target_link_libraries(test_moe_flex PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME moe_flex COMMAND test_moe_flex)

# A training framework's host time (the calibration's "framework_host" section, the plan's host_framework,
# sim/sim_host.c): the section's loader and errors, per-entry rates by hand, a host-bound iteration.
add_executable(test_framework_host ${CMAKE_CURRENT_SOURCE_DIR}/test_framework_host.c)
target_link_libraries(test_framework_host PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME framework_host COMMAND test_framework_host)

# An MoE inference plan prices its decode step's grouped expert GEMMs below the tables' range by their
# bytes too: at least the weights at the HBM rate, no ceiling failure (tests/moe_infer.sh)
add_test(NAME moe_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/moe_infer.sh $<TARGET_FILE:tacosim>)
set_tests_properties(moe_infer PROPERTIES LABELS "nosan")
# the inference plan's "moe_kernel": a fused decode step's routed experts take their active weights at the
# HBM rate (by hand), per-expert no less; a CUDA graph's floor counts the active experts only; bad values exit 2
# naming file and field (tests/moe_infer_fused.sh)
add_test(NAME moe_infer_fused COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/moe_infer_fused.sh $<TARGET_FILE:tacosim>)
set_tests_properties(moe_infer_fused PROPERTIES LABELS "nosan")
