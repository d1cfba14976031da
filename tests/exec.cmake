# runtime/exec_ref.c is plain C: its test builds on every machine, GPU or not.
add_executable(test_exec_ref ${CMAKE_SOURCE_DIR}/tests/test_exec_ref.c ${CMAKE_SOURCE_DIR}/runtime/exec_ref.c)
target_include_directories(test_exec_ref PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_link_libraries(test_exec_ref PRIVATE ts_common PkgConfig::CUNIT m)
add_test(NAME exec_ref COMMAND test_exec_ref)

# Which plan_build_program() ops the executor runs (runtime/exec_walk_map.c, plain C).
if(TARGET ts_plan)
  add_executable(test_exec_walk ${CMAKE_SOURCE_DIR}/tests/test_exec_walk.c ${CMAKE_SOURCE_DIR}/runtime/exec_walk_map.c)
  target_include_directories(test_exec_walk PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_link_libraries(test_exec_walk PRIVATE ts_plan ts_models ts_common PkgConfig::CUNIT m)
  target_compile_definitions(test_exec_walk PRIVATE TACOSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  # from the source root: the validation plans name their model by a relative path
  add_test(NAME exec_walk COMMAND test_exec_walk WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endif()

# The fused causal attention (runtime/exec_flash.cu) against a float64 CPU
# reference (CUDA, no CUnit: the GPU machine has none); exits 77 without a GPU.
if(TACOSIM_HAVE_GPU)
  add_executable(test_exec_flash_gpu ${CMAKE_SOURCE_DIR}/tests/test_exec_flash_gpu.cu ${CMAKE_SOURCE_DIR}/runtime/exec_flash.cu)
  target_include_directories(test_exec_flash_gpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_link_libraries(test_exec_flash_gpu PRIVATE ts_common CUDA::cudart m)
  set_target_properties(test_exec_flash_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME exec_flash_gpu COMMAND test_exec_flash_gpu)
  set_tests_properties(exec_flash_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  # The one-kernel norm backward (runtime/exec_kernels.cu) against float64.
  add_executable(test_exec_norm_gpu ${CMAKE_SOURCE_DIR}/tests/test_exec_norm_gpu.cu
                 ${CMAKE_SOURCE_DIR}/runtime/exec_kernels.cu ${CMAKE_SOURCE_DIR}/runtime/rt_ops.cu)
  target_include_directories(test_exec_norm_gpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_link_libraries(test_exec_norm_gpu PRIVATE ts_common CUDA::cudart m)
  set_target_properties(test_exec_norm_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME exec_norm_gpu COMMAND test_exec_norm_gpu)
  set_tests_properties(exec_norm_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  # The vocabulary-parallel cross-entropy (both paths, TP 2 played on one GPU) against float64.
  add_executable(test_exec_ce_gpu ${CMAKE_SOURCE_DIR}/tests/test_exec_ce_gpu.cu ${CMAKE_SOURCE_DIR}/runtime/exec_kernels.cu)
  target_include_directories(test_exec_ce_gpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_link_libraries(test_exec_ce_gpu PRIVATE ts_common CUDA::cudart m)
  set_target_properties(test_exec_ce_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME exec_ce_gpu COMMAND test_exec_ce_gpu)
  set_tests_properties(exec_ce_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endif()
