# experiments/infer/coverage.py (issue 24): what the default calibration prices from measured tables
# in a zoo model's inference plan, what from rules (tests/infer_coverage.sh).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND TARGET tacosim)
  add_test(NAME infer_coverage COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_coverage.sh ${Python3_EXECUTABLE}
                                       $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
endif()
# experiments/infer/floor.py (issue 24): a decode step's weight + KV-cache read floor, achieved GB/s and
# % of the floor, against the figures runtime/RESULTS-decode.md counted by hand (tests/infer_floor.sh).
if(Python3_Interpreter_FOUND)
  add_test(NAME infer_floor COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_floor.sh ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR})
endif()
# plan_infer_decode_floor_bytes (the decode floor `tacorun execute` prints) against floor.py's count on the shipped
# inference plans and a few written for LayerNorm / GELU / biases, layers_override and FP8 caches at TP 2; an MoE
# model refused by both (tests/infer_floor_c.sh).
if(Python3_Interpreter_FOUND AND TARGET tacosim)
  add_test(NAME infer_floor_c COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/infer_floor_c.sh ${Python3_EXECUTABLE}
                                      $<TARGET_FILE:tacosim> ${CMAKE_SOURCE_DIR})
  set_tests_properties(infer_floor_c PROPERTIES LABELS "nosan")
endif()
