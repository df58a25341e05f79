// The launcher's argument codec: one argv element = 'a' + URL-safe unpadded
// base64 (RFC 4648 section 5) of its bytes. Invariant: exactly one encoding is
// accepted for each byte string (canonical form), so what the supervisor put in
// ExecStart= is the only thing the launcher will run.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/errors.h"

namespace opencode {

// Encoded length ('a' prefix included) of `n` raw bytes.
constexpr size_t EncodedArgLength(size_t n) { return 1 + (n / 3) * 4 + (n % 3 == 0 ? 0 : n % 3 + 1); }

// Appends 'a' + base64url(raw) to `out`.
void EncodeArg(std::string_view raw, std::string* out);

// Decodes one canonical argument into `out` (cleared first). Rejects: missing
// 'a' prefix, characters outside [A-Za-z0-9_-] (so '=' padding too), encoded
// length = 1 mod 4, and non-zero trailing bits.
ErrorCode DecodeArg(std::string_view encoded, std::string* out);

}  // namespace opencode
