# client/node/tests.cmake: ctest registrations of the Node client (included
# from the top-level CMakeLists.txt). Not part of the sanitizer tree.
#   node.unit                 node:test unit tests of the module (fake supervisor)
#   node.sea-build            builds the Node SEA test app into <build>/node-sea/
#                             (fixture node_sea; postject from npm, pinned)
#   node.probe-dryrun         the inheritance probe's tracer on the host against a
#                             stand-in supervisor and the real helper, plus its
#                             negative control (root; not acceptance evidence)
#   vm.node-probe.bookworm    the probe on a real systemd, SEA as opencode-v2.service
#   vm.node-smoke.bookworm    the smoke suite, 10 fresh boots in a row
#   vm.node-example.bookworm  the README example, as the reader would run it
if(OPENCODE_SANITIZE)
  return()
endif()

set(_node_dir "${CMAKE_CURRENT_LIST_DIR}")
set(_vm_node "${PROJECT_SOURCE_DIR}/vm-tests/node")
find_program(OPENCODE_NODE node)
if(NOT OPENCODE_NODE)
  # No skip that looks like a pass: without node the tests fail, saying why.
  set(OPENCODE_NODE "${CMAKE_COMMAND}" -E false "node-not-found")
endif()

add_test(NAME node.unit
         COMMAND ${OPENCODE_NODE} --test "${_node_dir}/test/"
         WORKING_DIRECTORY "${_node_dir}")
set_tests_properties(node.unit PROPERTIES LABELS node TIMEOUT 300)

add_test(NAME node.sea-build
         COMMAND "${_node_dir}/sea/build.sh" "${CMAKE_BINARY_DIR}/node-sea" ${OPENCODE_NODE})
set_tests_properties(node.sea-build PROPERTIES
  LABELS node TIMEOUT 600 FIXTURES_SETUP node_sea)

add_test(NAME node.probe-dryrun
         COMMAND "${_node_dir}/probe/dryrun-test.sh" "${CMAKE_BINARY_DIR}/node-sea/opencode-pty-sea-app"
                 "${CMAKE_BINARY_DIR}/opencode-pty-client")
set_tests_properties(node.probe-dryrun PROPERTIES
  LABELS node TIMEOUT 300 FIXTURES_REQUIRED node_sea
  REQUIRED_FILES "${CMAKE_BINARY_DIR}/opencode-pty-client")

add_test(NAME vm.node-probe.bookworm
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" bookworm --artifacts "${CMAKE_BINARY_DIR}"
                 "${_vm_node}/probe.sh")
add_test(NAME vm.node-smoke.bookworm
         COMMAND "${_vm_node}/run-smoke" "${CMAKE_BINARY_DIR}" bookworm 10)
add_test(NAME vm.node-example.bookworm
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" bookworm --artifacts "${CMAKE_BINARY_DIR}"
                 "${_vm_node}/example.sh")
set_tests_properties(vm.node-probe.bookworm vm.node-example.bookworm PROPERTIES
  LABELS vm RESOURCE_LOCK vm_harness TIMEOUT 1800 FIXTURES_REQUIRED node_sea
  ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
set_tests_properties(vm.node-smoke.bookworm PROPERTIES
  LABELS vm RESOURCE_LOCK vm_harness TIMEOUT 2400 FIXTURES_REQUIRED node_sea
  ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
