# Tests of the compressed collectives (kernels/coll_*) and their runtime helpers.
# The layout arithmetic is plain C: its CUnit suite builds and runs everywhere,
# also under ASan with TACOSIM_CUDA=OFF.
add_executable(test_coll_layout ${CMAKE_SOURCE_DIR}/tests/test_coll_layout.c)
target_link_libraries(test_coll_layout PRIVATE ts_kernels_ref ts_common PkgConfig::CUNIT m)
add_test(NAME coll_layout COMMAND test_coll_layout)
# The transport decision (--transport auto|p2p|shm|socket): plain C.
add_executable(test_coll_transport ${CMAKE_SOURCE_DIR}/tests/test_coll_transport.c)
target_link_libraries(test_coll_transport PRIVATE ts_kernels_ref PkgConfig::CUNIT)
add_test(NAME coll_transport COMMAND test_coll_transport)
if(TACOSIM_HAVE_GPU AND TARGET tacorun)
  # a transport that is not one of the four is bad input, named, before any GPU work
  add_test(NAME transport_bad_name COMMAND tacorun bench-comm --transport nvlink)
  set_tests_properties(transport_bad_name PROPERTIES PASS_REGULAR_EXPRESSION "--transport: 'nvlink' is not auto, p2p, shm or socket")
endif()
# Rank 0's NCCL id or its failure for every rank (no rank left waiting): plain C.
add_executable(test_rt_idmsg ${CMAKE_SOURCE_DIR}/tests/test_rt_idmsg.c)
target_link_libraries(test_rt_idmsg PRIVATE ts_rt_idmsg PkgConfig::CUNIT)
add_test(NAME rt_idmsg COMMAND test_rt_idmsg)

# The plain-C reference of the host path's sum kernel (kernels/coll_host.h).
add_executable(test_coll_host_ref ${CMAKE_SOURCE_DIR}/tests/test_coll_host_ref.c)
target_link_libraries(test_coll_host_ref PRIVATE ts_kernels_ref PkgConfig::CUNIT m)
target_compile_options(test_coll_host_ref PRIVATE -ffp-contract=off)
add_test(NAME coll_host_ref COMMAND test_coll_host_ref)

# The GPU test: no CUnit (the GPU machine has none), exit 77 without a GPU.
# It needs the CUDA codec library; sizes are capped here so a CI machine that
# does have a GPU stays fast (the GPU machine runs it with TEST_COLL_MAX_BYTES
# unset, up to 1 GiB).
if(TACOSIM_HAVE_GPU AND TARGET ts_kernels_cuda)
  add_executable(test_coll_gpu ${CMAKE_SOURCE_DIR}/tests/test_coll_gpu.c)
  target_link_libraries(test_coll_gpu PRIVATE ts_rt_nccl ts_kernels_cuda ts_common CUDA::cudart ${NCCL_LIBRARY} m)
  add_test(NAME coll_gpu COMMAND test_coll_gpu)
  set_tests_properties(coll_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan"
                                           ENVIRONMENT "TEST_COLL_MAX_BYTES=67108864;NCCL_NVLS_ENABLE=0")
endif()

# The plain-C half of `tacorun bench-decode-step` (runtime/bench/bench_decode_step_grid.c): its options, a point's
# read floor against execute's count, the memory a point needs, the rows. Builds and runs without a GPU.
add_executable(test_decode_grid ${CMAKE_SOURCE_DIR}/tests/test_decode_grid.c)
target_link_libraries(test_decode_grid PRIVATE ts_bench_cpu PkgConfig::CUNIT m)
add_test(NAME decode_grid COMMAND test_decode_grid)
