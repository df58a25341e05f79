// Strict UTF-8 (RFC 3629, Table 3-7 of Unicode): the second byte's range
// depends on the lead byte, which is what rejects overlongs, surrogates and
// values above U+10FFFF without decoding to a code point.
#include "common/utf8.h"

namespace opencode {

bool IsValidUtf8(std::span<const uint8_t> s) noexcept {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) { len = 2; }
    else if (c == 0xE0) { len = 3; lo = 0xA0; }          // no overlong
    else if (c >= 0xE1 && c <= 0xEC) { len = 3; }
    else if (c == 0xED) { len = 3; hi = 0x9F; }          // no surrogates
    else if (c >= 0xEE && c <= 0xEF) { len = 3; }
    else if (c == 0xF0) { len = 4; lo = 0x90; }          // no overlong
    else if (c >= 0xF1 && c <= 0xF3) { len = 4; }
    else if (c == 0xF4) { len = 4; hi = 0x8F; }          // <= U+10FFFF
    else return false;                                    // 80..C1, F5..FF
    if (n - i < len) return false;                        // truncated
    if (s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

}  // namespace opencode
