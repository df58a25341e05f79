// The source identity compiled into the supervisor (reported in every
// `started` envelope). Invariant: the values come only from the generated
// source_identity.h of this build, so a client can bind a session to the
// reviewed revision and source-manifest hash.
#pragma once

#include <string_view>

namespace opencode::daemon {

std::string_view SourceRevision() noexcept;  // 40 hex
std::string_view SourceSha256() noexcept;    // 64 hex

}  // namespace opencode::daemon
