# client/node/tests.cmake: ctest registrations of the Node client (included
# from the top-level CMakeLists.txt). Not part of the sanitizer tree.
#   node.unit.<file>          node:test unit tests of the module (fake supervisor)
#                             on the host's Node, one test per test/<file>.test.js
#   node.unit.node26.<file>   the same on the pinned Node 26.4.0 (client/node/sea/node26)
#   node.unit.bun.<file>      the same on the pinned Bun 1.4.5 (client/node/bun/bun), with
#                             `bun test`: it runs the node:test files as they are (Bun
#                             maps node:test onto its runner; plain `bun FILE` refuses
#                             test() outside `bun test`). Where `bun test` itself differs
#                             from an application (it fails the running test on an
#                             uncaught exception before process 'uncaughtException'
#                             sees it), the test runs its scenario in a child process
#                             of the same runtime (test/review.test.js, 3)
#   node.constants            lib/constants.generated.js equals what
#                             tools/gen-node-constants makes of the C++ headers
#                             (fails with the diff when a header changed)
#   node.sea-build            builds the Node 26.4 SEA test app into <build>/node-sea/
#                             (fixture node_sea; Node 26.4.0 from npm, pinned by
#                             client/node/sea/package-lock.json, cached; node --build-sea)
#   node.probe-dryrun         the inheritance probe's tracer on the host against a
#                             stand-in supervisor and the real helper, plus its
#                             negative control (root; not acceptance evidence)
#   node.typecheck            opencode's adapter against node-pty's typings, compiled
#                             for the adapter suites (fixture node_adapter); the
#                             strict entry's index.d.ts through typecheck/strict-api.ts
#   node.bun-stage            the pinned Bun staged for the suites (fixture node_bun)
# The module on a real systemd (vm.node-*: the probe, the smoke, the adapter,
# resize, signals, the README example, each in the SEA and under Bun) is
# registered with every other real-systemd suite in vm-tests/CMakeLists.txt.
if(OPENCODE_SANITIZE)
  return()
endif()

set(_node_dir "${CMAKE_CURRENT_LIST_DIR}")
find_program(OPENCODE_NODE node)
if(NOT OPENCODE_NODE)
  # No skip that looks like a pass: without node the tests fail, saying why.
  set(OPENCODE_NODE "${CMAKE_COMMAND}" -E false "node-not-found")
endif()

# One ctest test per test file and runtime, node.unit.<file>,
# node.unit.node26.<file> and node.unit.bun.<file> (<file> without
# .test.js): a failure is named down to its file where only the names of the
# failed tests are shown (ctest's summary at the end of a CI log).
file(GLOB _node_test_files CONFIGURE_DEPENDS "${_node_dir}/test/*.test.js")
foreach(_file ${_node_test_files})
  get_filename_component(_name "${_file}" NAME)
  string(REGEX REPLACE "\\.test\\.js$" "" _name "${_name}")
  add_test(NAME node.unit.${_name}
           COMMAND ${OPENCODE_NODE} --test "${_file}"
           WORKING_DIRECTORY "${_node_dir}")
  add_test(NAME node.unit.node26.${_name}
           COMMAND "${_node_dir}/sea/node26" --test "${_file}"
           WORKING_DIRECTORY "${_node_dir}")
  # bun test: a path that starts with ./ or / is a file, not a name filter.
  # Its runner fails a test after 5 s by default, and kills the test's
  # children, where node --test has no limit: on a loaded host that failed
  # tests that were only slow. The limit is a hang guard above the tests' own
  # (test-support/wait.js, 60 s).
  add_test(NAME node.unit.bun.${_name}
           COMMAND "${_node_dir}/bun/bun" test --timeout 120000 "${_file}"
           WORKING_DIRECTORY "${_node_dir}")
  set_tests_properties(node.unit.${_name} node.unit.node26.${_name} node.unit.bun.${_name}
                       PROPERTIES LABELS node TIMEOUT 600)
endforeach()

find_program(OPENCODE_PYTHON3 python3)
if(NOT OPENCODE_PYTHON3)
  set(OPENCODE_PYTHON3 "${CMAKE_COMMAND}" -E false "python3-not-found")
endif()
add_test(NAME node.constants
         COMMAND ${OPENCODE_PYTHON3} "${PROJECT_SOURCE_DIR}/tools/gen-node-constants" --check "${PROJECT_SOURCE_DIR}")
set_tests_properties(node.constants PROPERTIES LABELS node TIMEOUT 60)

add_test(NAME node.sea-build
         COMMAND "${_node_dir}/sea/build.sh" "${CMAKE_BINARY_DIR}/node-sea")
set_tests_properties(node.sea-build PROPERTIES
  LABELS node TIMEOUT 600 FIXTURES_SETUP node_sea)

add_test(NAME node.probe-dryrun
         COMMAND "${_node_dir}/probe/dryrun-test.sh" "${CMAKE_BINARY_DIR}/node-sea/opencode-pty-sea-app"
                 "${CMAKE_BINARY_DIR}/opencode-pty-client")
set_tests_properties(node.probe-dryrun PROPERTIES
  LABELS node TIMEOUT 300 FIXTURES_REQUIRED node_sea
  REQUIRED_FILES "${CMAKE_BINARY_DIR}/opencode-pty-client")

# node.typecheck: opencode's adapter (client/node/typecheck/opencode-adapter.ts)
# against node-pty 1.1's own typings (tsc --noEmit; typescript, @lydell/node-pty
# and @types/node pinned by client/node/typecheck/package-lock.json), compiled
# into <build>/node-adapter/ (fixture node_adapter) for
# vm.node-adapter.{bookworm,trixie}: the opencode-shaped test of the node-pty
# drop-in in the Node 26.4 SEA as the MainPID on systemd 252 and 257.
# It also type-checks the Bun smoke harness vm-tests/node/pty-plugin-smoke.ts.
add_test(NAME node.typecheck
         COMMAND "${_node_dir}/typecheck/run" "${CMAKE_BINARY_DIR}/node-adapter")
set_tests_properties(node.typecheck PROPERTIES LABELS node TIMEOUT 600 FIXTURES_SETUP node_adapter)
# node.bun-stage: the pinned Bun 1.4.5 (client/node/bun/install-bun: npm's
# @oven/bun-linux-x64, sha512 in client/node/bun/package-lock.json, cached)
# copied into <build>/bun/bun (fixture node_bun), where the real-systemd suites
# that run a Bun application as opencode-v2.service's MainPID install it from
# (vm-tests/node/common.sh bun_install).
add_test(NAME node.bun-stage
         COMMAND sh -c "b=$(\"${_node_dir}/bun/install-bun\") && mkdir -p \"${CMAKE_BINARY_DIR}/bun\" && cp \"$b\" \"${CMAKE_BINARY_DIR}/bun/bun.tmp\" && mv \"${CMAKE_BINARY_DIR}/bun/bun.tmp\" \"${CMAKE_BINARY_DIR}/bun/bun\" && \"${CMAKE_BINARY_DIR}/bun/bun\" --version")
set_tests_properties(node.bun-stage PROPERTIES LABELS node TIMEOUT 600 FIXTURES_SETUP node_bun)
