# Tests of the mixture-of-experts side (models/, plan/): zoo counts against the
# published figures, loader rules, EP groups, per-rank token traffic, memory.
add_executable(test_moe ${CMAKE_CURRENT_SOURCE_DIR}/test_moe.c)
target_link_libraries(test_moe PRIVATE ts_plan PkgConfig::CUNIT m)
add_test(NAME moe COMMAND test_moe)
