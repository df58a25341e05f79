# vm-tests/acceptance/tests.cmake: ctest registrations of the acceptance suite
# and the demo (include()d from the top-level CMakeLists.txt). Not part of the
# sanitizer tree.
#   vm.acceptance.{bookworm,trixie,vm}  the deployment proof on installed
#       artifacts; the last run's report lands in
#       <build>/acceptance/report-<target>.{json,txt}
#   vm.demo.bookworm  the README's demo command (tools/demo), scripted, with
#       its transcript checked
#   acceptance.report-gate  (host) mutation cases of the report's Node SEA
#       binding: a Node 20 SEA or another SEA hash never yields "pass"
if(OPENCODE_SANITIZE)
  return()
endif()

foreach(_acc_target bookworm trixie vm)
  add_test(NAME vm.acceptance.${_acc_target}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/acceptance/run-acceptance" ${_acc_target}
                   "${CMAKE_BINARY_DIR}")
  # The harness gets --artifacts ${CMAKE_BINARY_DIR}; the SEA comes from the
  # node_sea fixture (node.sea-build, client/node/tests.cmake).
  set_tests_properties(vm.acceptance.${_acc_target} PROPERTIES
    ${OPENCODE_VM_SUITE_${_acc_target}}
    TIMEOUT 2400
    FIXTURES_REQUIRED node_sea
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
endforeach()

add_test(NAME acceptance.report-gate
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/acceptance/report-gate-test.sh")
set_tests_properties(acceptance.report-gate PROPERTIES LABELS gate TIMEOUT 60)

add_test(NAME vm.demo.bookworm
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/demo/check-demo.sh" "${CMAKE_BINARY_DIR}")
set_tests_properties(vm.demo.bookworm PROPERTIES
  ${OPENCODE_VM_SUITE_bookworm}
  TIMEOUT 1800)
