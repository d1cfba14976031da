# runtime/exec_ref.c is plain C: its test builds on every machine, GPU or not.
add_executable(test_exec_ref ${CMAKE_SOURCE_DIR}/tests/test_exec_ref.c ${CMAKE_SOURCE_DIR}/runtime/ops/exec_ref.c
               ${CMAKE_SOURCE_DIR}/runtime/ops/rt_ops_ref.c)
target_include_directories(test_exec_ref PRIVATE ${CMAKE_SOURCE_DIR}/runtime/ops ${CMAKE_SOURCE_DIR}/runtime/nccl ${CMAKE_SOURCE_DIR}/runtime/exec ${CMAKE_SOURCE_DIR}/runtime/infer ${CMAKE_SOURCE_DIR}/runtime/calibrate ${CMAKE_SOURCE_DIR}/runtime/train)
target_link_libraries(test_exec_ref PRIVATE ts_common PkgConfig::CUNIT m)
add_test(NAME exec_ref COMMAND test_exec_ref)

# Which plan_build_program() ops the executor runs (runtime/exec_walk_map.c, plain C).
if(TARGET ts_plan)
  add_executable(test_exec_walk ${CMAKE_SOURCE_DIR}/tests/test_exec_walk.c ${CMAKE_SOURCE_DIR}/runtime/exec/exec_walk_map.c)
  target_include_directories(test_exec_walk PRIVATE ${CMAKE_SOURCE_DIR}/runtime/ops ${CMAKE_SOURCE_DIR}/runtime/nccl ${CMAKE_SOURCE_DIR}/runtime/exec ${CMAKE_SOURCE_DIR}/runtime/infer ${CMAKE_SOURCE_DIR}/runtime/calibrate ${CMAKE_SOURCE_DIR}/runtime/train)
  target_link_libraries(test_exec_walk PRIVATE ts_plan ts_models ts_common PkgConfig::CUNIT m)
  target_compile_definitions(test_exec_walk PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  # from the source root: the validation plans name their model by a relative path
  add_test(NAME exec_walk COMMAND test_exec_walk WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The executor's GPU kernel tests against float64 CPU references (CUDA, no
# CUnit: the GPU machine has none); each exits 77 without a GPU.
#   exec_gpu_test(NAME SOURCE...): test_NAME built from tests/test_NAME.cu and
#   the runtime/ SOURCEs it tests, ctest name NAME, labels gpu and nosan.
function(exec_gpu_test name)
  set(sources ${CMAKE_SOURCE_DIR}/tests/test_${name}.cu)
  foreach(src ${ARGN})
    list(APPEND sources ${CMAKE_SOURCE_DIR}/runtime/ops/${src})
  endforeach()
  add_executable(test_${name} ${sources})
  target_include_directories(test_${name} PRIVATE ${CMAKE_SOURCE_DIR}/runtime/ops ${CMAKE_SOURCE_DIR}/runtime/nccl ${CMAKE_SOURCE_DIR}/runtime/exec ${CMAKE_SOURCE_DIR}/runtime/infer ${CMAKE_SOURCE_DIR}/runtime/calibrate ${CMAKE_SOURCE_DIR}/runtime/train)
  target_link_libraries(test_${name} PRIVATE ts_common CUDA::cudart m)
  set_target_properties(test_${name} PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME ${name} COMMAND test_${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endfunction()
if(TACOSIM_HAVE_GPU)
  exec_gpu_test(exec_flash_gpu exec_flash.cu)                  # the fused causal attention
  exec_gpu_test(exec_norm_gpu exec_kernels.cu rt_ops.cu)       # the one-kernel norm backward
  exec_gpu_test(exec_ce_gpu exec_kernels.cu)                   # vocabulary-parallel cross-entropy, TP 2 on one GPU
  exec_gpu_test(rt_ops_gpu rt_ops.cu rt_ops_layer.cu rt_ops_selfcheck.c rt_ops_ref.c) # norms, element-wise, softmax, AdamW vs C
endif()

# Context parallelism's attention math on the CPU (runtime/cp_attention_ref.c, plain C).
add_executable(test_cp_attention_ref ${CMAKE_SOURCE_DIR}/tests/test_cp_attention_ref.c
               ${CMAKE_SOURCE_DIR}/runtime/ops/cp_attention_ref.c)
target_include_directories(test_cp_attention_ref PRIVATE ${CMAKE_SOURCE_DIR}/runtime/ops ${CMAKE_SOURCE_DIR}/runtime/nccl ${CMAKE_SOURCE_DIR}/runtime/exec ${CMAKE_SOURCE_DIR}/runtime/infer ${CMAKE_SOURCE_DIR}/runtime/calibrate ${CMAKE_SOURCE_DIR}/runtime/train)
target_link_libraries(test_cp_attention_ref PRIVATE PkgConfig::CUNIT m)
add_test(NAME cp_attention_ref COMMAND test_cp_attention_ref)
