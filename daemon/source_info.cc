// The one file that includes the generated header, so a new revision
// recompiles only this file.
#include "daemon/source_info.h"

#include "source_identity.h"

namespace opencode::daemon {

std::string_view SourceRevision() noexcept { return OPENCODE_REVISION; }
std::string_view SourceSha256() noexcept { return OPENCODE_SOURCE_SHA256; }

}  // namespace opencode::daemon
