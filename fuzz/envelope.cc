// Fuzzes ParseEnvelope (common/envelope.cc), the strict reader of EVENT
// payloads used by clients and tests. Input: the JSON text. Invariants: an
// accepted envelope, written again with EnvelopeWriter (the supervisor's
// writer), parses to the same type and fields, and the writer's text is a
// fixed point (writing the re-parsed envelope gives the same text).
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "common/envelope.h"
#include "common/limits.h"
#include "fuzz/fuzz_check.h"

namespace opencode {
namespace {

std::string Write(const Envelope& env) {
  EnvelopeWriter w(env.type);
  for (const auto& [key, value] : env.fields) {
    if (std::holds_alternative<std::nullptr_t>(value)) w.Null(key);
    else if (const bool* b = std::get_if<bool>(&value)) w.Bool(key, *b);
    else if (const int64_t* i = std::get_if<int64_t>(&value)) w.Int(key, *i);
    else w.Str(key, std::get<std::string>(value));
  }
  return w.Finish();
}

}  // namespace
}  // namespace opencode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode;
  std::string_view json(reinterpret_cast<const char*>(data), size);
  Envelope env;
  if (ParseEnvelope(json, &env) != ErrorCode::kOk) return 0;
  FUZZ_CHECK(size <= limits::kMaxEnvelopeBytes);
  FUZZ_CHECK(env.type == "started" || env.type == "exit" || env.type == "error" ||
             env.type == "notice");
  FUZZ_CHECK(env.fields.count("type") == 0);

  std::string text = Write(env);
  Envelope again;
  ErrorCode e = ParseEnvelope(text, &again);
  if (text.size() > limits::kMaxEnvelopeBytes) {
    // The writer escapes control characters as \u00XX, so a text that used
    // the two-byte escapes (\b, \f) near the limit grows past it; the reader
    // must then refuse it rather than read beyond its bound.
    FUZZ_CHECK(e == ErrorCode::kFrameTooLarge);
    return 0;
  }
  FUZZ_CHECK(e == ErrorCode::kOk);
  FUZZ_CHECK(again.type == env.type && again.fields == env.fields);
  FUZZ_CHECK(Write(again) == text);
  return 0;
}
