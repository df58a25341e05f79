// Strict UTF-8 validation of INPUT payloads.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace opencode {
namespace {

bool Valid(std::string_view s) {
  return IsValidUtf8({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

TEST(Utf8, AcceptsValid) {
  EXPECT_TRUE(Valid(""));
  EXPECT_TRUE(Valid("plain ascii\n\t"));
  EXPECT_TRUE(Valid(std::string("\0", 1)));             // U+0000 is a scalar value
  EXPECT_TRUE(Valid("\xc2\x80"));                       // U+0080
  EXPECT_TRUE(Valid("\xdf\xbf"));                       // U+07FF
  EXPECT_TRUE(Valid("\xe0\xa0\x80"));                   // U+0800
  EXPECT_TRUE(Valid("\xed\x9f\xbf"));                   // U+D7FF
  EXPECT_TRUE(Valid("\xee\x80\x80"));                   // U+E000
  EXPECT_TRUE(Valid("\xef\xbf\xbf"));                   // U+FFFF
  EXPECT_TRUE(Valid("\xf0\x90\x80\x80"));               // U+10000
  EXPECT_TRUE(Valid("\xf4\x8f\xbf\xbf"));               // U+10FFFF
  EXPECT_TRUE(Valid("h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80"));
}

class Utf8Malformed : public ::testing::TestWithParam<const char*> {};
TEST_P(Utf8Malformed, Rejected) { EXPECT_FALSE(Valid(GetParam())); }

INSTANTIATE_TEST_SUITE_P(All, Utf8Malformed, ::testing::Values(
    "\x80",                  // lone continuation
    "\xbf",
    "a\xc0\x80",             // overlong NUL
    "\xc1\xbf",              // overlong U+007F
    "\xe0\x80\x80",          // overlong 3-byte
    "\xe0\x9f\xbf",          // overlong U+07FF
    "\xf0\x80\x80\x80",      // overlong 4-byte
    "\xf0\x8f\xbf\xbf",      // overlong U+FFFF
    "\xed\xa0\x80",          // U+D800 surrogate
    "\xed\xbf\xbf",          // U+DFFF surrogate
    "\xf4\x90\x80\x80",      // U+110000
    "\xf5\x80\x80\x80",      // lead byte F5
    "\xff",
    "\xfe",
    "\xc3",                  // truncated 2-byte
    "\xe2\x82",              // truncated 3-byte
    "\xf0\x9f\x98",          // truncated 4-byte
    "\xc3\x28",              // bad continuation
    "\xe2\x28\xa1",
    "\xf0\x9f\x28\x80",
    "ok\xe2\x82"             // truncated at the very end after valid text
));

TEST(Utf8, ExhaustiveTwoAndThreeByteAgreeWithDecoder) {
  // Independent reference: decode by arithmetic and compare with the table
  // driven validator for every 1..3-byte sequence with a valid-looking lead.
  for (int a = 0xC0; a <= 0xEF; ++a) {
    for (int b = 0x00; b <= 0xFF; ++b) {
      for (int c = (a < 0xE0 ? 0 : 0x00); c <= (a < 0xE0 ? 0 : 0xFF); ++c) {
        std::string s;
        s.push_back(char(a));
        s.push_back(char(b));
        if (a >= 0xE0) s.push_back(char(c));
        bool cont_ok = (b & 0xC0) == 0x80 && (a < 0xE0 || (c & 0xC0) == 0x80);
        bool ref = false;
        if (cont_ok) {
          uint32_t cp = a < 0xE0 ? ((a & 0x1F) << 6) | (b & 0x3F)
                                 : ((a & 0x0F) << 12) | ((b & 0x3F) << 6) | (c & 0x3F);
          uint32_t min = a < 0xE0 ? 0x80 : 0x800;
          ref = cp >= min && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        ASSERT_EQ(Valid(s), ref) << std::hex << a << " " << b << " " << c;
      }
    }
  }
}

}  // namespace
}  // namespace opencode
