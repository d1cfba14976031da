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
