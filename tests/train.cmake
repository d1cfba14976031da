# Tests of `tacorun train`: the plain-C parts on the CPU (the per-tensor FP8
# reference, the corpus split and batches), the CUDA per-tensor FP8 kernels
# against that reference (skips, exit 77, without a GPU), and bad input.
add_executable(test_train_ref ${CMAKE_CURRENT_SOURCE_DIR}/test_train_ref.c)
target_link_libraries(test_train_ref PRIVATE ts_train_cpu ts_kernels_ref ts_common PkgConfig::CUNIT m)
add_test(NAME train_ref COMMAND test_train_ref)

if(TACOSIM_HAVE_GPU AND TARGET tacorun)
  add_test(NAME train_codec_gpu COMMAND tacorun train --check-codec)
  set_tests_properties(train_codec_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  # bad input fails before any GPU work, naming the problem
  add_test(NAME train_bad_codec COMMAND tacorun train --corpus ${CMAKE_SOURCE_DIR}/README.md --codec fp9)
  set_tests_properties(train_bad_codec PROPERTIES PASS_REGULAR_EXPRESSION "--codec: 'fp9' is not none")
  add_test(NAME train_bad_corpus COMMAND tacorun train --corpus ${CMAKE_SOURCE_DIR}/no-such-corpus.txt)
  set_tests_properties(train_bad_corpus PROPERTIES PASS_REGULAR_EXPRESSION "no-such-corpus.txt: cannot open")
endif()

# The emulated TP all-reduce of `tacorun train --tp-emulate` and the ablation
# codecs, plain C: the emulation against a rank-by-rank model of the real
# collective, bit for bit (test_coll_emu_ref.c says what else).
add_executable(test_coll_emu_ref ${CMAKE_CURRENT_SOURCE_DIR}/test_coll_emu_ref.c)
target_link_libraries(test_coll_emu_ref PRIVATE ts_kernels_ref ts_common PkgConfig::CUNIT m)
add_test(NAME coll_emu_ref COMMAND test_coll_emu_ref)
if(TACOSIM_HAVE_GPU AND TARGET tacorun)
  # the emulated all-reduce of --tp-emulate on the GPU against its C reference, bit for bit
  add_test(NAME train_emu_gpu COMMAND tacorun train --check-emu)
  set_tests_properties(train_emu_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  add_test(NAME train_emu_only_codec COMMAND tacorun train --corpus ${CMAKE_SOURCE_DIR}/README.md --codec fp8-group)
  set_tests_properties(train_emu_only_codec PROPERTIES PASS_REGULAR_EXPRESSION "runs only in the emulation")
  # --inject-nan with --tp-emulate 2: the TACO encode's NaN count reported (step, layer, tensor,
  # count; exit 1), as the uncompressed run reports its NaN loss
  add_test(NAME train_nan_gpu COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/train_nan.sh $<TARGET_FILE:tacorun>
           ${CMAKE_SOURCE_DIR}/README.md)
  set_tests_properties(train_nan_gpu PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu;nosan")
  add_test(NAME train_reshape_missing COMMAND tacorun train --reshape ${CMAKE_SOURCE_DIR}/no-such-dump)
  set_tests_properties(train_reshape_missing PROPERTIES PASS_REGULAR_EXPRESSION "dump-index.csv: cannot open")
endif()
