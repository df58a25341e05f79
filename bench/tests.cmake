# bench/tests.cmake: ctest registration of the bench's smoke test (included
# from the top-level CMakeLists.txt). bench.smoke checks that the bench code
# parses and rebuilds the report of the newest committed run; the benchmark
# itself (bench/run) is never part of the test command.
if(OPENCODE_SANITIZE)
  return()
endif()
add_test(NAME bench.smoke COMMAND "${CMAKE_CURRENT_LIST_DIR}/smoke.sh")
set_tests_properties(bench.smoke PROPERTIES LABELS bench TIMEOUT 120)
