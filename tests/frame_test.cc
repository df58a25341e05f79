// Frame codec and START payload: round trips, incremental decoding split at
// every byte boundary, and every malformed header and payload.
#include "common/dimension.h"
#include "common/env_overlay.h"
#include "common/frame.h"
#include "common/size_message.h"

#include <gtest/gtest.h>

#include <random>

namespace opencode {
namespace {

using Status = DecodeResult::Status;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string Frame(FrameType t, std::string_view payload) {
  std::string out;
  AppendFrame(t, payload, &out);
  return out;
}

std::string Header(uint8_t version, uint8_t type, uint16_t reserved, uint32_t len) {
  std::string h(8, '\0');
  h[0] = char(version); h[1] = char(type);
  h[2] = char(reserved >> 8); h[3] = char(reserved);
  h[4] = char(len >> 24); h[5] = char(len >> 16); h[6] = char(len >> 8); h[7] = char(len);
  return h;
}

std::string StartFrame(uint16_t cols, uint16_t rows, std::vector<const char*> argv) {
  std::vector<uint8_t> buf(limits::kFrameHeaderBytes + limits::kMaxStartPayload);
  ErrorCode e;
  size_t n = EncodeStartFrame(cols, rows, argv.size(), argv.data(), buf.data(), buf.size(), &e);
  EXPECT_EQ(e, ErrorCode::kOk);
  return std::string(reinterpret_cast<char*>(buf.data()), n);
}

TEST(Frame, HeaderLayout) {
  std::string f = Frame(FrameType::kInput, "hi");
  EXPECT_EQ(f, Header(1, 0x02, 0, 2) + "hi");
}

TEST(Frame, RoundTripEveryType) {
  struct { Direction dir; FrameType type; std::string payload; } cases[] = {
      {Direction::kFromClient, FrameType::kInput, "ls -l\r"},
      {Direction::kFromClient, FrameType::kSignal, std::string(1, char(2))},
      {Direction::kFromClient, FrameType::kStop, ""},
      {Direction::kFromClient, FrameType::kEof, ""},
      {Direction::kFromClient, FrameType::kResize, std::string("\x00\x84\x00\x28", 4)},
      {Direction::kFromClient, FrameType::kEnv, std::string("\0\0\0\1\0\0\0\3A=1", 11)},
      {Direction::kFromSupervisor, FrameType::kOutput, std::string("\0\xff\x1b[0m", 6)},
      {Direction::kFromSupervisor, FrameType::kEvent, "{\"type\":\"notice\",\"code\":\"stopping\"}"},
  };
  for (auto& c : cases) {
    std::string f = Frame(c.type, c.payload);
    DecodeResult r = DecodeFrame(c.dir, Bytes(f));
    ASSERT_EQ(r.status, Status::kFrame);
    EXPECT_EQ(r.type, c.type);
    EXPECT_EQ(r.consumed, f.size());
    EXPECT_EQ(std::string(r.payload.begin(), r.payload.end()), c.payload);
  }
}

TEST(Frame, IncrementalSplitAtEveryByte) {
  // Three frames back to back, fed through every possible split point pair.
  std::string stream = StartFrame(120, 40, {"sh", "-c", "echo hi"}) +
                       Frame(FrameType::kInput, "abc") + Frame(FrameType::kStop, "");
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    std::string buf;
    std::vector<FrameType> got;
    auto feed = [&](std::string_view piece) {
      buf.append(piece);
      for (;;) {
        DecodeResult r = DecodeFrame(Direction::kFromClient, Bytes(buf));
        ASSERT_NE(r.status, Status::kError) << "cut " << cut;
        if (r.status == Status::kNeedMore) return;
        got.push_back(r.type);
        buf.erase(0, r.consumed);
      }
    };
    feed(std::string_view(stream).substr(0, cut));
    feed(std::string_view(stream).substr(cut));
    ASSERT_EQ(got.size(), 3u) << "cut " << cut;
    EXPECT_TRUE(buf.empty());
  }
  // And one byte at a time: every prefix is "need more" until the frame is whole.
  std::string f = Frame(FrameType::kInput, "hello");
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_EQ(DecodeFrame(Direction::kFromClient, Bytes(f.substr(0, i))).status, Status::kNeedMore);
}

struct BadHeader { const char* name; Direction dir; std::string bytes; ErrorCode want; };

class FrameMalformed : public ::testing::TestWithParam<BadHeader> {};

TEST_P(FrameMalformed, RejectedAsSoonAsVisible) {
  const auto& p = GetParam();
  DecodeResult r = DecodeFrame(p.dir, Bytes(p.bytes));
  EXPECT_EQ(r.status, Status::kError) << p.name;
  EXPECT_EQ(r.error, p.want) << p.name << ": " << ErrorCodeName(r.error);
}

const auto C = Direction::kFromClient;
const auto S = Direction::kFromSupervisor;

INSTANTIATE_TEST_SUITE_P(All, FrameMalformed, ::testing::Values(
    BadHeader{"version0", C, std::string(1, '\0'), ErrorCode::kBadVersion},
    BadHeader{"version2", C, std::string(1, '\2'), ErrorCode::kBadVersion},
    BadHeader{"version255", S, Header(255, 0x81, 0, 1) + "x", ErrorCode::kBadVersion},
    BadHeader{"type0", C, Header(1, 0, 0, 0).substr(0, 2), ErrorCode::kUnknownType},
    BadHeader{"type10", C, Header(1, 10, 0, 0), ErrorCode::kUnknownType},
    BadHeader{"list-from-supervisor", S, Header(1, 0x08, 0, 0), ErrorCode::kUnknownType},
    BadHeader{"list-with-payload", C, Header(1, 0x08, 0, 1), ErrorCode::kFrameTooLarge},
    BadHeader{"attach-too-small", C, Header(1, 0x09, 0, limits::kAttachPayload - 1), ErrorCode::kFrameTooSmall},
    BadHeader{"attach-too-large", C, Header(1, 0x09, 0, limits::kAttachPayload + 1), ErrorCode::kFrameTooLarge},
    BadHeader{"attach-from-supervisor", S, Header(1, 0x09, 0, limits::kAttachPayload), ErrorCode::kUnknownType},
    BadHeader{"env-from-supervisor", S, Header(1, 0x07, 0, 4), ErrorCode::kUnknownType},
    BadHeader{"env-too-small", C, Header(1, 0x07, 0, 3), ErrorCode::kFrameTooSmall},
    BadHeader{"env-too-large", C, Header(1, 0x07, 0, limits::kMaxEnvPayload + 1), ErrorCode::kFrameTooLarge},
    BadHeader{"output-from-client", C, Header(1, 0x81, 0, 1) + "x", ErrorCode::kUnknownType},
    BadHeader{"event-from-client", C, Header(1, 0x82, 0, 2), ErrorCode::kUnknownType},
    BadHeader{"input-from-supervisor", S, Header(1, 0x02, 0, 1), ErrorCode::kUnknownType},
    BadHeader{"start-from-supervisor", S, Header(1, 0x01, 0, 12), ErrorCode::kUnknownType},
    BadHeader{"type0xff", S, Header(1, 0xff, 0, 0), ErrorCode::kUnknownType},
    BadHeader{"reserved-hi", C, Header(1, 0x02, 0x0100, 1).substr(0, 3), ErrorCode::kBadReserved},
    BadHeader{"reserved-lo", C, Header(1, 0x02, 0x0001, 1), ErrorCode::kBadReserved},
    BadHeader{"input-empty", C, Header(1, 0x02, 0, 0), ErrorCode::kFrameTooSmall},
    BadHeader{"input-too-large", C, Header(1, 0x02, 0, limits::kMaxInputPayload + 1), ErrorCode::kFrameTooLarge},
    BadHeader{"input-4GiB", C, Header(1, 0x02, 0, 0xffffffffu), ErrorCode::kFrameTooLarge},
    BadHeader{"signal-empty", C, Header(1, 0x03, 0, 0), ErrorCode::kFrameTooSmall},
    BadHeader{"signal-two-bytes", C, Header(1, 0x03, 0, 2), ErrorCode::kFrameTooLarge},
    BadHeader{"stop-with-payload", C, Header(1, 0x04, 0, 1), ErrorCode::kFrameTooLarge},
    BadHeader{"eof-with-payload", C, Header(1, 0x05, 0, 3), ErrorCode::kFrameTooLarge},
    BadHeader{"start-too-small", C, Header(1, 0x01, 0, 11), ErrorCode::kFrameTooSmall},
    BadHeader{"start-too-large", C, Header(1, 0x01, 0, limits::kMaxStartPayload + 1), ErrorCode::kFrameTooLarge},
    BadHeader{"output-empty", S, Header(1, 0x81, 0, 0), ErrorCode::kFrameTooSmall},
    BadHeader{"output-too-large", S, Header(1, 0x81, 0, limits::kMaxOutputPayload + 1), ErrorCode::kFrameTooLarge},
    BadHeader{"event-too-small", S, Header(1, 0x82, 0, 1), ErrorCode::kFrameTooSmall},
    BadHeader{"event-too-large", S, Header(1, 0x82, 0, limits::kMaxEnvelopeBytes + 1), ErrorCode::kFrameTooLarge}),
    [](const auto& info) { std::string n = info.param.name; for (auto& c : n) if (c == '-') c = '_'; return n; });

TEST(Frame, LargestLegalFramesDecode) {
  std::string f = Frame(FrameType::kInput, std::string(limits::kMaxInputPayload, 'x'));
  EXPECT_EQ(DecodeFrame(C, Bytes(f)).status, Status::kFrame);
  f = Frame(FrameType::kOutput, std::string(limits::kMaxOutputPayload, 'x'));
  EXPECT_EQ(DecodeFrame(S, Bytes(f)).status, Status::kFrame);
}

// ---- START payload ----

ErrorCode ParseRaw(const std::string& payload, StartRequest* req) {
  return ParseStartPayload(Bytes(payload), req);
}

std::string U32(uint32_t v) {
  return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

std::string Payload(uint16_t cols, uint16_t rows, uint32_t flags, uint32_t argc,
                    std::vector<std::string> args) {
  std::string p{char(cols >> 8), char(cols), char(rows >> 8), char(rows)};
  p += U32(flags) + U32(argc);
  for (auto& a : args) p += U32(uint32_t(a.size())) + a;
  return p;
}

TEST(StartPayload, RoundTrip) {
  std::string f = StartFrame(132, 43, {"/bin/echo", "", "two words", "\xff\xfe", "-n"});
  DecodeResult r = DecodeFrame(C, Bytes(f));
  ASSERT_EQ(r.status, Status::kFrame);
  ASSERT_EQ(r.type, FrameType::kStart);
  StartRequest req;
  ASSERT_EQ(ParseStartPayload(r.payload, &req), ErrorCode::kOk);
  EXPECT_EQ(req.cols, 132);
  EXPECT_EQ(req.rows, 43);
  EXPECT_EQ(req.argv, (std::vector<std::string>{"/bin/echo", "", "two words", "\xff\xfe", "-n"}));
}

TEST(StartPayload, EncoderEnforcesBounds) {
  std::vector<uint8_t> buf(limits::kFrameHeaderBytes + limits::kMaxStartPayload);
  ErrorCode e;
  const char* one[] = {"sh"};
  EXPECT_EQ(EncodeStartFrame(0, 24, 1, one, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kBadSize);
  EXPECT_EQ(EncodeStartFrame(80, limits::kMaxRows + 1, 1, one, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kBadSize);
  EXPECT_EQ(EncodeStartFrame(80, 24, 0, one, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kBadArgc);
  std::vector<const char*> many(limits::kMaxArgs + 1, "x");
  EXPECT_EQ(EncodeStartFrame(80, 24, many.size(), many.data(), buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kBadArgc);
  std::string big(limits::kMaxArgBytes + 1, 'x');
  const char* bigv[] = {"sh", big.c_str()};
  EXPECT_EQ(EncodeStartFrame(80, 24, 2, bigv, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kArgTooLong);
  std::string third(limits::kMaxArgBytes, 'x');
  const char* totalv[] = {third.c_str(), third.c_str(), "y"};
  EXPECT_EQ(EncodeStartFrame(80, 24, 3, totalv, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kArgvTooLong);
  const char* empty[] = {""};
  EXPECT_EQ(EncodeStartFrame(80, 24, 1, empty, buf.data(), buf.size(), &e), 0u);
  EXPECT_EQ(e, ErrorCode::kEmptyCommand);
  EXPECT_EQ(EncodeStartFrame(80, 24, 1, one, buf.data(), 10, &e), 0u);  // cap too small
  // Exactly at the bounds: accepted, and the size matches StartFrameSize.
  std::vector<const char*> max_args(limits::kMaxArgs, "x");
  size_t n = EncodeStartFrame(limits::kMaxCols, limits::kMaxRows, max_args.size(), max_args.data(),
                              buf.data(), buf.size(), &e);
  EXPECT_EQ(e, ErrorCode::kOk);
  EXPECT_EQ(n, StartFrameSize(max_args.size(), max_args.data(), &e));
  const char* full[] = {third.c_str(), third.c_str()};
  EXPECT_GT(EncodeStartFrame(80, 24, 2, full, buf.data(), buf.size(), &e), 0u);
}

struct BadStart { const char* name; std::string payload; ErrorCode want; };
class StartMalformed : public ::testing::TestWithParam<BadStart> {};

TEST_P(StartMalformed, Rejected) {
  StartRequest req;
  req.argv = {"untouched"};
  EXPECT_EQ(ParseRaw(GetParam().payload, &req), GetParam().want) << GetParam().name;
  EXPECT_EQ(req.argv, std::vector<std::string>{"untouched"});  // nothing half-filled
}

INSTANTIATE_TEST_SUITE_P(All, StartMalformed, ::testing::Values(
    BadStart{"short", std::string(11, '\0'), ErrorCode::kBadStart},
    BadStart{"flags", Payload(80, 24, 2, 1, {"sh"}), ErrorCode::kBadStart},
    BadStart{"flags_env_and_more", Payload(80, 24, 3, 1, {"sh"}), ErrorCode::kBadStart},
    BadStart{"cols0", Payload(0, 24, 0, 1, {"sh"}), ErrorCode::kBadSize},
    BadStart{"rows0", Payload(80, 0, 0, 1, {"sh"}), ErrorCode::kBadSize},
    BadStart{"cols_over", Payload(1001, 24, 0, 1, {"sh"}), ErrorCode::kBadSize},
    BadStart{"rows_over", Payload(80, 65535, 0, 1, {"sh"}), ErrorCode::kBadSize},
    BadStart{"argc0", Payload(80, 24, 0, 0, {}), ErrorCode::kBadArgc},
    BadStart{"argc_over", Payload(80, 24, 0, limits::kMaxArgs + 1, {"sh"}), ErrorCode::kBadArgc},
    BadStart{"argc_more_than_present", Payload(80, 24, 0, 2, {"sh"}), ErrorCode::kBadStart},
    BadStart{"argc_less_than_present", Payload(80, 24, 0, 1, {"sh", "x"}), ErrorCode::kBadStart},
    BadStart{"trailing_byte", Payload(80, 24, 0, 1, {"sh"}) + "x", ErrorCode::kBadStart},
    BadStart{"length_past_end", Payload(80, 24, 0, 1, {}) + U32(5) + "sh", ErrorCode::kBadStart},
    BadStart{"truncated_length", Payload(80, 24, 0, 1, {}) + "\0\0", ErrorCode::kBadStart},
    BadStart{"empty_command", Payload(80, 24, 0, 1, {""}), ErrorCode::kEmptyCommand},
    BadStart{"nul_in_arg", Payload(80, 24, 0, 2, {"sh", std::string("a\0b", 3)}), ErrorCode::kBadStart},
    BadStart{"arg_too_long", Payload(80, 24, 0, 2, {"sh", std::string(limits::kMaxArgBytes + 1, 'x')}), ErrorCode::kArgTooLong},
    BadStart{"arg_len_huge", Payload(80, 24, 0, 1, {}) + U32(0xffffffffu), ErrorCode::kArgTooLong},
    BadStart{"argv_too_long", Payload(80, 24, 0, 3, {std::string(limits::kMaxArgBytes, 'x'), std::string(limits::kMaxArgBytes, 'x'), "y"}), ErrorCode::kArgvTooLong}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(StartPayload, RandomizedRoundTrip100k) {
  std::mt19937_64 rng(20261202);  // fixed seed: reproducible
  std::uniform_int_distribution<int> argc_d(1, 8), len_d(0, 24), byte_d(1, 255), size_d(1, 1000);
  std::vector<uint8_t> buf(limits::kFrameHeaderBytes + limits::kMaxStartPayload);
  for (int i = 0; i < 100000; ++i) {
    std::vector<std::string> args(argc_d(rng));
    for (size_t k = 0; k < args.size(); ++k) {
      args[k].resize(len_d(rng) + (k == 0 ? 1 : 0));
      for (auto& c : args[k]) c = char(byte_d(rng));  // no NUL: C strings
    }
    std::vector<const char*> ptrs;
    for (auto& a : args) ptrs.push_back(a.c_str());
    uint16_t cols = uint16_t(size_d(rng)), rows = uint16_t(size_d(rng));
    ErrorCode e;
    size_t n = EncodeStartFrame(cols, rows, ptrs.size(), ptrs.data(), buf.data(), buf.size(), &e);
    ASSERT_GT(n, 0u);
    DecodeResult r = DecodeFrame(C, {buf.data(), n});
    ASSERT_EQ(r.status, Status::kFrame);
    ASSERT_EQ(r.consumed, n);
    StartRequest req;
    ASSERT_EQ(ParseStartPayload(r.payload, &req), ErrorCode::kOk);
    ASSERT_EQ(req.argv, args);
    ASSERT_EQ(req.cols, cols);
    ASSERT_EQ(req.rows, rows);
  }
}

TEST(Signals, AllowlistIsExact) {
  int allowed = 0;
  for (int n = 0; n < 256; ++n) {
    std::string_view name = SignalName(uint8_t(n));
    if (name.empty()) continue;
    ++allowed;
    EXPECT_EQ(SignalNumber(name), n);
    EXPECT_EQ(SignalNumber("SIG" + std::string(name)), n);
  }
  EXPECT_EQ(allowed, 11);
  EXPECT_EQ(SignalNumber("SEGV"), 0);
  EXPECT_EQ(SignalNumber("int"), 0);
  EXPECT_EQ(SignalNumber(""), 0);
  EXPECT_TRUE(SignalName(0).empty());
  EXPECT_TRUE(SignalName(11).empty());  // SEGV is not something a client may send
}

}  // namespace
}  // namespace opencode

// The helpers' --cols/--rows and COLUMNS/LINES spelling (common/dimension.h).
namespace opencode {
namespace {
TEST(Dimension, AcceptsOneToMaxInPlainDecimalOnly) {
  uint16_t v = 0;
  EXPECT_TRUE(ParseDimension("1", 1000, &v));
  EXPECT_EQ(v, 1);
  EXPECT_TRUE(ParseDimension("1000", 1000, &v));
  EXPECT_EQ(v, 1000);
  EXPECT_TRUE(ParseDimension("80", 1000, &v));
  EXPECT_EQ(v, 80);
  v = 7;
  for (const char* bad : {"", "0", "01", "1001", "+1", "-1", " 1", "1 ", "1a", "10000", "99999", "1e3"})
    EXPECT_FALSE(ParseDimension(bad, 1000, &v)) << '"' << bad << '"';
  EXPECT_EQ(v, 7) << "untouched on failure";
}
}  // namespace
}  // namespace opencode

namespace opencode {
namespace {

// RESIZE (0x06): exactly kResizePayload bytes, cols and rows 1..1000.
TEST(Resize, FrameBoundsAreExactlyFourBytes) {
  size_t min = 0, max = 0;
  ASSERT_TRUE(PayloadBounds(Direction::kFromClient, 0x06, &min, &max));
  EXPECT_EQ(min, limits::kResizePayload);
  EXPECT_EQ(max, limits::kResizePayload);
  EXPECT_FALSE(PayloadBounds(Direction::kFromSupervisor, 0x06, &min, &max));
  uint8_t hdr[8] = {1, 0x06, 0, 0, 0, 0, 0, 3};
  EXPECT_EQ(DecodeFrame(Direction::kFromClient, std::span<const uint8_t>(hdr, 8)).error, ErrorCode::kFrameTooSmall);
  hdr[7] = 5;
  EXPECT_EQ(DecodeFrame(Direction::kFromClient, std::span<const uint8_t>(hdr, 8)).error, ErrorCode::kFrameTooLarge);
  EXPECT_EQ(DecodeFrame(Direction::kFromSupervisor, std::span<const uint8_t>(hdr, 8)).error, ErrorCode::kUnknownType);
}

TEST(Resize, PayloadParsesEveryValidSizeAndRefusesTheRest) {
  for (unsigned c : {0u, 1u, 80u, 999u, 1000u, 1001u, 65535u})
    for (unsigned r : {0u, 1u, 24u, 1000u, 1001u, 65535u}) {
      uint8_t p[4];
      EncodeSizeMessage(uint16_t(c), uint16_t(r), p);
      uint16_t cols = 7, rows = 7;
      ErrorCode e = ParseResizePayload(std::span<const uint8_t>(p, 4), &cols, &rows);
      bool ok = c >= 1 && c <= 1000 && r >= 1 && r <= 1000;
      EXPECT_EQ(e, ok ? ErrorCode::kOk : ErrorCode::kBadSize) << c << "x" << r;
      EXPECT_EQ(cols, ok ? c : 7u);
      EXPECT_EQ(rows, ok ? r : 7u);
      EXPECT_EQ(p[0], uint8_t(c >> 8));  // big-endian
      EXPECT_EQ(p[1], uint8_t(c));
    }
  uint8_t five[5] = {0, 80, 0, 24, 0};
  uint16_t c = 0, r = 0;
  EXPECT_EQ(ParseResizePayload(std::span<const uint8_t>(five, 3), &c, &r), ErrorCode::kFrameTooSmall);
  EXPECT_EQ(ParseResizePayload(std::span<const uint8_t>(five, 5), &c, &r), ErrorCode::kFrameTooLarge);
  EXPECT_EQ(ParseSizeMessage(five, 0, &c, &r), ErrorCode::kFrameTooSmall);
}

// ---- ENV payload (common/env_overlay.h) ----

std::string EnvEntries(const std::vector<std::string>& entries, uint32_t count) {
  std::string out = U32(count);
  for (const std::string& e : entries) out += U32(uint32_t(e.size())) + e;
  return out;
}
std::string EnvEntries(const std::vector<std::string>& entries) {
  return EnvEntries(entries, uint32_t(entries.size()));
}
ErrorCode CheckEnv(const std::string& list) {
  return CheckEnvList(reinterpret_cast<const uint8_t*>(list.data()), list.size());
}

TEST(EnvPayload, FrameBoundsAndTheLargestListDecode) {
  size_t min = 0, max = 0;
  ASSERT_TRUE(PayloadBounds(C, 0x07, &min, &max));
  EXPECT_EQ(min, 4u);
  EXPECT_EQ(max, limits::kMaxEnvPayload);
  EXPECT_FALSE(PayloadBounds(S, 0x07, &min, &max));
  EXPECT_LE(limits::kMaxEnvPayload, limits::kMaxFramePayload);
  EXPECT_LE(limits::kMaxStartPayload, limits::kMaxFramePayload);
  // kMaxEnvVars entries of kMaxEnvTotalBytes in total: the largest payload.
  std::vector<std::string> entries;
  for (size_t i = 0; i < limits::kMaxEnvVars; ++i)
    entries.push_back("V" + std::to_string(10000 + i) + "=" +
                      std::string(limits::kMaxEnvTotalBytes / limits::kMaxEnvVars - 7, 'x'));
  std::string list = EnvEntries(entries);
  ASSERT_EQ(list.size(), limits::kMaxEnvPayload);
  EXPECT_EQ(CheckEnv(list), ErrorCode::kOk);
  std::string f = Frame(FrameType::kEnv, list);
  DecodeResult r = DecodeFrame(C, Bytes(f));
  ASSERT_EQ(r.status, Status::kFrame);
  EXPECT_EQ(r.type, FrameType::kEnv);
}

TEST(EnvPayload, EveryBoundAndErrorIsExact) {
  EXPECT_EQ(CheckEnv(EnvEntries({})), ErrorCode::kOk);
  EXPECT_EQ(CheckEnv(EnvEntries({"A=", "_b9=x=y", "PATH=/x"})), ErrorCode::kOk);
  // structure
  EXPECT_EQ(CheckEnv(""), ErrorCode::kBadEnv);
  EXPECT_EQ(CheckEnv(std::string("\0\0\0", 3)), ErrorCode::kBadEnv);
  EXPECT_EQ(CheckEnv(EnvEntries({"A=1"}, 2)), ErrorCode::kBadEnv);        // count above the entries
  EXPECT_EQ(CheckEnv(EnvEntries({"A=1", "B=2"}, 1)), ErrorCode::kBadEnv);  // trailing bytes
  EXPECT_EQ(CheckEnv(U32(1) + U32(5) + "A=1"), ErrorCode::kBadEnv);        // length past the end
  EXPECT_EQ(CheckEnv(U32(1) + std::string("\0\0", 2)), ErrorCode::kBadEnv);  // truncated length
  EXPECT_EQ(CheckEnv(EnvEntries({"NOEQUALS"})), ErrorCode::kBadEnv);
  EXPECT_EQ(CheckEnv(EnvEntries({std::string("A=x\0y", 5)})), ErrorCode::kBadEnv);
  EXPECT_EQ(CheckEnv(EnvEntries({"A=1", "B=2", "A=1"})), ErrorCode::kBadEnv);  // a name twice
  EXPECT_EQ(CheckEnv(EnvEntries({"AB=1", "A=2", "ABC=3"})), ErrorCode::kOk);   // prefixes are other names
  // names
  for (std::string bad : {"=x", "1A=x", "A-B=x", "A.B=x", "A B=x", "\xc3\xa9=x", "A\n=x"})
    EXPECT_EQ(CheckEnv(EnvEntries({bad})), ErrorCode::kBadEnvName) << bad;
  std::string longest(limits::kMaxEnvNameBytes, 'N');
  EXPECT_EQ(CheckEnv(EnvEntries({longest + "=v"})), ErrorCode::kOk);
  EXPECT_EQ(CheckEnv(EnvEntries({longest + "N=v"})), ErrorCode::kBadEnvName);
  // count
  std::vector<std::string> many;
  for (size_t i = 0; i < limits::kMaxEnvVars; ++i) many.push_back("V" + std::to_string(i) + "=");
  EXPECT_EQ(CheckEnv(EnvEntries(many)), ErrorCode::kOk);
  many.push_back("LAST=");
  EXPECT_EQ(CheckEnv(EnvEntries(many)), ErrorCode::kEnvTooMany);
  EXPECT_EQ(CheckEnv(U32(0xffffffffu)), ErrorCode::kEnvTooMany);  // before any entry is looked at
  // one entry
  std::string entry = "A=" + std::string(limits::kMaxEnvEntryBytes - 2, 'x');
  EXPECT_EQ(CheckEnv(EnvEntries({entry})), ErrorCode::kOk);
  EXPECT_EQ(CheckEnv(EnvEntries({entry + "x"})), ErrorCode::kEnvTooLong);
  EXPECT_EQ(CheckEnv(U32(1) + U32(0xffffffffu)), ErrorCode::kEnvTooLong);  // declared, not sent
  // all entries
  std::string half = std::string(limits::kMaxEnvTotalBytes / 2 - 2, 'x');
  EXPECT_EQ(CheckEnv(EnvEntries({"A=" + half, "B=" + half})), ErrorCode::kOk);
  EXPECT_EQ(CheckEnv(EnvEntries({"A=" + half, "B=" + half, "C="})), ErrorCode::kEnvTooLong);
}

TEST(EnvPayload, TheDenyListDropsTheApplicationsUnitVariablesOnly) {
  for (const char* n : {"INVOCATION_ID", "JOURNAL_STREAM", "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS",
                        "LISTEN_FDNAMES", "WATCHDOG_PID", "WATCHDOG_USEC", "SYSTEMD_EXEC_PID", "MANAGERPID",
                        "CREDENTIALS_DIRECTORY", "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "CACHE_DIRECTORY",
                        "LOGS_DIRECTORY", "CONFIGURATION_DIRECTORY", "MAINPID", "SERVICE_RESULT", "EXIT_CODE",
                        "EXIT_STATUS", "MONITOR_UNIT", "MONITOR_SERVICE_RESULT", "TRIGGER_UNIT", "TRIGGER_PATH",
                        "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE", "FDSTORE", "OPENCODE_PTY_ARGV",
                        "PIDFILE", "REMOTE_ADDR", "REMOTE_PORT"})
    EXPECT_TRUE(DeniedEnvName(n)) << n;
  for (const char* n : {"PATH", "HOME", "TERM", "OPENCODE_TERMINAL", "INVOCATION_ID_X", "XINVOCATION_ID",
                        "MONITOR", "TRIGGER", "ANTHROPIC_API_KEY", "LISTEN", "OPENCODE_PTY_ARGVX"})
    EXPECT_FALSE(DeniedEnvName(n)) << n;
  std::string list = EnvEntries({"KEEP=1", "INVOCATION_ID=bogus", "MONITOR_X=2", "TERM=dumb"});
  std::string out(list.size(), '\0');
  size_t n = FilterEnvList(reinterpret_cast<const uint8_t*>(list.data()), list.size(),
                           reinterpret_cast<uint8_t*>(out.data()));
  out.resize(n);
  EXPECT_EQ(out, EnvEntries({"KEEP=1", "TERM=dumb"}));
  EXPECT_EQ(CheckEnv(out), ErrorCode::kOk);
}

// The START flag "an ENV frame follows" round-trips; the caller cannot pass
// the detachable bit itself (it comes from DetachOptions), and a payload
// that has it without its 8 bytes, or any unknown bit, is bad_start.
TEST(StartPayload, OnlyTheEnvFlagIsAccepted) {
  const char* one[] = {"sh"};
  std::vector<uint8_t> buf(64);
  ErrorCode e;
  size_t n = EncodeStartFrame(80, 24, 1, one, buf.data(), buf.size(), &e, kStartFlagEnv);
  ASSERT_GT(n, 0u);
  StartRequest req;
  ASSERT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &req), ErrorCode::kOk);
  EXPECT_TRUE(req.env);
  n = EncodeStartFrame(80, 24, 1, one, buf.data(), buf.size(), &e, 0);
  ASSERT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &req), ErrorCode::kOk);
  EXPECT_FALSE(req.env);
  EXPECT_EQ(EncodeStartFrame(80, 24, 1, one, buf.data(), buf.size(), &e, 2), 0u);
  EXPECT_EQ(e, ErrorCode::kBadStart);
  for (uint32_t flags : {2u, 3u, 0x80000000u, 0xffffffffu}) {
    buf[8 + 4] = uint8_t(flags >> 24);
    buf[8 + 5] = uint8_t(flags >> 16);
    buf[8 + 6] = uint8_t(flags >> 8);
    buf[8 + 7] = uint8_t(flags);
    EXPECT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &req), ErrorCode::kBadStart) << flags;
  }
}

// Detachable START: flag 0x2 and grace(u32) scrollback(u32) after the last
// argument; both bounds exact, combined with ENV, and nothing after them.
TEST(StartPayload, DetachOptionsRoundTripAndTheirBounds) {
  const char* argv[] = {"sh", "-c", "x"};
  auto encode = [&](DetachOptions d, uint32_t flags, std::vector<uint8_t>* buf, ErrorCode* e) {
    buf->assign(128, 0);
    size_t n = EncodeStartFrame(80, 24, 3, argv, buf->data(), buf->size(), e, flags, d);
    buf->resize(n);
    return n;
  };
  std::vector<uint8_t> buf;
  ErrorCode e;
  struct Good { uint32_t grace, scrollback, flags; } good[] = {
      {1, uint32_t(limits::kMinScrollbackBytes), 0},
      {limits::kMaxDetachGraceSec, uint32_t(limits::kMaxScrollbackBytes), kStartFlagEnv},
      {60, uint32_t(limits::kDefaultScrollbackBytes), 0},
  };
  for (const Good& g : good) {
    size_t n = encode({g.grace, g.scrollback}, g.flags, &buf, &e);
    ASSERT_GT(n, 0u) << ErrorCodeName(e);
    ErrorCode size_error;
    EXPECT_EQ(n, StartFrameSize(3, argv, &size_error, {g.grace, g.scrollback}));
    uint32_t flags = (uint32_t(buf[12]) << 24) | (uint32_t(buf[13]) << 16) | (uint32_t(buf[14]) << 8) | buf[15];
    EXPECT_EQ(flags, g.flags | kStartFlagDetachable);
    StartRequest req;
    ASSERT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &req), ErrorCode::kOk);
    EXPECT_EQ(req.detach.grace_sec, g.grace);
    EXPECT_EQ(req.detach.scrollback, g.scrollback);
    EXPECT_EQ(req.env, g.flags == kStartFlagEnv);
    EXPECT_EQ(req.argv, (std::vector<std::string>{"sh", "-c", "x"}));
    // A trailing byte, or one of the 8 missing: bad_start.
    std::vector<uint8_t> longer(buf.begin() + 8, buf.end());
    longer.push_back(0);
    EXPECT_EQ(ParseStartPayload(longer, &req), ErrorCode::kBadStart);
    EXPECT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 9), &req), ErrorCode::kBadStart);
  }
  // Not detachable: no flag, no 8 bytes.
  StartRequest plain;
  size_t n = encode({}, 0, &buf, &e);
  ASSERT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &plain), ErrorCode::kOk);
  EXPECT_FALSE(plain.detach.detachable());
  // Out of range, as the encoder sees them and as a parser does.
  struct Bad { uint32_t grace, scrollback; } bad[] = {
      {0, uint32_t(limits::kMinScrollbackBytes)},
      {limits::kMaxDetachGraceSec + 1, uint32_t(limits::kMinScrollbackBytes)},
      {1, uint32_t(limits::kMinScrollbackBytes - 1)},
      {1, uint32_t(limits::kMaxScrollbackBytes + 1)},
      {1, 0},
      {0xffffffffu, 0xffffffffu},
  };
  for (const Bad& b : bad) {
    EXPECT_EQ(encode({b.grace, b.scrollback}, 0, &buf, &e), 0u);
    EXPECT_EQ(e, ErrorCode::kBadDetach);
    n = encode({60, uint32_t(limits::kMinScrollbackBytes)}, 0, &buf, &e);
    for (int i = 0; i < 4; ++i) {
      buf[n - 8 + i] = uint8_t(b.grace >> (24 - 8 * i));
      buf[n - 4 + i] = uint8_t(b.scrollback >> (24 - 8 * i));
    }
    StartRequest req;
    EXPECT_EQ(ParseStartPayload(std::span<const uint8_t>(buf.data() + 8, n - 8), &req), ErrorCode::kBadDetach)
        << b.grace << " " << b.scrollback;
  }
}

TEST(AttachPayload, IdAndCursorRoundTripAndAMalformedIdIsRefused) {
  std::string id = "0123456789abcdef0123456789abcdef";
  for (uint64_t cursor : {uint64_t{0}, uint64_t{1} << 40, ~uint64_t{0}}) {
    std::string f;
    AppendAttachFrame(id, cursor, &f);
    DecodeResult d = DecodeFrame(Direction::kFromClient,
                                 std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(f.data()), f.size()));
    ASSERT_EQ(d.status, DecodeResult::Status::kFrame);
    EXPECT_EQ(d.type, FrameType::kAttach);
    std::string got;
    uint64_t c = 1;
    ASSERT_EQ(ParseAttachPayload(d.payload, &got, &c), ErrorCode::kOk);
    EXPECT_EQ(got, id);
    EXPECT_EQ(c, cursor);
  }
  for (std::string bad : {std::string("0123456789ABCDEF0123456789abcdef"), std::string(31, 'a') + "g",
                          std::string(31, 'a') + std::string(1, '\0'), std::string(32, ' ')}) {
    std::string p = bad + std::string(8, '\0');
    std::string got;
    uint64_t c = 0;
    EXPECT_EQ(ParseAttachPayload(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.data()), p.size()), &got, &c),
              ErrorCode::kBadAttach);
  }
  std::string shortp(limits::kSessionIdHexBytes + 7, 'a');
  std::string got;
  uint64_t c = 0;
  EXPECT_EQ(ParseAttachPayload(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(shortp.data()), shortp.size()), &got, &c),
            ErrorCode::kBadAttach);
}

}  // namespace
}  // namespace opencode
