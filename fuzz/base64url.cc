// Fuzzes the launcher's argument codec (common/base64url.cc). Input: once as
// an encoded argument, once as raw bytes. Invariants: DecodeArg's verdict
// agrees with an independent classification written from docs/PROTOCOL.md
// section 7; whatever it accepts is exactly what EncodeArg writes for the
// decoded bytes (one spelling per byte string); every byte string survives
// EncodeArg then DecodeArg.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/base64url.h"
#include "fuzz/fuzz_check.h"

namespace opencode {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// The reason docs/PROTOCOL.md gives for rejecting `s`, in the decoder's order
// of checks, or kOk.
ErrorCode Classify(std::string_view s) {
  if (s.empty() || s[0] != 'a') return ErrorCode::kBadPrefix;
  std::string_view body = s.substr(1);
  for (char c : body)
    if (kAlphabet.find(c) == std::string_view::npos) return ErrorCode::kBadAlphabet;
  if (body.size() % 4 == 1) return ErrorCode::kBadLength;
  // The last character of a 2- or 3-character group carries 4 or 2 unused
  // low bits.
  size_t last = body.empty() ? 0 : kAlphabet.find(body.back());
  if (body.size() % 4 == 2 && (last & 0xf) != 0) return ErrorCode::kNonCanonical;
  if (body.size() % 4 == 3 && (last & 0x3) != 0) return ErrorCode::kNonCanonical;
  return ErrorCode::kOk;
}

}  // namespace
}  // namespace opencode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  std::string_view input(reinterpret_cast<const char*>(data), size);

  std::string decoded = "stale";
  ErrorCode e = DecodeArg(input, &decoded);
  FUZZ_CHECK(e == Classify(input));
  if (e == ErrorCode::kOk) {
    FUZZ_CHECK(EncodedArgLength(decoded.size()) == size);
    std::string again;
    EncodeArg(decoded, &again);
    FUZZ_CHECK(again == input);
  } else {
    FUZZ_CHECK(decoded.empty());  // "cleared first": nothing half-decoded
  }

  std::string encoded = "x";  // EncodeArg appends
  EncodeArg(input, &encoded);
  FUZZ_CHECK(encoded.size() == 1 + EncodedArgLength(size));
  std::string_view arg = std::string_view(encoded).substr(1);
  FUZZ_CHECK(Classify(arg) == ErrorCode::kOk);
  std::string back;
  FUZZ_CHECK(DecodeArg(arg, &back) == ErrorCode::kOk);
  FUZZ_CHECK(back == input);
  return 0;
}
