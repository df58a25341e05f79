// Fuzzes DecodeFrame (common/frame.cc) as the stream decoder it is used as.
// Input: two bytes choosing a split point, then the stream. For both
// directions the stream is decoded whole and in two chunks; every buffer the
// decoder sees ends where a real receive buffer would (an exact-size heap
// copy), so ASan catches a read past its end.
// Invariants: the same frames and the same final state come out for any split;
// a frame's payload is within its type's bounds and its header is what the
// encoder writes; a header error appears at the byte that causes it and stays.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/frame.h"
#include "fuzz/fuzz_check.h"

namespace opencode {
namespace {

using Status = DecodeResult::Status;

// A decoded frame, located by its payload's offset in the whole stream, so
// equal frames of two decodings are the same bytes.
struct Frame {
  FrameType type;
  size_t offset;
  size_t length;
  bool operator==(const Frame&) const = default;
};

struct Decoded {
  std::vector<Frame> frames;
  Status final_status = Status::kNeedMore;  // kNeedMore or kError
  ErrorCode final_error = ErrorCode::kOk;
};

// The byte count at which a header error can first be seen (docs/PROTOCOL.md
// section 2): version 1, type 2, reserved 3..4, length 8.
bool ErrorBelongsAt(ErrorCode e, size_t k) {
  switch (e) {
    case ErrorCode::kBadVersion: return k == 1;
    case ErrorCode::kUnknownType: return k == 2;
    case ErrorCode::kBadReserved: return k == 3 || k == 4;
    case ErrorCode::kFrameTooLarge:
    case ErrorCode::kFrameTooSmall: return k == limits::kFrameHeaderBytes;
    default: return false;
  }
}

// One DecodeFrame call; checks what holds for every single result.
DecodeResult CheckedDecode(Direction dir, std::span<const uint8_t> buf) {
  DecodeResult r = DecodeFrame(dir, buf);
  FUZZ_CHECK(r.consumed <= buf.size());
  switch (r.status) {
    case Status::kFrame: {
      size_t min = 0, max = 0;
      FUZZ_CHECK(PayloadBounds(dir, static_cast<uint8_t>(r.type), &min, &max));
      FUZZ_CHECK(r.payload.size() >= min && r.payload.size() <= max);
      FUZZ_CHECK(r.payload.data() == buf.data() + limits::kFrameHeaderBytes);
      FUZZ_CHECK(r.consumed == limits::kFrameHeaderBytes + r.payload.size());
      // Canonical: the encoder writes exactly the header the frame had.
      uint8_t header[limits::kFrameHeaderBytes];
      EncodeHeader(r.type, static_cast<uint32_t>(r.payload.size()), header);
      FUZZ_CHECK(memcmp(header, buf.data(), sizeof header) == 0);
      break;
    }
    case Status::kNeedMore: {
      FUZZ_CHECK(r.consumed == 0 && r.payload.empty());
      // A complete header was accepted: its length is within the type's
      // bounds, so the caller never buffers more than the maximum.
      if (buf.size() >= limits::kFrameHeaderBytes) {
        size_t min = 0, max = 0;
        FUZZ_CHECK(PayloadBounds(dir, buf[1], &min, &max));
        uint32_t len = (uint32_t(buf[4]) << 24) | (uint32_t(buf[5]) << 16) |
                       (uint32_t(buf[6]) << 8) | buf[7];
        FUZZ_CHECK(len >= min && len <= max);
        FUZZ_CHECK(buf.size() < limits::kFrameHeaderBytes + len);
      }
      break;
    }
    case Status::kError:
      FUZZ_CHECK(r.consumed == 0 && r.error != ErrorCode::kOk);
      break;
  }
  return r;
}

// Header prefixes of 1..8 bytes at the front of `rest`, each in an exact-size
// copy: kNeedMore until the offending byte arrives, then that byte's error for
// every longer prefix.
void CheckHeaderPrefixes(Direction dir, std::span<const uint8_t> rest) {
  size_t n = rest.size() < limits::kFrameHeaderBytes ? rest.size() : limits::kFrameHeaderBytes;
  ErrorCode first = ErrorCode::kOk;
  for (size_t k = 1; k <= n; ++k) {
    std::vector<uint8_t> prefix(rest.begin(), rest.begin() + k);
    DecodeResult r = CheckedDecode(dir, prefix);
    FUZZ_CHECK(r.status != Status::kFrame || k == limits::kFrameHeaderBytes);
    if (first == ErrorCode::kOk) {
      if (r.status == Status::kError) {
        FUZZ_CHECK(ErrorBelongsAt(r.error, k));
        first = r.error;
      }
    } else {
      FUZZ_CHECK(r.status == Status::kError && r.error == first);
    }
  }
}

// Decodes `stream` as if it arrived in chunks ending at the offsets `cuts`
// (ascending, the last one = stream.size()): after each arrival the
// unconsumed bytes are copied into an exact-size buffer and decoded frame by
// frame, as the supervisor's handshake buffer does. Stops at the first error.
Decoded DecodeInChunks(Direction dir, std::span<const uint8_t> stream,
                       std::span<const size_t> cuts, bool check_prefixes) {
  Decoded d;
  size_t start = 0;  // first unconsumed byte of `stream`
  for (size_t end : cuts) {
    std::vector<uint8_t> buf(stream.begin() + start, stream.begin() + end);
    size_t off = 0;
    for (;;) {
      std::span<const uint8_t> pending = std::span<const uint8_t>(buf).subspan(off);
      DecodeResult r = CheckedDecode(dir, pending);
      if (r.status == Status::kFrame) {
        if (check_prefixes && d.frames.empty()) CheckHeaderPrefixes(dir, pending);
        d.frames.push_back({r.type, start + off + limits::kFrameHeaderBytes, r.payload.size()});
        off += r.consumed;
        continue;
      }
      if (check_prefixes) CheckHeaderPrefixes(dir, pending);
      d.final_status = r.status;
      d.final_error = r.error;
      break;
    }
    start += off;
    if (d.final_status == Status::kError) break;
  }
  return d;
}

bool Same(const Decoded& a, const Decoded& b) {
  return a.frames == b.frames && a.final_status == b.final_status &&
         a.final_error == b.final_error;
}

}  // namespace
}  // namespace opencode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  if (size < 2) return 0;
  std::span<const uint8_t> stream(data + 2, size - 2);
  size_t split = ((size_t(data[0]) << 8) | data[1]) % (stream.size() + 1);
  const size_t whole[] = {stream.size()};
  const size_t two[] = {split, stream.size()};
  for (Direction dir : {Direction::kFromClient, Direction::kFromSupervisor}) {
    Decoded a = DecodeInChunks(dir, stream, whole, /*check_prefixes=*/true);
    Decoded b = DecodeInChunks(dir, stream, two, /*check_prefixes=*/false);
    FUZZ_CHECK(Same(a, b));
  }
  return 0;
}
