// Fuzzes the window-size parser (ParseSizeMessage, common/size_message.h):
// the RESIZE frame's payload, and the body of a unit channel's 'W' packet
// (fuzz/channel_message.cc fuzzes the whole packet). Input: the payload.
// Invariants: only 4 bytes with both dimensions in 1..1000 parse, and they
// re-encode to the same bytes; everything else is refused with the outputs
// untouched; never a read past `size`.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/size_message.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  std::vector<uint8_t> packet(data, data + size);  // exact size: ASan sees overreads
  uint16_t cols = 0xbeef, rows = 0xbeef;
  ErrorCode e = ParseSizeMessage(packet.data(), packet.size(), &cols, &rows);
  bool ok = size == limits::kResizePayload;
  if (ok) {
    unsigned c = (unsigned(packet[0]) << 8) | packet[1], r = (unsigned(packet[2]) << 8) | packet[3];
    ok = c >= 1 && c <= limits::kMaxCols && r >= 1 && r <= limits::kMaxRows;
  }
  FUZZ_CHECK((e == ErrorCode::kOk) == ok);
  if (!ok) {
    FUZZ_CHECK(cols == 0xbeef && rows == 0xbeef);
    return 0;
  }
  uint8_t again[limits::kResizePayload];
  EncodeSizeMessage(cols, rows, again);
  FUZZ_CHECK(memcmp(again, packet.data(), sizeof again) == 0);
  return 0;
}
