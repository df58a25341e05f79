# vm-tests/acceptance/tests.cmake (include()d from the top-level
# CMakeLists.txt; not part of the sanitizer tree):
#   acceptance.report-gate  (host) mutation cases of the acceptance report's
#       Node SEA binding: a Node 20 SEA or another SEA hash never yields "pass"
# The acceptance suite and the demo on a real systemd (vm.acceptance.*,
# vm.demo.bookworm) are registered in vm-tests/CMakeLists.txt.
if(OPENCODE_SANITIZE)
  return()
endif()

add_test(NAME acceptance.report-gate
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/acceptance/report-gate-test.sh")
# 17 s in a loaded full run; 300 s is a hang guard for a host four times slower.
set_tests_properties(acceptance.report-gate PROPERTIES LABELS gate TIMEOUT 300)

