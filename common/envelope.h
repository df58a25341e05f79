// JSON envelopes of EVENT frames: a flat JSON object whose values are strings,
// integers, booleans or null. Owns the encoder the supervisor uses and the
// strict decoder tests, fuzzers and a C++ client use. Invariant: the decoder
// accepts only what the encoder can produce in shape (one object, no nesting,
// no duplicate keys, no trailing bytes, at most kMaxEnvelopeBytes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/errors.h"

namespace opencode {

using JsonValue = std::variant<std::nullptr_t, bool, int64_t, std::string>;

struct Envelope {
  std::string type;                       // "started", "exit", "error", "notice"
  std::map<std::string, JsonValue> fields;  // every key but "type"
};

// Builds envelopes field by field; Finish() returns the JSON text.
class EnvelopeWriter {
 public:
  explicit EnvelopeWriter(std::string_view type);
  EnvelopeWriter& Str(std::string_view key, std::string_view value);
  EnvelopeWriter& Int(std::string_view key, int64_t value);
  EnvelopeWriter& Bool(std::string_view key, bool value);
  EnvelopeWriter& Null(std::string_view key);
  std::string Finish();

 private:
  void Key(std::string_view key);
  std::string out_;
};

// Strict parse of an envelope, then the per-type required fields
// (docs/PROTOCOL.md): started{session,unit,invocation,revision,source},
// exit{code,signal}, error{code,message}, notice{code}.
ErrorCode ParseEnvelope(std::string_view json, Envelope* out);

}  // namespace opencode
