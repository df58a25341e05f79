// Fuzzes the RESIZE frame path of the supervisor: DecodeFrame over a client
// stream, then ParseResizePayload (common/frame.cc) on every RESIZE frame, as
// daemon/session/pump.cc does; and ParseResizePayload alone on the raw input.
// Invariants: a decoded RESIZE payload is exactly kResizePayload bytes; it
// parses iff both dimensions are 1..1000, and then re-encodes to the same
// bytes; any other length is frame_too_small/frame_too_large and any bad
// dimension bad_size, with the outputs untouched.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/frame.h"
#include "common/size_message.h"
#include "fuzz/fuzz_check.h"

namespace opencode {
namespace {

void CheckPayload(std::span<const uint8_t> p) {
  uint16_t cols = 0xbeef, rows = 0xbeef;
  ErrorCode e = ParseResizePayload(p, &cols, &rows);
  if (p.size() != limits::kResizePayload) {
    FUZZ_CHECK(e == (p.size() < limits::kResizePayload ? ErrorCode::kFrameTooSmall : ErrorCode::kFrameTooLarge));
    FUZZ_CHECK(cols == 0xbeef && rows == 0xbeef);
    return;
  }
  unsigned c = (unsigned(p[0]) << 8) | p[1], r = (unsigned(p[2]) << 8) | p[3];
  bool in_range = c >= 1 && c <= limits::kMaxCols && r >= 1 && r <= limits::kMaxRows;
  if (!in_range) {
    FUZZ_CHECK(e == ErrorCode::kBadSize);
    FUZZ_CHECK(cols == 0xbeef && rows == 0xbeef);
    return;
  }
  FUZZ_CHECK(e == ErrorCode::kOk && cols == c && rows == r);
  uint8_t again[limits::kResizePayload];
  EncodeSizeMessage(cols, rows, again);
  FUZZ_CHECK(memcmp(again, p.data(), sizeof again) == 0);
}

}  // namespace
}  // namespace opencode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  // The raw input as a payload, in an exact-size copy (ASan sees overreads).
  std::vector<uint8_t> raw(data, data + size);
  CheckPayload(raw);
  // The input as a client stream: every RESIZE frame the decoder accepts.
  std::span<const uint8_t> rest(raw);
  for (;;) {
    DecodeResult d = DecodeFrame(Direction::kFromClient, rest);
    if (d.status != DecodeResult::Status::kFrame) break;
    if (d.type == FrameType::kResize) {
      FUZZ_CHECK(d.payload.size() == limits::kResizePayload);
      CheckPayload(d.payload);
    }
    rest = rest.subspan(d.consumed);
  }
  return 0;
}
