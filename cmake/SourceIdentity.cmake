# Source identity of the build (included from units/CMakeLists.txt).
#
# Provides:
#   opencode_source_identity   INTERFACE library: include dir
#                              ${CMAKE_BINARY_DIR}/generated, so that
#                              #include "source_identity.h" gives
#                              OPENCODE_REVISION ("<40 hex>"),
#                              OPENCODE_SOURCE_SHA256 ("<64 hex>") and
#                              OPENCODE_REVISION_LINE ("revision=...").
#                              Linking it orders the consumer after the
#                              generator.
#   opencode_source_identity_gen  the generator; runs on every build and
#                              rewrites its outputs only when they change.
#   ${CMAKE_BINARY_DIR}/opencode-pty-verify-readiness (0755).
set(OPENCODE_GENERATED_DIR "${CMAKE_BINARY_DIR}/generated")
set(OPENCODE_SOURCE_IDENTITY_HEADER "${OPENCODE_GENERATED_DIR}/source_identity.h")
set(OPENCODE_VERIFIER "${CMAKE_BINARY_DIR}/opencode-pty-verify-readiness")
file(MAKE_DIRECTORY "${OPENCODE_GENERATED_DIR}")

add_custom_target(opencode_source_identity_gen ALL
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DREVISION=${OPENCODE_REVISION}
          -DHASH_TOOL=${PROJECT_SOURCE_DIR}/tools/review-source-hash
          -DTEMPLATE=${PROJECT_SOURCE_DIR}/tools/verify-readiness.in
          -DOUT_HEADER=${OPENCODE_SOURCE_IDENTITY_HEADER}
          -DOUT_VERIFIER=${OPENCODE_VERIFIER}
          -P ${PROJECT_SOURCE_DIR}/cmake/GenerateSourceIdentity.cmake
  BYPRODUCTS ${OPENCODE_SOURCE_IDENTITY_HEADER} ${OPENCODE_VERIFIER}
  COMMENT "Source identity (git revision + review-source-hash)"
  VERBATIM)

add_library(opencode_source_identity INTERFACE)
target_include_directories(opencode_source_identity INTERFACE ${OPENCODE_GENERATED_DIR})
add_dependencies(opencode_source_identity opencode_source_identity_gen)
