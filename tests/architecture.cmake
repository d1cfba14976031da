# The modules' arrows, from their CMake links and their sources' #include "..." lines: each
# points down the layering and is allowed by ARCHITECTURE.md, each include is backed by a
# link, no cycle between modules or between headers (tests/arch_check.py, plain python3).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME arch_check COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/arch_check.py)
else()
  message(STATUS "tacosim: python3 not found, the test arch_check is not registered")
endif()
