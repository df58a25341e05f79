# client/node/tests.cmake: ctest registrations of the Node client (included
# from the top-level CMakeLists.txt). Not part of the sanitizer tree.
#   node.unit                 node:test unit tests of the module (fake supervisor)
#                             on the host's Node
#   node.unit.node26          the same on the pinned Node 26.4.0 (client/node/sea/node26)
#   node.unit.bun             the same on the pinned Bun 1.4.5 (client/node/bun/bun), with
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
#   vm.node-probe.{bookworm,trixie}  the probe on a real systemd, SEA as opencode-v2.service
#   vm.node-probe.bun.{bookworm,trixie}  the same probe with the pinned Bun as the MainPID (issue #31)
#   vm.node-adapter.bun.*, vm.node-{signals,resize}.bun.* (vm-tests/CMakeLists.txt), on
#                             bookworm and trixie: those suites with the pinned Bun as the
#                             MainPID (fixture node_bun)
#   vm.node-smoke.{bookworm,trixie}  the smoke suite in the SEA, 3 runs in one boot
#                             (10 with OPENCODE_LONG_VM_TESTS), a fresh supervisor
#                             each; vm-tests/node/smoke.sh
#   vm.node-smoke.bun.bookworm  the seed's smoke: pty-plugin-smoke.ts run by Bun 10 times
#                             in one boot, a fresh supervisor each (issue #31); the same driver
#   with -DOPENCODE_LONG_VM_TESTS=ON also on the qemu VM (TCG):
#   vm.node-probe.vm (about 10 minutes; vm.acceptance.vm runs the same probe,
#   so the default suite covers the VM) and vm.node-smoke.vm
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
# Node 26 takes the test files as a glob (a directory is not a test file there).
add_test(NAME node.unit.node26
         COMMAND "${_node_dir}/sea/node26" --test "${_node_dir}/test/*.test.js"
         WORKING_DIRECTORY "${_node_dir}")
set_tests_properties(node.unit.node26 PROPERTIES LABELS node TIMEOUT 600)
# bun test takes the directory (it finds *.test.js in it).
add_test(NAME node.unit.bun
         COMMAND "${_node_dir}/bun/bun" test "${_node_dir}/test/"
         WORKING_DIRECTORY "${_node_dir}")
set_tests_properties(node.unit.bun PROPERTIES LABELS node TIMEOUT 600)

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

option(OPENCODE_LONG_VM_TESTS "Also register vm.node-probe.vm and vm.node-smoke.vm (qemu VM, TCG; about 10 minutes and an hour)" OFF)
set(_vm_node_targets bookworm trixie)
if(OPENCODE_LONG_VM_TESTS)
  list(APPEND _vm_node_targets vm)
endif()
foreach(_t ${_vm_node_targets})
  add_test(NAME vm.node-probe.${_t}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" ${_t} --artifacts "${CMAKE_BINARY_DIR}"
                   "${_vm_node}/probe.sh")
  set_tests_properties(vm.node-probe.${_t} PROPERTIES
    ${OPENCODE_VM_SUITE_${_t}} TIMEOUT 2400 FIXTURES_REQUIRED node_sea
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
endforeach()
# The same probe with the pinned Bun as the MainPID (issue #31; probe.sh
# --runtime=bun runs client/sea/app.js under Bun), on systemd 252 and 257.
foreach(_t bookworm trixie)
  add_test(NAME vm.node-probe.bun.${_t}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" ${_t} --artifacts "${CMAKE_BINARY_DIR}"
                   "${_vm_node}/probe.sh" --runtime=bun)
  set_tests_properties(vm.node-probe.bun.${_t} PROPERTIES
    ${OPENCODE_VM_SUITE_${_t}} TIMEOUT 2400 FIXTURES_REQUIRED "node_sea;node_bun"
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
endforeach()
# The smoke suite (vm-tests/node/smoke.sh): RUNS runs in one boot, each
# against a fresh supervisor. The harness's limit on the boot
# (VMTESTS_TIMEOUT) is a multiple of the work: 180 s per run on a container
# (one run takes about 30 s here, the first about 2 minutes with the session
# cap and the unit tests), 600 s per run on the VM (TCG), plus 600 s for
# installing and the first run; ctest's limit adds 600 s for the boot.
function(opencode_node_smoke _name _target _runs)
  if(_target STREQUAL "vm")
    set(_per_run 600)
  else()
    set(_per_run 180)
  endif()
  math(EXPR _boot_limit "600 + ${_per_run} * ${_runs}")
  math(EXPR _ctest_limit "${_boot_limit} + 600")
  add_test(NAME ${_name}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" ${_target} --artifacts "${CMAKE_BINARY_DIR}"
                   "${_vm_node}/smoke.sh" ${ARGN} ${_runs})
  set_tests_properties(${_name} PROPERTIES
    ${OPENCODE_VM_SUITE_${_target}} TIMEOUT ${_ctest_limit}
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results;VMTESTS_TIMEOUT=${_boot_limit}")
endfunction()
foreach(_t ${_vm_node_targets})
  # 3 runs per target in the default suite (every case on systemd 252 and 257,
  # and the seed's 10 runs are the Bun smoke's below); 10 with
  # OPENCODE_LONG_VM_TESTS.
  set(_smoke_runs 10)
  if(NOT OPENCODE_LONG_VM_TESTS)
    set(_smoke_runs 3)
  endif()
  opencode_node_smoke(vm.node-smoke.${_t} ${_t} ${_smoke_runs} --runtime=node --unit-tests)
  set_tests_properties(vm.node-smoke.${_t} PROPERTIES FIXTURES_REQUIRED node_sea)
endforeach()
# The seed's smoke as the seed wrote it (issue #31): the TypeScript harness
# vm-tests/node/pty-plugin-smoke.ts run by the pinned Bun as the MainPID, with
# the same driver and checks, on systemd 252.
opencode_node_smoke(vm.node-smoke.bun.bookworm bookworm 10 --runtime=bun)
set_tests_properties(vm.node-smoke.bun.bookworm PROPERTIES FIXTURES_REQUIRED "node_sea;node_bun")
add_test(NAME vm.node-example.bookworm
         COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" bookworm --artifacts "${CMAKE_BINARY_DIR}"
                 "${_vm_node}/example.sh")
set_tests_properties(vm.node-example.bookworm PROPERTIES
  ${OPENCODE_VM_SUITE_bookworm} TIMEOUT 1800 FIXTURES_REQUIRED node_sea
  ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")

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
foreach(_t bookworm trixie)
  add_test(NAME vm.node-adapter.${_t}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" ${_t} --artifacts "${CMAKE_BINARY_DIR}"
                   "${_vm_node}/adapter.sh")
  set_tests_properties(vm.node-adapter.${_t} PROPERTIES
    ${OPENCODE_VM_SUITE_${_t}} TIMEOUT 1800 FIXTURES_REQUIRED "node_sea;node_adapter"
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
endforeach()

# vm.node-adapter.bun.{bookworm,trixie}: the same adapter test with the pinned
# Bun as the MainPID (issue #31; adapter.sh --runtime=bun), on systemd 252 and 257.
foreach(_t bookworm trixie)
  add_test(NAME vm.node-adapter.bun.${_t}
           COMMAND "${PROJECT_SOURCE_DIR}/vm-tests/run" ${_t} --artifacts "${CMAKE_BINARY_DIR}"
                   "${_vm_node}/adapter.sh" --runtime=bun)
  set_tests_properties(vm.node-adapter.bun.${_t} PROPERTIES
    ${OPENCODE_VM_SUITE_${_t}} TIMEOUT 1800 FIXTURES_REQUIRED "node_sea;node_adapter;node_bun"
    ENVIRONMENT "VMTESTS_RESULTS_BASE=${CMAKE_BINARY_DIR}/vm-tests/results")
endforeach()

# node.bun-stage: the pinned Bun 1.4.5 (client/node/bun/install-bun: npm's
# @oven/bun-linux-x64, sha512 in client/node/bun/package-lock.json, cached)
# copied into <build>/bun/bun (fixture node_bun), where the real-systemd suites
# that run a Bun application as opencode-v2.service's MainPID install it from
# (vm-tests/node/common.sh bun_install).
add_test(NAME node.bun-stage
         COMMAND sh -c "b=$(\"${_node_dir}/bun/install-bun\") && mkdir -p \"${CMAKE_BINARY_DIR}/bun\" && cp \"$b\" \"${CMAKE_BINARY_DIR}/bun/bun.tmp\" && mv \"${CMAKE_BINARY_DIR}/bun/bun.tmp\" \"${CMAKE_BINARY_DIR}/bun/bun\" && \"${CMAKE_BINARY_DIR}/bun/bun\" --version")
set_tests_properties(node.bun-stage PROPERTIES LABELS node TIMEOUT 600 FIXTURES_SETUP node_bun)
