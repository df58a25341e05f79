# bench/tests.cmake: ctest registration of the bench's smoke test (included
# from the top-level CMakeLists.txt). bench.smoke checks that the bench code
# parses and rebuilds the report of every committed run; the benchmark
# itself (bench/run) is never part of the test command.
if(OPENCODE_SANITIZE)
  return()
endif()
add_test(NAME bench.smoke COMMAND "${CMAKE_CURRENT_LIST_DIR}/smoke.sh")
# matplotlib draws ~20 charts: 180 s measured at load average 9 on these 2-core machines, ~210 s at 30.
set_tests_properties(bench.smoke PROPERTIES LABELS bench TIMEOUT 600)
