# Tests of the op costs: the calibration transfer between GPUs (sim/sim_transfer.c,
# sim/sim_cost_source.c), the ceiling refusal, unfused attention (sim/sim_costs.c).
add_executable(test_sim_transfer ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_transfer.c)
target_link_libraries(test_sim_transfer PRIVATE ts_sim PkgConfig::CUNIT m)
add_test(NAME sim_transfer COMMAND test_sim_transfer)
target_compile_definitions(test_sim_transfer PRIVATE
  PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")

add_executable(test_sim_attention ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_attention.c)
target_link_libraries(test_sim_attention PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_attention PRIVATE
  PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME sim_attention COMMAND test_sim_attention)

# The layouts of issue 22 in the simulator (ZeRO-3 traffic, parameter-gather overlap).
add_executable(test_sim_layouts ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_layouts.c)
target_link_libraries(test_sim_layouts PRIVATE ts_sim PkgConfig::CUNIT m)
target_include_directories(test_sim_layouts PRIVATE ${CMAKE_SOURCE_DIR}/plan)
target_compile_definitions(test_sim_layouts PRIVATE
  PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME sim_layouts COMMAND test_sim_layouts)

# Context parallelism in the simulator (the KV ring's time and overlap, reduced mode, TACO on KV).
add_executable(test_sim_cp ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_cp.c)
target_link_libraries(test_sim_cp PRIVATE ts_sim PkgConfig::CUNIT m)
target_include_directories(test_sim_cp PRIVATE ${CMAKE_SOURCE_DIR}/plan)
target_compile_definitions(test_sim_cp PRIVATE
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME sim_cp COMMAND test_sim_cp)

# cross_entropy_loss_fusion false: Megatron's unfused fp32 cross-entropy, kernel by kernel, worked by hand;
# the fused loss on the H100's own table points.
add_executable(test_sim_loss ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_loss.c)
target_link_libraries(test_sim_loss PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_loss PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans"
  TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME sim_loss COMMAND test_sim_loss)

# Attention priced at or above the GPU's ceilings on every shipped cluster x zoo model (issue 20's PCIe search).
add_executable(test_sim_attn_ceiling ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_attn_ceiling.c)
target_link_libraries(test_sim_attn_ceiling PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_attn_ceiling PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME sim_attn_ceiling COMMAND test_sim_attn_ceiling)

# layout.fp8: the loader, the program's FP8 GEMMs and casts, their prices by hand, "gemm_fp8", memory.
add_executable(test_fp8 ${CMAKE_CURRENT_SOURCE_DIR}/test_fp8.c)
target_link_libraries(test_fp8 PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_fp8 PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME fp8 COMMAND test_fp8)

# MLA as the executor runs it: unfused attention at q/k and v widths, the kv_scatter op, by hand.
add_executable(test_sim_mla ${CMAKE_CURRENT_SOURCE_DIR}/test_sim_mla.c)
target_link_libraries(test_sim_mla PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_sim_mla PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans")
add_test(NAME sim_mla COMMAND test_sim_mla)

# The transfer of the inference executor's keyed prefill attention tables by the bytes of its unfused program
# (sim/sim_transfer.c, kernel_table_bytes; models/model.h, model_prefill_attention_bytes).
add_executable(test_transfer_prefill_attn ${CMAKE_CURRENT_SOURCE_DIR}/test_transfer_prefill_attn.c)
target_link_libraries(test_transfer_prefill_attn PRIVATE ts_sim PkgConfig::CUNIT m)
target_compile_definitions(test_transfer_prefill_attn PRIVATE
  MEASURED_CALIBRATION="${CMAKE_SOURCE_DIR}/calibration/h200-nvlink.json")
add_test(NAME transfer_prefill_attn COMMAND test_transfer_prefill_attn)
