# Tests of kernels/: the plain-C reference (CPU, CUnit, runs in CI), and the
# GPU comparison against it (CUDA, no CUnit: the GPU machine has none), which
# prints "SKIP: no CUDA device" and exits 77 where there is no GPU.
add_executable(test_kernels_ref ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_ref.c)
target_link_libraries(test_kernels_ref PRIVATE ts_kernels_ref PkgConfig::CUNIT m)
add_test(NAME kernels_ref COMMAND test_kernels_ref)

if(TACOSIM_HAVE_GPU AND TARGET ts_kernels_cuda)
  add_executable(test_kernels_gpu ${CMAKE_CURRENT_SOURCE_DIR}/test_kernels_gpu.cu)
  target_link_libraries(test_kernels_gpu PRIVATE ts_kernels_cuda ts_kernels_ref CUDA::cudart m)
  set_target_properties(test_kernels_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME kernels_gpu COMMAND test_kernels_gpu --quick)
  set_tests_properties(kernels_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endif()

# The fused MoE codec (permute + encode, decode + combine): reference against
# the unfused reference sequence (CPU), and the kernels against the reference.
add_executable(test_moe_codec_ref ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_codec_ref.c)
target_link_libraries(test_moe_codec_ref PRIVATE ts_kernels_ref PkgConfig::CUNIT m)
add_test(NAME moe_codec_ref COMMAND test_moe_codec_ref)
if(TACOSIM_HAVE_GPU AND TARGET ts_kernels_cuda)
  add_executable(test_moe_codec_gpu ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_codec_gpu.cu)
  target_link_libraries(test_moe_codec_gpu PRIVATE ts_kernels_cuda ts_kernels_ref CUDA::cudart m)
  set_target_properties(test_moe_codec_gpu PROPERTIES CUDA_ARCHITECTURES 90)
  add_test(NAME moe_codec_gpu COMMAND test_moe_codec_gpu --quick)
  set_tests_properties(moe_codec_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
endif()
