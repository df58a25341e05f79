// Fuzzes both parsers of a unit-channel packet (common/channel_message.h): the
// launcher's monitor parses what the supervisor sends (ParseToUnit) and the
// supervisor parses what comes from inside the unit (ParseFromUnit, the
// session user's side). Input: the packet.
// Invariants, checked against an independent model: a packet parses only with
// its kind's exact length and every field in range (sizes 1..1000, a signal
// of the allowlist in 'K' and 'D', a pid 2..2^30-1, a known `how` with its range); a parsed
// packet re-encodes to the same bytes; never a read past `size`.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/channel_message.h"
#include "fuzz/fuzz_check.h"

namespace {

using namespace opencode;

bool ModelToUnit(const std::vector<uint8_t>& p) {
  if (p.empty()) return false;
  if (p[0] == 'W') {
    if (p.size() != 5) return false;
    unsigned c = (unsigned(p[1]) << 8) | p[2], r = (unsigned(p[3]) << 8) | p[4];
    return c >= 1 && c <= 1000 && r >= 1 && r <= 1000;
  }
  if (p[0] == 'K') {
    if (p.size() != 2) return false;
    for (unsigned s : {1u, 2u, 3u, 9u, 10u, 12u, 15u, 18u, 19u, 20u, 28u})
      if (p[1] == s) return true;
    return false;
  }
  return false;
}

bool ModelFromUnit(const std::vector<uint8_t>& p) {
  if (p.empty()) return false;
  switch (p[0]) {
    case 'E': {
      if (p.size() != 5) return false;
      uint32_t v = (uint32_t(p[1]) << 24) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 8) | p[4];
      return v >= 2 && v < (1u << 30);
    }
    case 'X':
      if (p.size() != 3) return false;
      if (p[1] == 'x') return true;
      if (p[1] == 'k' || p[1] == 'c') return p[2] >= 1 && p[2] <= 64;
      return false;
    case 'F':
      return p.size() == 2;
    case 'D':
      if (p.size() != 2) return false;
      for (unsigned s : {1u, 2u, 3u, 9u, 10u, 12u, 15u, 18u, 19u, 20u, 28u})
        if (p[1] == s) return true;
      return false;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> packet(data, data + size);  // exact size: ASan sees overreads
  ChannelMessage m;
  bool to_unit = ParseToUnit(packet.data(), packet.size(), &m) == ErrorCode::kOk;
  FUZZ_CHECK(to_unit == ModelToUnit(packet));
  if (to_unit) {
    uint8_t again[kChannelMaxBytes];
    size_t n = 0;
    if (m.kind == ChannelKind::kWindowSize) {
      EncodeWindowSize(m.cols, m.rows, again);
      n = kChannelSizeBytes;
    } else {
      FUZZ_CHECK(m.kind == ChannelKind::kSignal);
      EncodeSignal(m.signo, again);
      n = kChannelSignalBytes;
    }
    FUZZ_CHECK(n == size && memcmp(again, packet.data(), n) == 0);
  }
  ChannelMessage u;
  bool from_unit = ParseFromUnit(packet.data(), packet.size(), &u) == ErrorCode::kOk;
  FUZZ_CHECK(from_unit == ModelFromUnit(packet));
  if (from_unit) {
    uint8_t again[kChannelMaxBytes];
    size_t n = 0;
    switch (u.kind) {
      case ChannelKind::kExecuted: EncodeExecuted(u.pid, again); n = kChannelExecutedBytes; break;
      case ChannelKind::kExited:
        EncodeExited(u.how, u.how == ExitHow::kExited ? u.status : u.signo, again);
        n = kChannelExitedBytes;
        break;
      case ChannelKind::kLaunchFailed: EncodeLaunchFailed(u.status, again); n = kChannelFailedBytes; break;
      case ChannelKind::kSignalDelivered: EncodeSignalDelivered(u.signo, again); n = kChannelDeliveredBytes; break;
      default: FUZZ_CHECK(false);
    }
    FUZZ_CHECK(n == size && memcmp(again, packet.data(), n) == 0);
  }
  return 0;
}
