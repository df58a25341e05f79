// Frame header, incremental decoder, START payload, signal allowlist.
// Invariant: DecodeFrame never reads past `buf` and never accepts a declared
// length outside the type's [min, max]; ParseStartPayload checks every length
// against both the remaining payload and the limits before using it.
#include "common/frame.h"

#include <algorithm>
#include <cstring>

#include "common/env_overlay.h"
#include "common/size_message.h"

namespace opencode {
namespace {

void PutU16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }
void PutU32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24); p[1] = uint8_t(v >> 16); p[2] = uint8_t(v >> 8); p[3] = uint8_t(v);
}
void PutU64(uint8_t* p, uint64_t v) {
  PutU32(p, uint32_t(v >> 32));
  PutU32(p + 4, uint32_t(v));
}
uint16_t GetU16(const uint8_t* p) { return uint16_t((p[0] << 8) | p[1]); }
uint32_t GetU32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}
uint64_t GetU64(const uint8_t* p) { return (uint64_t(GetU32(p)) << 32) | GetU32(p + 4); }

struct SignalEntry { uint8_t number; std::string_view name; };
constexpr SignalEntry kSignals[] = {
    {1, "HUP"},  {2, "INT"},   {3, "QUIT"},  {9, "KILL"},  {10, "USR1"}, {12, "USR2"},
    {15, "TERM"}, {18, "CONT"}, {19, "STOP"}, {20, "TSTP"}, {28, "WINCH"},
};

// Validates the start-frame inputs shared by StartFrameSize/EncodeStartFrame.
// Returns the payload size, or 0 with *error set.
size_t CheckStartArgs(uint16_t cols, uint16_t rows, size_t argc, const char* const* argv,
                      ErrorCode* error) {
  if (cols < 1 || cols > limits::kMaxCols || rows < 1 || rows > limits::kMaxRows) {
    *error = ErrorCode::kBadSize;
    return 0;
  }
  if (argc == 0 || argc > limits::kMaxArgs) { *error = ErrorCode::kBadArgc; return 0; }
  size_t total = 0;
  for (size_t i = 0; i < argc; ++i) {
    size_t n = strnlen(argv[i], limits::kMaxArgBytes + 1);
    if (n > limits::kMaxArgBytes) { *error = ErrorCode::kArgTooLong; return 0; }
    if (i == 0 && n == 0) { *error = ErrorCode::kEmptyCommand; return 0; }
    total += n;
    if (total > limits::kMaxArgvTotalBytes) { *error = ErrorCode::kArgvTooLong; return 0; }
  }
  *error = ErrorCode::kOk;
  return limits::kStartFixedBytes + 4 * argc + total;
}

}  // namespace

bool PayloadBounds(Direction dir, uint8_t type, size_t* min, size_t* max) noexcept {
  if (dir == Direction::kFromClient) {
    switch (static_cast<FrameType>(type)) {
      case FrameType::kStart: *min = limits::kStartFixedBytes; *max = limits::kMaxStartPayload; return true;
      case FrameType::kInput: *min = 1; *max = limits::kMaxInputPayload; return true;
      case FrameType::kSignal: *min = *max = limits::kSignalPayload; return true;
      case FrameType::kResize: *min = *max = limits::kResizePayload; return true;
      case FrameType::kEnv: *min = kEnvCountBytes; *max = limits::kMaxEnvPayload; return true;
      case FrameType::kAttach: *min = *max = limits::kAttachPayload; return true;
      case FrameType::kList:
      case FrameType::kStop:
      case FrameType::kEof: *min = *max = 0; return true;
      default: return false;
    }
  }
  switch (static_cast<FrameType>(type)) {
    case FrameType::kOutput: *min = 1; *max = limits::kMaxOutputPayload; return true;
    case FrameType::kEvent: *min = 2; *max = limits::kMaxEnvelopeBytes; return true;
    default: return false;
  }
}

void EncodeHeader(FrameType type, uint32_t length, uint8_t out[limits::kFrameHeaderBytes]) noexcept {
  out[0] = kProtocolVersion;
  out[1] = static_cast<uint8_t>(type);
  out[2] = 0;
  out[3] = 0;
  PutU32(out + 4, length);
}

void AppendFrame(FrameType type, std::span<const uint8_t> payload, std::string* out) {
  uint8_t header[limits::kFrameHeaderBytes];
  EncodeHeader(type, static_cast<uint32_t>(payload.size()), header);
  out->append(reinterpret_cast<const char*>(header), sizeof header);
  out->append(reinterpret_cast<const char*>(payload.data()), payload.size());
}

void AppendFrame(FrameType type, std::string_view payload, std::string* out) {
  AppendFrame(type, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()),
                                             payload.size()), out);
}

DecodeResult DecodeFrame(Direction dir, std::span<const uint8_t> buf) noexcept {
  DecodeResult r;
  auto fail = [&r](ErrorCode e) { r.status = DecodeResult::Status::kError; r.error = e; return r; };
  if (buf.size() >= 1 && buf[0] != kProtocolVersion) return fail(ErrorCode::kBadVersion);
  size_t min = 0, max = 0;
  if (buf.size() >= 2 && !PayloadBounds(dir, buf[1], &min, &max)) return fail(ErrorCode::kUnknownType);
  if (buf.size() >= 3 && buf[2] != 0) return fail(ErrorCode::kBadReserved);
  if (buf.size() >= 4 && buf[3] != 0) return fail(ErrorCode::kBadReserved);
  if (buf.size() < limits::kFrameHeaderBytes) return r;  // kNeedMore
  uint32_t length = GetU32(buf.data() + 4);
  if (length > max) return fail(ErrorCode::kFrameTooLarge);
  if (length < min) return fail(ErrorCode::kFrameTooSmall);
  if (buf.size() - limits::kFrameHeaderBytes < length) return r;  // kNeedMore
  r.status = DecodeResult::Status::kFrame;
  r.type = static_cast<FrameType>(buf[1]);
  r.payload = buf.subspan(limits::kFrameHeaderBytes, length);
  r.consumed = limits::kFrameHeaderBytes + length;
  return r;
}

size_t StartFrameSize(size_t argc, const char* const* argv, ErrorCode* error,
                      DetachOptions detach) noexcept {
  size_t payload = CheckStartArgs(limits::kDefaultCols, limits::kDefaultRows, argc, argv, error);
  if (payload == 0) return 0;
  return limits::kFrameHeaderBytes + payload + (detach.detachable() ? limits::kStartDetachBytes : 0);
}

ErrorCode CheckDetachOptions(DetachOptions detach) noexcept {
  if (detach.grace_sec < 1 || detach.grace_sec > limits::kMaxDetachGraceSec) return ErrorCode::kBadDetach;
  if (detach.scrollback < limits::kMinScrollbackBytes || detach.scrollback > limits::kMaxScrollbackBytes)
    return ErrorCode::kBadDetach;
  return ErrorCode::kOk;
}

size_t EncodeStartFrame(uint16_t cols, uint16_t rows, size_t argc, const char* const* argv,
                        uint8_t* out, size_t cap, ErrorCode* error, uint32_t flags,
                        DetachOptions detach) noexcept {
  if ((flags & ~kStartFlagEnv) != 0) { *error = ErrorCode::kBadStart; return 0; }
  if (detach.detachable() || detach.scrollback != 0) {
    if ((*error = CheckDetachOptions(detach)) != ErrorCode::kOk) return 0;
    flags |= kStartFlagDetachable;
  }
  size_t payload = CheckStartArgs(cols, rows, argc, argv, error);
  if (payload == 0) return 0;
  if (detach.detachable()) payload += limits::kStartDetachBytes;
  size_t total = limits::kFrameHeaderBytes + payload;
  if (total > cap) { *error = ErrorCode::kArgvTooLong; return 0; }
  EncodeHeader(FrameType::kStart, static_cast<uint32_t>(payload), out);
  uint8_t* p = out + limits::kFrameHeaderBytes;
  PutU16(p, cols);
  PutU16(p + 2, rows);
  PutU32(p + 4, flags);
  PutU32(p + 8, static_cast<uint32_t>(argc));
  p += limits::kStartFixedBytes;
  for (size_t i = 0; i < argc; ++i) {
    size_t n = strlen(argv[i]);
    PutU32(p, static_cast<uint32_t>(n));
    memcpy(p + 4, argv[i], n);
    p += 4 + n;
  }
  if (detach.detachable()) {
    PutU32(p, detach.grace_sec);
    PutU32(p + 4, detach.scrollback);
  }
  return total;
}

ErrorCode ParseStartPayload(std::span<const uint8_t> payload, StartRequest* out) {
  if (payload.size() < limits::kStartFixedBytes) return ErrorCode::kBadStart;
  if (payload.size() > limits::kMaxStartPayload) return ErrorCode::kFrameTooLarge;
  const uint8_t* p = payload.data();
  uint16_t cols = GetU16(p), rows = GetU16(p + 2);
  uint32_t flags = GetU32(p + 4), argc = GetU32(p + 8);
  if ((flags & ~(kStartFlagEnv | kStartFlagDetachable)) != 0) return ErrorCode::kBadStart;
  if (cols < 1 || cols > limits::kMaxCols || rows < 1 || rows > limits::kMaxRows)
    return ErrorCode::kBadSize;
  if (argc == 0 || argc > limits::kMaxArgs) return ErrorCode::kBadArgc;
  size_t off = limits::kStartFixedBytes;
  size_t total = 0;
  std::vector<std::string> argv;
  argv.reserve(argc);
  for (uint32_t i = 0; i < argc; ++i) {
    if (payload.size() - off < 4) return ErrorCode::kBadStart;
    uint32_t n = GetU32(p + off);
    off += 4;
    if (n > limits::kMaxArgBytes) return ErrorCode::kArgTooLong;
    total += n;
    if (total > limits::kMaxArgvTotalBytes) return ErrorCode::kArgvTooLong;
    if (payload.size() - off < n) return ErrorCode::kBadStart;
    if (memchr(p + off, 0, n) != nullptr) return ErrorCode::kBadStart;
    if (i == 0 && n == 0) return ErrorCode::kEmptyCommand;
    argv.emplace_back(reinterpret_cast<const char*>(p + off), n);
    off += n;
  }
  DetachOptions detach;
  if ((flags & kStartFlagDetachable) != 0) {
    if (payload.size() - off < limits::kStartDetachBytes) return ErrorCode::kBadStart;
    detach.grace_sec = GetU32(p + off);
    detach.scrollback = GetU32(p + off + 4);
    off += limits::kStartDetachBytes;
    if (ErrorCode e = CheckDetachOptions(detach); e != ErrorCode::kOk) return e;
  }
  if (off != payload.size()) return ErrorCode::kBadStart;  // trailing bytes
  out->cols = cols;
  out->rows = rows;
  out->env = (flags & kStartFlagEnv) != 0;
  out->detach = detach;
  out->argv = std::move(argv);
  return ErrorCode::kOk;
}

ErrorCode ParseAttachPayload(std::span<const uint8_t> payload, std::string* id, uint64_t* cursor) {
  if (payload.size() != limits::kAttachPayload) return ErrorCode::kBadAttach;
  for (size_t i = 0; i < limits::kSessionIdHexBytes; ++i) {
    uint8_t c = payload[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return ErrorCode::kBadAttach;
  }
  id->assign(reinterpret_cast<const char*>(payload.data()), limits::kSessionIdHexBytes);
  *cursor = GetU64(payload.data() + limits::kSessionIdHexBytes);
  return ErrorCode::kOk;
}

void AppendAttachFrame(std::string_view id, uint64_t cursor, std::string* out) {
  uint8_t payload[limits::kAttachPayload] = {};
  memcpy(payload, id.data(), std::min(id.size(), limits::kSessionIdHexBytes));
  PutU64(payload + limits::kSessionIdHexBytes, cursor);
  AppendFrame(FrameType::kAttach, std::span<const uint8_t>(payload, sizeof payload), out);
}

ErrorCode ParseResizePayload(std::span<const uint8_t> payload, uint16_t* cols, uint16_t* rows) noexcept {
  return ParseSizeMessage(payload.data(), payload.size(), cols, rows);
}

std::string_view SignalName(uint8_t signo) noexcept {
  for (const auto& s : kSignals)
    if (s.number == signo) return s.name;
  return {};
}

uint8_t SignalNumber(std::string_view name) noexcept {
  if (name.size() > 3 && name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const auto& s : kSignals)
    if (s.name == name) return s.number;
  return 0;
}

}  // namespace opencode
