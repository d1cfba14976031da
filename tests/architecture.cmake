# The folders' include arrows point one way and only where ARCHITECTURE.md
# allows (scripts/check-includes.sh; skips outside a git checkout).
add_test(NAME include_directions COMMAND ${CMAKE_SOURCE_DIR}/scripts/check-includes.sh)
set_tests_properties(include_directions PROPERTIES SKIP_RETURN_CODE 77)
