// The one spelling of a terminal dimension on a command line or in the
// launcher's environment (--cols/--rows of the client helper; COLUMNS/LINES
// carried to the launcher): "1".."max" in decimal, no sign, no leading zero,
// at most four digits. Header-only and allocation-free: both static helpers
// use it before they may allocate.
#pragma once

#include <cstdint>

namespace opencode {

// True and *out set if `s` is such a number not above `max` (<= 9999).
inline bool ParseDimension(const char* s, uint16_t max, uint16_t* out) {
  if (s[0] < '1' || s[0] > '9') return false;
  unsigned v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || p - s >= 4) return false;
    v = v * 10 + unsigned(*p - '0');
  }
  if (v > max) return false;
  *out = uint16_t(v);
  return true;
}

}  // namespace opencode
