// Capability drop with libcap-ng and its verification (see caps.h). The
// verification, not libcap-ng's return value, is what counts: under the
// production unit the bounding set is already empty and libcap-ng may report
// that it could not drop what is not there.
#include "daemon/caps.h"

#include <cap-ng.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {

absl::StatusOr<CapabilitySets> ParseCapabilities(std::string_view status) {
  CapabilitySets out;
  int seen = 0;
  while (!status.empty()) {
    size_t nl = status.find('\n');
    std::string_view line = status.substr(0, nl);
    status = nl == std::string_view::npos ? std::string_view() : status.substr(nl + 1);
    struct Field {
      std::string_view name;
      uint64_t* value;
      int bit;
    } fields[] = {{"CapInh:", &out.inheritable, 1}, {"CapPrm:", &out.permitted, 2},
                  {"CapEff:", &out.effective, 4},   {"CapBnd:", &out.bounding, 8},
                  {"CapAmb:", &out.ambient, 16}};
    for (const Field& f : fields) {
      if (line.substr(0, f.name.size()) != f.name) continue;
      std::string hex(line.substr(f.name.size()));
      char* end = nullptr;
      errno = 0;
      unsigned long long v = strtoull(hex.c_str(), &end, 16);
      if (errno != 0 || end == hex.c_str() || *end != '\0')
        return absl::InvalidArgumentError(absl::StrCat("bad ", AV(f.name), " line"));
      *f.value = v;
      seen |= f.bit;
    }
  }
  if (seen != 31) return absl::InvalidArgumentError("capability lines missing");
  return out;
}

absl::StatusOr<CapabilitySets> ReadOwnCapabilities() {
  UniqueFd fd(open("/proc/self/status", O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return Errno(errno, "open /proc/self/status");
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "read /proc/self/status");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 64 * 1024) return absl::OutOfRangeError("/proc/self/status too long");
  }
  return ParseCapabilities(text);
}

absl::Status DropAllCapabilities() {
  // Dropping from the bounding set needs CAP_SETPCAP; without it (the
  // production unit already empties the bounding set) only the other sets
  // are applied, and the verification below decides either way.
  capng_get_caps_process();
  bool can_bound = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP) != 0;
  capng_clear(CAPNG_SELECT_ALL);
  int r = capng_apply(can_bound ? CAPNG_SELECT_ALL
                                : static_cast<capng_select_t>(CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return Errno(errno, "PR_SET_NO_NEW_PRIVS");
  ASSIGN_OR_RETURN(CapabilitySets caps, ReadOwnCapabilities());
  if (caps.effective | caps.permitted | caps.inheritable | caps.bounding | caps.ambient)
    return absl::PermissionDeniedError(absl::StrCat(
        "capabilities remain after drop (capng_apply=", r, "): CapEff=", absl::Hex(caps.effective),
        " CapPrm=", absl::Hex(caps.permitted), " CapInh=", absl::Hex(caps.inheritable),
        " CapBnd=", absl::Hex(caps.bounding), " CapAmb=", absl::Hex(caps.ambient)));
  return absl::OkStatus();
}

}  // namespace opencode::daemon
