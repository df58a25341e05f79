// Fuzzes ParseStartPayload (common/frame.cc), the supervisor's parser of the
// one START payload an unauthenticated-until-now helper sends. Input: the
// payload. Invariants: an accepted payload is within every bound of
// docs/PROTOCOL.md sections 3 and 10.1 (the detach options), and
// EncodeStartFrame (the helper's encoder) reproduces it byte for byte, i.e.
// the format has one spelling per request.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/frame.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  std::span<const uint8_t> payload(data, size);
  StartRequest req;
  if (ParseStartPayload(payload, &req) != ErrorCode::kOk) return 0;

  FUZZ_CHECK(req.cols >= 1 && req.cols <= limits::kMaxCols);
  FUZZ_CHECK(req.rows >= 1 && req.rows <= limits::kMaxRows);
  FUZZ_CHECK(!req.argv.empty() && req.argv.size() <= limits::kMaxArgs);
  FUZZ_CHECK(!req.argv[0].empty());
  size_t total = 0;
  std::vector<const char*> argv;
  for (const std::string& a : req.argv) {
    FUZZ_CHECK(a.size() <= limits::kMaxArgBytes);
    FUZZ_CHECK(a.find('\0') == std::string::npos);
    total += a.size();
    argv.push_back(a.c_str());
  }
  FUZZ_CHECK(total <= limits::kMaxArgvTotalBytes);
  size_t detach_bytes = 0;
  if (req.detach.detachable()) {
    FUZZ_CHECK(req.detach.grace_sec >= 1 && req.detach.grace_sec <= limits::kMaxDetachGraceSec);
    FUZZ_CHECK(req.detach.scrollback >= limits::kMinScrollbackBytes &&
               req.detach.scrollback <= limits::kMaxScrollbackBytes);
    detach_bytes = limits::kStartDetachBytes;
  } else {
    FUZZ_CHECK(req.detach.scrollback == 0);
  }
  FUZZ_CHECK(size == limits::kStartFixedBytes + 4 * argv.size() + total + detach_bytes);

  ErrorCode e = ErrorCode::kInternal;
  FUZZ_CHECK(StartFrameSize(argv.size(), argv.data(), &e, req.detach) == limits::kFrameHeaderBytes + size);
  FUZZ_CHECK(e == ErrorCode::kOk);

  // Exactly the frame's size as capacity: the encoder must not need more.
  std::vector<uint8_t> frame(limits::kFrameHeaderBytes + size);
  e = ErrorCode::kInternal;
  size_t n = EncodeStartFrame(req.cols, req.rows, argv.size(), argv.data(), frame.data(),
                              frame.size(), &e, req.env ? kStartFlagEnv : 0, req.detach);
  FUZZ_CHECK(e == ErrorCode::kOk && n == frame.size());
  uint8_t header[limits::kFrameHeaderBytes];
  EncodeHeader(FrameType::kStart, static_cast<uint32_t>(size), header);
  FUZZ_CHECK(memcmp(frame.data(), header, sizeof header) == 0);
  FUZZ_CHECK(memcmp(frame.data() + limits::kFrameHeaderBytes, data, size) == 0);
  return 0;
}
