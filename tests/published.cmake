# experiments/published/run.sh: the dgxc set's FLOP count, per-row GPU label and predict column,
# on two rows in a scratch copy of the tree (tests/published_dgxc.sh)
add_test(NAME published_dgxc_run COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_dgxc.sh $<TARGET_FILE:tacosim>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(published_dgxc_run PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")
# experiments/published/dgxc/breakdown.sh: rank 0's ops, each in one class; columns as simulated
add_test(NAME published_dgxc_breakdown COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_breakdown.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(published_dgxc_breakdown PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")
# experiments/fig13-features.sh: the layout features of a few plans toggled one at a time, each variant's
# prediction against tacosim on the same variant written by hand, refusals named, the > 1 % table
add_test(NAME fig13_features COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fig13_features.sh $<TARGET_FILE:tacosim>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(fig13_features PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")
# experiments/published/dense-infer/run.sh: each predicted row's figure as its kind reads the simulation, the
# predict=no rows listed, a summary line per source (tests/published_dense_infer.sh, in a scratch copy)
add_test(NAME published_dense_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_dense_infer.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(published_dense_infer PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")
# experiments/published/moe-infer/run.sh: every row's fused and per-expert figures as its kind reads the two
# simulations (kernel, tpot, e2e, tput_gpu, ftl), FP8 rows recorded as such (tests/published_moe_infer.sh, in a
# scratch copy)
add_test(NAME published_moe_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_moe_infer.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(published_moe_infer PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")

# experiments/published/inflight-infer/run.sh: each predicted row's finite-run and steady-state throughput as the
# simulation's JSON gives it, the predict=no rows listed, a summary line per source and GPU
# (tests/published_inflight_infer.sh, in a scratch copy)
add_test(NAME published_inflight_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_inflight_infer.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(published_inflight_infer PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")

# experiments/published/mla-infer/run.sh: each predicted row's figure as its kind reads the simulation (kernel:
# the MLA decode attention), the latent cache recorded, the rows not predicted listed with their reason
# (tests/published_mla_infer.sh, in a scratch copy)
add_test(NAME published_mla_infer COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/published_mla_infer.sh
         $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
set_tests_properties(published_mla_infer PROPERTIES SKIP_RETURN_CODE 77 LABELS "nosan")
