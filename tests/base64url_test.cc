// The launcher argument codec: round trips, and every non-canonical form.
#include "common/base64url.h"

#include <gtest/gtest.h>

#include <random>

namespace opencode {
namespace {

std::string Enc(std::string_view raw) {
  std::string out;
  EncodeArg(raw, &out);
  return out;
}

TEST(Base64Url, KnownVectors) {
  // RFC 4648 section 10 vectors, URL-safe alphabet, no padding, 'a' prefix.
  EXPECT_EQ(Enc(""), "a");
  EXPECT_EQ(Enc("f"), "aZg");
  EXPECT_EQ(Enc("fo"), "aZm8");
  EXPECT_EQ(Enc("foo"), "aZm9v");
  EXPECT_EQ(Enc("foob"), "aZm9vYg");
  EXPECT_EQ(Enc("fooba"), "aZm9vYmE");
  EXPECT_EQ(Enc("foobar"), "aZm9vYmFy");
  EXPECT_EQ(Enc("\xfb\xff"), "a-_8");  // uses both URL-safe characters
}

TEST(Base64Url, EncodedLengthMatches) {
  for (size_t n = 0; n < 100; ++n)
    EXPECT_EQ(Enc(std::string(n, 'x')).size(), EncodedArgLength(n)) << n;
}

TEST(Base64Url, DecodesWhatItEncodes) {
  std::string out;
  for (const std::string& s : std::vector<std::string>{"", "a", "-rf", "$(rm -rf /)", "two words", "\n", std::string("\0\1\xff", 3)}) {
    ASSERT_EQ(DecodeArg(Enc(s), &out), ErrorCode::kOk) << s;
    EXPECT_EQ(out, s);
  }
}

TEST(Base64Url, RandomizedRoundTrip100k) {
  std::mt19937_64 rng(0x0c0de5eedULL);  // fixed seed: reproducible
  std::uniform_int_distribution<int> len(0, 64), byte(0, 255);
  std::string raw, enc, dec;
  for (int i = 0; i < 100000; ++i) {
    raw.resize(len(rng));
    for (auto& c : raw) c = char(byte(rng));
    enc.clear();
    EncodeArg(raw, &enc);
    ASSERT_EQ(DecodeArg(enc, &dec), ErrorCode::kOk) << i;
    ASSERT_EQ(dec, raw) << i;
  }
}

struct Bad { const char* input; ErrorCode want; };

class Base64UrlMalformed : public ::testing::TestWithParam<Bad> {};

TEST_P(Base64UrlMalformed, Rejected) {
  std::string out = "stale";
  EXPECT_EQ(DecodeArg(GetParam().input, &out), GetParam().want) << GetParam().input;
  EXPECT_TRUE(out.empty());
}

INSTANTIATE_TEST_SUITE_P(All, Base64UrlMalformed, ::testing::Values(
    Bad{"", ErrorCode::kBadPrefix},
    Bad{"Zm9v", ErrorCode::kBadPrefix},          // missing prefix
    Bad{"AZm9v", ErrorCode::kBadPrefix},         // wrong-case prefix
    Bad{"aZm9v=", ErrorCode::kBadAlphabet},      // padding
    Bad{"aZg==", ErrorCode::kBadAlphabet},       // full padding
    Bad{"aZm+v", ErrorCode::kBadAlphabet},       // standard alphabet '+'
    Bad{"aZm/v", ErrorCode::kBadAlphabet},       // standard alphabet '/'
    Bad{"aZm9 v", ErrorCode::kBadAlphabet},      // space
    Bad{"aZm9\nv", ErrorCode::kBadAlphabet},     // newline
    Bad{"aZm9.", ErrorCode::kBadAlphabet},
    Bad{"aZ$9v", ErrorCode::kBadAlphabet},
    Bad{"a\xc3\xa9", ErrorCode::kBadAlphabet},   // non-ASCII
    Bad{"aZ", ErrorCode::kBadLength},            // 1 mod 4
    Bad{"aZm9vY", ErrorCode::kBadLength},        // 5 chars: 1 mod 4
    Bad{"aZm9vYmFyZ", ErrorCode::kBadLength},
    Bad{"aZh", ErrorCode::kNonCanonical},        // 'h' leaves trailing bits set ("f" is aZg)
    Bad{"aZm9", ErrorCode::kNonCanonical},       // "fo" is aZm8: '9' sets unused bits
    Bad{"aZm_", ErrorCode::kNonCanonical},       // "fo" is aZm8: low 2 bits of '_' set
    Bad{"aZm9vYh", ErrorCode::kNonCanonical},
    Bad{"a_-", ErrorCode::kNonCanonical},
    Bad{"aAAA\\", ErrorCode::kBadAlphabet},     // backslash
    Bad{"a\t", ErrorCode::kBadAlphabet}
));

}  // namespace
}  // namespace opencode
