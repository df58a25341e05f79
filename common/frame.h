// The session protocol's wire format (docs/PROTOCOL.md is the normative text).
// Owns: frame header encoding, the incremental strict decoder, the start
// payload, and the signal allowlist. Invariant: a declared length above the
// type's maximum is rejected as soon as the 8 header bytes are seen, before any
// payload is buffered; nothing outside this file interprets header bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/errors.h"
#include "common/limits.h"

namespace opencode {

inline constexpr uint8_t kProtocolVersion = 1;

enum class FrameType : uint8_t {
  // client (helper or Node) -> supervisor
  kStart = 0x01,   // binary start payload (EncodeStartPayload), once, first
  kInput = 0x02,   // UTF-8 bytes for the PTY, 1..kMaxInputPayload
  kSignal = 0x03,  // 1 byte: signal number from the allowlist
  kStop = 0x04,    // empty: stop the unit
  kEof = 0x05,     // empty: end of input (the PTY sees ^D via script)
  kResize = 0x06,  // cols(2) rows(2) big-endian: new window size (size_message.h)
  kEnv = 0x07,     // the environment overlay (common/env_overlay.h), only right after a
                   // START with kStartFlagEnv, sent by the application itself
  kList = 0x08,    // empty: list the detachable sessions (instead of START)
  kAttach = 0x09,  // session id (32 hex) + cursor (u64): attach a detached session (instead of START)
  // supervisor -> client
  kOutput = 0x81,  // raw PTY bytes, 1..kMaxOutputPayload
  kEvent = 0x82,   // JSON envelope, 2..kMaxEnvelopeBytes
};

// Who sent the bytes being decoded: each side accepts only the other's types.
enum class Direction { kFromClient, kFromSupervisor };

// Smallest and largest payload allowed for a frame type; false if `type` is not
// a frame type of `dir`.
bool PayloadBounds(Direction dir, uint8_t type, size_t* min, size_t* max) noexcept;

// Writes the 8-byte header for a frame of `type` with `length` payload bytes.
void EncodeHeader(FrameType type, uint32_t length, uint8_t out[limits::kFrameHeaderBytes]) noexcept;

// Appends a whole frame (header + payload) to `out`.
void AppendFrame(FrameType type, std::span<const uint8_t> payload, std::string* out);
void AppendFrame(FrameType type, std::string_view payload, std::string* out);

struct DecodeResult {
  enum class Status { kNeedMore, kFrame, kError };
  Status status = Status::kNeedMore;
  ErrorCode error = ErrorCode::kOk;  // set when status == kError
  FrameType type{};                  // set when status == kFrame
  std::span<const uint8_t> payload;  // points into the decoder's input
  size_t consumed = 0;               // bytes of the input this frame used
};

// Decodes at most one frame from the front of `buf`. Incremental: with a prefix
// of a valid frame it returns kNeedMore (and rejects an invalid header as soon
// as the offending byte is present). The caller drops `consumed` bytes after a
// kFrame. Stateless, so the same call works for any split of the input.
DecodeResult DecodeFrame(Direction dir, std::span<const uint8_t> buf) noexcept;

// ---- start payload ----
// START flags: bit 0 = an ENV frame follows on the connection; bit 1 = the
// session is detachable, and the payload ends with grace(u32 seconds) and
// scrollback(u32 bytes). Every other bit is reserved and refused (bad_start).
inline constexpr uint32_t kStartFlagEnv = 0x1;
inline constexpr uint32_t kStartFlagDetachable = 0x2;

// What a detachable session asks for; grace_sec 0 = not detachable.
struct DetachOptions {
  uint32_t grace_sec = 0;   // 1..kMaxDetachGraceSec when detachable
  uint32_t scrollback = 0;  // kMinScrollbackBytes..kMaxScrollbackBytes when detachable
  bool detachable() const noexcept { return grace_sec != 0; }
};

struct StartRequest {
  uint16_t cols = limits::kDefaultCols;
  uint16_t rows = limits::kDefaultRows;
  bool env = false;               // kStartFlagEnv: wait for the ENV frame
  DetachOptions detach;           // kStartFlagDetachable
  std::vector<std::string> argv;  // argv[0] is the command; bytes, not text
};

// Size of the START frame (header included) for these arguments (and the
// detach options, when detachable), or 0 if they exceed a bound (then *error
// says which).
size_t StartFrameSize(size_t argc, const char* const* argv, ErrorCode* error,
                      DetachOptions detach = {}) noexcept;

// Encodes a whole START frame (header + payload) into `out` (capacity `cap`)
// without allocating: used by the static client helper. Returns the frame size,
// or 0 with *error set (bounds, bad size, empty command, bad detach options,
// cap too small). `flags`: kStartFlagEnv or 0; kStartFlagDetachable is set
// from `detach` (never pass it).
size_t EncodeStartFrame(uint16_t cols, uint16_t rows, size_t argc, const char* const* argv,
                        uint8_t* out, size_t cap, ErrorCode* error, uint32_t flags = 0,
                        DetachOptions detach = {}) noexcept;

// kOk if the options are in range (grace 1..kMaxDetachGraceSec, scrollback
// kMinScrollbackBytes..kMaxScrollbackBytes), else kBadDetach.
ErrorCode CheckDetachOptions(DetachOptions detach) noexcept;

// Strict parse of a START payload: every length checked against the payload
// and the limits, no trailing bytes, no unknown flag, sizes in range, the
// detach options (with kStartFlagDetachable) in range.
ErrorCode ParseStartPayload(std::span<const uint8_t> payload, StartRequest* out);

// ---- attach payload ----
// Strict parse of an ATTACH payload (exactly kAttachPayload bytes): the id
// must be 32 lowercase hex characters (else kBadAttach).
ErrorCode ParseAttachPayload(std::span<const uint8_t> payload, std::string* id, uint64_t* cursor);
// Appends a whole ATTACH frame to `out`.
void AppendAttachFrame(std::string_view id, uint64_t cursor, std::string* out);

// ---- resize payload ----
// Strict parse of a RESIZE payload (exactly kResizePayload bytes, both
// dimensions 1..1000): kOk, kBadSize, or kFrameTooSmall/kFrameTooLarge.
ErrorCode ParseResizePayload(std::span<const uint8_t> payload, uint16_t* cols, uint16_t* rows) noexcept;

// ---- signal allowlist ----
// Signals a client may ask for, by number (Linux x86_64/aarch64 numbering is
// identical for these). Returns the name ("INT") or empty if not allowed.
std::string_view SignalName(uint8_t signo) noexcept;
// Number for an allowed name ("INT" or "SIGINT"), 0 if not allowed.
uint8_t SignalNumber(std::string_view name) noexcept;

}  // namespace opencode
