// Fuzzes IsValidUtf8 (common/utf8.cc), which guards every INPUT frame.
// Invariant: it agrees with the reference below on the whole input and on a
// fuzz-chosen prefix (a sequence cut by the end is invalid). The reference is
// written differently on purpose: it decodes each sequence to a code point
// from the bit patterns of RFC 3629 section 3 and then rejects overlong forms,
// surrogates and values above U+10FFFF, where common/utf8.cc never computes a
// code point but narrows the second byte's range per lead byte.
#include <cstdint>
#include <span>
#include <vector>

#include "common/utf8.h"
#include "fuzz/fuzz_check.h"

namespace {

bool ReferenceValid(std::span<const uint8_t> s) {
  size_t i = 0;
  while (i < s.size()) {
    uint8_t b = s[i];
    size_t len;
    uint32_t cp;
    if ((b & 0x80) == 0x00) { len = 1; cp = b; }
    else if ((b & 0xE0) == 0xC0) { len = 2; cp = b & 0x1F; }
    else if ((b & 0xF0) == 0xE0) { len = 3; cp = b & 0x0F; }
    else if ((b & 0xF8) == 0xF0) { len = 4; cp = b & 0x07; }
    else return false;  // continuation byte or F8..FF as a lead
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len]) return false;          // overlong
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;     // surrogate
    if (cp > 0x10FFFF) return false;                    // beyond Unicode
    i += len;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> all(data, size);
  FUZZ_CHECK(opencode::IsValidUtf8(all) == ReferenceValid(all));
  if (size > 0) {
    // An exact-size copy of a prefix: a read past a cut sequence is caught.
    std::vector<uint8_t> prefix(data, data + data[0] % size);
    FUZZ_CHECK(opencode::IsValidUtf8(prefix) == ReferenceValid(prefix));
  }
  return 0;
}
