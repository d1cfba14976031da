# runtime/ops/exec_ref.c is plain C (ts_ops_ref): its test builds on every machine, GPU or not.
add_executable(test_exec_ref ${CMAKE_SOURCE_DIR}/tests/test_exec_ref.c)
target_link_libraries(test_exec_ref PRIVATE ts_ops_ref ts_common PkgConfig::CUNIT m)
add_test(NAME exec_ref COMMAND test_exec_ref)
# DeepSeek-V3's routing kernels' C references (kernels/moe_route_group_ref.c) against the float64 routing.
add_executable(test_moe_route_group_ref ${CMAKE_SOURCE_DIR}/tests/test_moe_route_group_ref.c)
target_link_libraries(test_moe_route_group_ref PRIVATE ts_ops_ref ts_kernels_ref ts_common PkgConfig::CUNIT m)
add_test(NAME moe_route_group_ref COMMAND test_moe_route_group_ref)

# Which plan_build_program() ops the executor runs (runtime/exec/exec_walk_map.c, plain C: ts_exec_cpu).
if(TARGET ts_plan)
  add_executable(test_exec_walk ${CMAKE_SOURCE_DIR}/tests/test_exec_walk.c)
  target_link_libraries(test_exec_walk PRIVATE ts_exec_cpu ts_plan ts_models ts_common PkgConfig::CUNIT m)
  target_compile_definitions(test_exec_walk PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  # from the source root: the validation plans name their model by a relative path
  add_test(NAME exec_walk COMMAND test_exec_walk WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The executor's GPU kernel tests against float64 CPU references (CUDA, no
# CUnit: the GPU machine has none); each exits 77 without a GPU.
#   exec_gpu_test(NAME): test_NAME built from tests/test_NAME.cu, linked with the
#   ops library (runtime/ops/, ts_ops), ctest name NAME, labels gpu and nosan.
function(exec_gpu_test name)
  add_executable(test_${name} ${CMAKE_SOURCE_DIR}/tests/test_${name}.cu)
  target_link_libraries(test_${name} PRIVATE ts_ops ts_common CUDA::cudart m)
  set_target_properties(test_${name} PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME ${name} COMMAND test_${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endfunction()
if(TACOSIM_HAVE_GPU)
  exec_gpu_test(exec_flash_gpu) # the fused causal attention (exec_flash.cu)
  exec_gpu_test(exec_norm_gpu)  # the one-kernel norm backward (exec_kernels.cu)
  exec_gpu_test(exec_ce_gpu)    # vocabulary-parallel cross-entropy, TP 2 on one GPU (exec_kernels.cu)
  exec_gpu_test(reduce_ordered_gpu) # sums over rows/tokens in a fixed order (--variant reduce=ordered)
  exec_gpu_test(rt_ops_gpu)     # norms, element-wise, softmax, AdamW vs C (rt_ops*.cu, rt_ops_selfcheck.c)
  exec_gpu_test(infer_argmax_gpu) # greedy sampling vs C (infer_kernels.cu, infer_ref.c)
endif()

# Context parallelism's attention math on the CPU (runtime/ops/cp_attention_ref.c, plain C).
add_executable(test_cp_attention_ref ${CMAKE_SOURCE_DIR}/tests/test_cp_attention_ref.c)
target_link_libraries(test_cp_attention_ref PRIVATE ts_ops_ref PkgConfig::CUNIT m)
add_test(NAME cp_attention_ref COMMAND test_cp_attention_ref)

# ... and on the GPU (runtime/ops/cp_attention.cu): each rank's ring steps combined, against the float64
# reference and exec_flash_fwd (no CUnit; exit 77 without a GPU). cp_attention_host runs the kernels'
# own per-row arithmetic on the CPU (--host), so the mask and the combine are checked on every machine
# that builds the CUDA half.
if(TACOSIM_HAVE_GPU)
  exec_gpu_test(cp_attention_gpu)
  add_test(NAME cp_attention_host COMMAND test_cp_attention_gpu --host --max-seq 512)
  set_tests_properties(cp_attention_host PROPERTIES LABELS "nosan")
endif()

# The executor's kernel and schedule variants as options (runtime/ops/ops_variants.c, plain C).
add_executable(test_ops_variants ${CMAKE_SOURCE_DIR}/tests/test_ops_variants.c)
target_link_libraries(test_ops_variants PRIVATE ts_ops_ref ts_common PkgConfig::CUNIT m)
add_test(NAME exec_ops_variants COMMAND test_ops_variants)

# Expert parallelism's host arithmetic (runtime/exec/exec_ep.c, plain C: ts_exec_cpu): ranks, experts,
# routing counts and offsets, bytes sent; the shipped EP plans' groups against the plan's.
if(TARGET ts_plan)
  add_executable(test_exec_ep ${CMAKE_SOURCE_DIR}/tests/test_exec_ep.c)
  target_link_libraries(test_exec_ep PRIVATE ts_exec_cpu ts_plan ts_models ts_common PkgConfig::CUNIT m)
  target_compile_definitions(test_exec_ep PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  add_test(NAME exec_ep COMMAND test_exec_ep WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The executor's bounded waits failed on purpose (tests/test_exec_faults_gpu.cu): a watchdog thread that
# cannot start is refused with its named error (no GPU needed), and the stream wait's timeout ends a wait
# on a kernel that does not finish (one GPU; exit 77 without).
if(TACOSIM_HAVE_GPU)
  add_executable(test_exec_faults_gpu ${CMAKE_SOURCE_DIR}/tests/test_exec_faults_gpu.cu)
  target_link_libraries(test_exec_faults_gpu PRIVATE ts_exec ts_common CUDA::cudart m)
  set_target_properties(test_exec_faults_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME exec_watchdog_fault COMMAND test_exec_faults_gpu --watchdog)
  set_tests_properties(exec_watchdog_fault PROPERTIES LABELS "nosan")
  add_test(NAME exec_stream_wait_gpu COMMAND test_exec_faults_gpu --stream-wait)
  set_tests_properties(exec_stream_wait_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  # DeepSeek-V3's routing kernels against their C references (runtime/exec/exec_check_route.c)
  add_executable(test_moe_route_group_gpu ${CMAKE_SOURCE_DIR}/tests/test_moe_route_group_gpu.c)
  target_link_libraries(test_moe_route_group_gpu PRIVATE ts_exec ts_common CUDA::cudart m)
  add_test(NAME moe_route_group_gpu COMMAND test_moe_route_group_gpu)
  set_tests_properties(moe_route_group_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endif()
