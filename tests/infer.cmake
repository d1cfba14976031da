# Tests of inference plans (plan/plan_infer*) and their prediction (sim/sim_infer*).
add_executable(test_infer ${CMAKE_CURRENT_SOURCE_DIR}/test_infer.c)
target_link_libraries(test_infer PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
target_compile_definitions(test_infer PRIVATE PLANS_DIR="${CMAKE_SOURCE_DIR}/experiments/plans/infer-llama3-8b-tp2"
  CALIBRATION_DIR="${CMAKE_SOURCE_DIR}/calibration" TACOSIM_BIN="$<TARGET_FILE:tacosim>")
add_dependencies(test_infer tacosim)
add_test(NAME infer COMMAND test_infer)

# runtime/ops/infer_ref.c is plain C (ts_ops_ref): its test builds on every machine, GPU or not.
add_executable(test_infer_ref ${CMAKE_CURRENT_SOURCE_DIR}/test_infer_ref.c)
target_link_libraries(test_infer_ref PRIVATE ts_ops_ref ts_kernels_ref ts_plan ts_schema PkgConfig::CUNIT m) # taco_fp8.h: the second E4M3
add_test(NAME infer_ref COMMAND test_infer_ref)

# The inference plan's "quantization": "fp8": FP8 weights' bytes by hand, decode GEMMs above their read floor
# and below BF16's, refusals naming file and field (tests/infer_fp8.sh)
add_test(NAME infer_fp8 COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_fp8.sh $<TARGET_FILE:tacosim>)
set_tests_properties(infer_fp8 PROPERTIES LABELS "nosan")

# The inference plan's "prefill_attention": fused kernels priced from attention_backends, above the causal
# FLOP floor and below the executor's unfused attention (tests/infer_prefill_attention.sh)
add_test(NAME infer_prefill_attention COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_prefill_attention.sh $<TARGET_FILE:tacosim>)
set_tests_properties(infer_prefill_attention PROPERTIES LABELS "nosan")
# The inference plan's "decode_attention": per-query-head prices a GQA decode attention that reads the KV cache once
# per query head; recorded, refused where bad, passed through search-infer (tests/infer_decode_attention.sh)
add_test(NAME infer_decode_attention COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_decode_attention.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(infer_decode_attention PROPERTIES LABELS "nosan" SKIP_RETURN_CODE 77)

# tacosim search-infer: counts, ranking, emitted plans simulate to the rows, limits, A100 without FP8, bad
# options (tests/search_infer.sh)
add_test(NAME search_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/search_infer.sh $<TARGET_FILE:tacosim>)
set_tests_properties(search_infer PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")

# tacosim search-infer --inflight: max_batch candidates resolved once, ranking, emitted in-flight plans simulate to
# the rows, caps and the KV-cache fit, limits, bad options (tests/search_infer_inflight.sh)
add_test(NAME search_infer_inflight COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/search_infer_inflight.sh $<TARGET_FILE:tacosim>)
set_tests_properties(search_infer_inflight PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")

# MoE inference plans with "quantization": "fp8": FP8 weights' bytes of Mixtral-8x7B and Qwen3-30B-A3B by hand, a
# decode step above its FP8 read floor and below BF16 under both moe_kernel settings, the A100 refused
add_executable(test_infer_moe_fp8 ${CMAKE_CURRENT_SOURCE_DIR}/test_infer_moe_fp8.c)
target_link_libraries(test_infer_moe_fp8 PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
target_compile_definitions(test_infer_moe_fp8 PRIVATE CALIBRATION_DIR="${CMAKE_SOURCE_DIR}/calibration")
add_test(NAME infer_moe_fp8 COMMAND test_infer_moe_fp8)
# quantization nvfp4 (sim/INFERENCE.md, "NVFP4 weights"): the weights' bytes, the GEMM rule, the batch heuristic, a
# B200 decode step, the refusal without FP4 tensor cores (tests/test_infer_nvfp4.c)
add_executable(test_infer_nvfp4 ${CMAKE_CURRENT_SOURCE_DIR}/test_infer_nvfp4.c)
target_link_libraries(test_infer_nvfp4 PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
add_test(NAME infer_nvfp4 COMMAND test_infer_nvfp4 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

# In-flight batching plans (plan/plan_inflight.c, sim/sim_inflight.c).
add_executable(test_inflight ${CMAKE_CURRENT_SOURCE_DIR}/test_inflight.c)
target_link_libraries(test_inflight PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
target_compile_definitions(test_inflight PRIVATE CALIBRATION_DIR="${CMAKE_SOURCE_DIR}/calibration"
  TACOSIM_BIN="$<TARGET_FILE:tacosim>")
add_dependencies(test_inflight tacosim)
add_test(NAME inflight COMMAND test_inflight)
if(TACOSIM_HAVE_GPU AND TARGET tacorun)
  # the inference executor serves static batches: an in-flight plan is refused before any GPU work, naming the field
  add_test(NAME infer_exec_refuses_inflight COMMAND tacorun execute
           ${CMAKE_SOURCE_DIR}/experiments/published/inflight-infer/plans/trt10-405b-h100-tp8-i1000-o1000.json)
  set_tests_properties(infer_exec_refuses_inflight PROPERTIES
    PASS_REGULAR_EXPRESSION "inflight: the inference executor serves one static batch"
    ENVIRONMENT "TACOSIM_MODELS_DIR=${CMAKE_SOURCE_DIR}/models;TACOSIM_TOPOLOGIES_DIR=${CMAKE_SOURCE_DIR}/topologies")
  add_test(NAME infer_exec_refuses_attention_dp COMMAND tacorun execute
           ${CMAKE_SOURCE_DIR}/experiments/published/inflight-infer/plans/trt10-qwen3-235b-h100-tp8-i1000-o1000.json)
  set_tests_properties(infer_exec_refuses_attention_dp PROPERTIES
    PASS_REGULAR_EXPRESSION "layout.attention_dp: the inference executor runs tensor parallelism only"
    ENVIRONMENT "TACOSIM_MODELS_DIR=${CMAKE_SOURCE_DIR}/models;TACOSIM_TOPOLOGIES_DIR=${CMAKE_SOURCE_DIR}/topologies")
  # a serving engine's FP8 context attention (prefill_attention fused-fp8) is refused likewise, naming the field
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/infer_exec_fused_fp8.json
       "{\"schema\":1,\"kind\":\"inference\",\"name\":\"fused-fp8\",\"model\":\"llama3-8b\",\"cluster\":\"h100x8-nvswitch\",
        \"layout\":{\"tp\":1,\"pp\":1},\"batch\":{\"size\":1,\"prompt\":128,\"generate\":4},\"kv_cache\":\"fp8\",
        \"prefill_attention\":\"fused-fp8\"}\n")
  add_test(NAME infer_exec_refuses_fused_fp8 COMMAND tacorun execute ${CMAKE_CURRENT_BINARY_DIR}/infer_exec_fused_fp8.json)
  set_tests_properties(infer_exec_refuses_fused_fp8 PROPERTIES
    PASS_REGULAR_EXPRESSION "prefill_attention: fused-fp8: the inference executor runs its own prefill attention"
    ENVIRONMENT "TACOSIM_MODELS_DIR=${CMAKE_SOURCE_DIR}/models;TACOSIM_TOPOLOGIES_DIR=${CMAKE_SOURCE_DIR}/topologies")
  # a GQA decode attention read once per query head (decode_attention per-query-head) is priced by the simulator only
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/infer_exec_per_query_head.json
       "{\"schema\":1,\"kind\":\"inference\",\"name\":\"per-query-head\",\"model\":\"llama3-8b\",\"cluster\":\"h100x8-nvswitch\",
        \"layout\":{\"tp\":1,\"pp\":1},\"batch\":{\"size\":1,\"prompt\":128,\"generate\":4},
        \"decode_attention\":\"per-query-head\"}\n")
  add_test(NAME infer_exec_refuses_per_query_head COMMAND tacorun execute ${CMAKE_CURRENT_BINARY_DIR}/infer_exec_per_query_head.json)
  set_tests_properties(infer_exec_refuses_per_query_head PROPERTIES
    PASS_REGULAR_EXPRESSION "decode_attention: per-query-head: the inference executor reads each KV head once"
    ENVIRONMENT "TACOSIM_MODELS_DIR=${CMAKE_SOURCE_DIR}/models;TACOSIM_TOPOLOGIES_DIR=${CMAKE_SOURCE_DIR}/topologies")
endif()

# Attention data parallelism and expert parallelism in inference plans (layout.attention_dp, layout.ep)
add_executable(test_infer_adp ${CMAKE_CURRENT_SOURCE_DIR}/test_infer_adp.c)
target_link_libraries(test_infer_adp PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
add_test(NAME infer_adp COMMAND test_infer_adp)
set_tests_properties(infer_adp PROPERTIES
  ENVIRONMENT "TACOSIM_MODELS_DIR=${CMAKE_SOURCE_DIR}/models;TACOSIM_TOPOLOGIES_DIR=${CMAKE_SOURCE_DIR}/topologies")

# MLA inference plans (DeepSeek-V3): the latent KV cache by hand, the absorbed decode attention
add_executable(test_infer_mla ${CMAKE_CURRENT_SOURCE_DIR}/test_infer_mla.c)
target_link_libraries(test_infer_mla PRIVATE ts_sim PkgConfig::CUNIT PkgConfig::JANSSON m)
target_compile_definitions(test_infer_mla PRIVATE CALIBRATION_DIR="${CMAKE_SOURCE_DIR}/calibration")
add_test(NAME infer_mla COMMAND test_infer_mla)

# every inference result tacosim writes loads where results are read (tacosim compare): in flight and MLA
add_test(NAME infer_result_load COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_result_load.sh $<TARGET_FILE:tacosim>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(infer_result_load PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}) # the plans name repository paths
# The calibration's "attention_fp8" section (FP8 over BF16 speed of one fused attention kernel by length):
# loader, writer, the ratio's lookup and its errors (tests/test_attn_fp8.c)
add_executable(test_attn_fp8 ${CMAKE_CURRENT_SOURCE_DIR}/test_attn_fp8.c)
target_link_libraries(test_attn_fp8 PRIVATE ts_schema PkgConfig::CUNIT m)
add_test(NAME attn_fp8 COMMAND test_attn_fp8)
