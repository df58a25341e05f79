# bench/tests.cmake: ctest registration of the bench's smoke test (included
# from the top-level CMakeLists.txt). bench.smoke checks that the bench code
# parses, builds a report from raw records (the fixtures) and re-renders the
# table of every committed run and the chart of the newest, and draws
# vm-tests/faults/plot.py's soak and churn charts from fixtures
# (bench/tests/fixture/plot); the benchmark itself (bench/run) is never part
# of the test command.
if(OPENCODE_SANITIZE)
  return()
endif()
add_test(NAME bench.smoke COMMAND "${CMAKE_CURRENT_LIST_DIR}/smoke.sh")
# matplotlib is most of the time: a chart costs ~0.75 s at load average 4 and up to ~9 s at 30 on
# these 2-core machines. With 5 drawn (the fixtures', the newest run's and plot.py's two):
# 21 s measured at load 10, 131 s in a loaded full run (fresh clone, 2026-12-07): 900 s is a
# hang guard for a host four times slower than that one.
set_tests_properties(bench.smoke PROPERTIES LABELS bench TIMEOUT 900)
