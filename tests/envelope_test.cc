// JSON envelopes: writer output parses back; the strict reader rejects every
// malformed or incomplete envelope with a stable code.
#include "common/envelope.h"

#include <gtest/gtest.h>

#include <random>

#include "common/limits.h"

namespace opencode {
namespace {

const std::string kHex32(32, 'a');

TEST(Envelope, WriterRoundTrip) {
  std::string json = EnvelopeWriter("started")
                         .Str("session", kHex32)
                         .Str("unit", "opencode-pty-" + kHex32 + ".service")
                         .Str("invocation", std::string(32, '0'))
                         .Str("revision", std::string(40, 'f'))
                         .Str("source", std::string(64, '1'))
                         .Finish();
  Envelope env;
  ASSERT_EQ(ParseEnvelope(json, &env), ErrorCode::kOk) << json;
  EXPECT_EQ(env.type, "started");
  EXPECT_EQ(std::get<std::string>(env.fields["session"]), kHex32);
}

TEST(Envelope, ExitForms) {
  Envelope env;
  EXPECT_EQ(ParseEnvelope(EnvelopeWriter("exit").Int("code", 0).Null("signal").Str("result", "success").Finish(), &env), ErrorCode::kOk);
  EXPECT_EQ(ParseEnvelope(EnvelopeWriter("exit").Null("code").Str("signal", "KILL").Finish(), &env), ErrorCode::kOk);
  EXPECT_EQ(ParseEnvelope(R"({"type":"exit","code":255,"signal":null})", &env), ErrorCode::kOk);
}

TEST(Envelope, EscapesSurvive) {
  std::string msg = std::string("quote\" back\\ nl\n tab\t ctl\x01 ") + "\xc3\xa9";
  Envelope env;
  ASSERT_EQ(ParseEnvelope(EnvelopeWriter("error").Str("code", "internal").Str("message", msg).Finish(), &env), ErrorCode::kOk);
  EXPECT_EQ(std::get<std::string>(env.fields["message"]), msg);
  ASSERT_EQ(ParseEnvelope(R"({"type":"notice","code":"x\u00e9\ud83d\ude00\/"})", &env), ErrorCode::kOk);
  EXPECT_EQ(std::get<std::string>(env.fields["code"]), "x\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST(Envelope, UnknownKeysAreKept) {
  Envelope env;
  ASSERT_EQ(ParseEnvelope(R"( { "type" : "notice" , "code" : "signal_sent", "signal":"INT", "n": -5, "b": true } )", &env), ErrorCode::kOk);
  EXPECT_EQ(std::get<int64_t>(env.fields["n"]), -5);
  EXPECT_EQ(std::get<bool>(env.fields["b"]), true);
}

TEST(Envelope, RandomizedWriterRoundTrip) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> byte(0, 127), len(0, 40);
  for (int i = 0; i < 20000; ++i) {
    std::string s(len(rng), ' ');
    for (auto& c : s) c = char(byte(rng));
    int64_t n = int64_t(rng());
    std::string json = EnvelopeWriter("notice").Str("code", "x" + s).Int("n", n).Finish();
    Envelope env;
    ASSERT_EQ(ParseEnvelope(json, &env), ErrorCode::kOk) << json;
    ASSERT_EQ(std::get<std::string>(env.fields["code"]), "x" + s);
    ASSERT_EQ(std::get<int64_t>(env.fields["n"]), n);
  }
}

// The envelopes of docs/PROTOCOL.md section 10.4, as the supervisor writes them.
TEST(Envelope, DetachableSessionEnvelopes) {
  const char* good[] = {
      R"({"type":"attached","session":"%A%","unit":"opencode-pty-%A%.service",%IDS%,"cursor":5,"dropped":0,"next":11,"pid":12345})",
      R"({"type":"attached","session":"%A%","unit":"opencode-pty-%A%.service",%IDS%,"cursor":0,"dropped":0,"next":0,"pid":null})",
      R"({"type":"session","session":"%A%","unit":"opencode-pty-%A%.service","state":"attached","started":1,"grace":1,"scrollback":65536,"first":0,"next":0,"exited":false,"code":null,"signal":null,"pid":null})",
      R"({"type":"session","session":"%A%","unit":"opencode-pty-%A%.service","state":"detached","started":1,"grace":3600,"scrollback":2097152,"first":7,"next":9,"exited":true,"code":null,"signal":"TERM","pid":99})",
      R"({"type":"listed","count":0})",
  };
  for (std::string json : good) {
    size_t at;
    while ((at = json.find("%A%")) != std::string::npos) json.replace(at, 3, std::string(32, 'a'));
    if ((at = json.find("%IDS%")) != std::string::npos)
      json.replace(at, 5, R"("invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111")");
    Envelope env;
    EXPECT_EQ(ParseEnvelope(json, &env), ErrorCode::kOk) << json;
  }
}

struct Bad { const char* name; std::string json; ErrorCode want; };
class EnvelopeMalformed : public ::testing::TestWithParam<Bad> {};

TEST_P(EnvelopeMalformed, Rejected) {
  Envelope env;
  EXPECT_EQ(ParseEnvelope(GetParam().json, &env), GetParam().want) << GetParam().name;
  EXPECT_TRUE(env.type.empty());
}

INSTANTIATE_TEST_SUITE_P(All, EnvelopeMalformed, ::testing::Values(
    Bad{"empty", "", ErrorCode::kBadJson},
    Bad{"array", "[]", ErrorCode::kBadJson},
    Bad{"unterminated", R"({"type":"notice","code":"x")", ErrorCode::kBadJson},
    Bad{"trailing", R"({"type":"notice","code":"x"}x)", ErrorCode::kBadJson},
    Bad{"two_objects", R"({"type":"notice","code":"x"}{})", ErrorCode::kBadJson},
    Bad{"trailing_comma", R"({"type":"notice","code":"x",})", ErrorCode::kBadJson},
    Bad{"nested_object", R"({"type":"notice","code":"x","o":{}})", ErrorCode::kBadJson},
    Bad{"nested_array", R"({"type":"notice","code":"x","a":[1]})", ErrorCode::kBadJson},
    Bad{"float", R"({"type":"exit","code":1.5,"signal":null})", ErrorCode::kBadJson},
    Bad{"exponent", R"({"type":"exit","code":1e2,"signal":null})", ErrorCode::kBadJson},
    Bad{"leading_zero", R"({"type":"exit","code":01,"signal":null})", ErrorCode::kBadJson},
    Bad{"int_overflow", R"({"type":"notice","code":"x","n":9223372036854775808})", ErrorCode::kBadJson},
    Bad{"duplicate_key", R"({"type":"notice","code":"x","code":"y"})", ErrorCode::kBadJson},
    Bad{"duplicate_type", R"({"type":"notice","type":"notice","code":"y"})", ErrorCode::kBadJson},
    Bad{"single_quotes", R"({'type':'notice'})", ErrorCode::kBadJson},
    Bad{"bare_word", R"({"type":notice})", ErrorCode::kBadJson},
    Bad{"raw_newline", "{\"type\":\"notice\",\"code\":\"a\nb\"}", ErrorCode::kBadJson},
    Bad{"bad_escape", R"({"type":"notice","code":"\x"})", ErrorCode::kBadJson},
    Bad{"lone_surrogate", R"({"type":"notice","code":"\ud800"})", ErrorCode::kBadJson},
    Bad{"lone_low_surrogate", R"({"type":"notice","code":"\udc00"})", ErrorCode::kBadJson},
    Bad{"invalid_utf8", "{\"type\":\"notice\",\"code\":\"\xc0\x80\"}", ErrorCode::kBadJson},
    Bad{"missing_type", R"({"code":"x"})", ErrorCode::kMissingField},
    Bad{"type_not_string", R"({"type":1})", ErrorCode::kBadField},
    Bad{"unknown_type", R"({"type":"hello"})", ErrorCode::kBadField},
    Bad{"notice_no_code", R"({"type":"notice"})", ErrorCode::kMissingField},
    Bad{"notice_empty_code", R"({"type":"notice","code":""})", ErrorCode::kBadField},
    Bad{"error_no_message", R"({"type":"error","code":"internal"})", ErrorCode::kMissingField},
    Bad{"error_code_int", R"({"type":"error","code":1,"message":"m"})", ErrorCode::kBadField},
    Bad{"exit_no_signal", R"({"type":"exit","code":0})", ErrorCode::kMissingField},
    Bad{"exit_both_null", R"({"type":"exit","code":null,"signal":null})", ErrorCode::kBadField},
    Bad{"exit_both_set", R"({"type":"exit","code":1,"signal":"INT"})", ErrorCode::kBadField},
    Bad{"exit_code_range", R"({"type":"exit","code":256,"signal":null})", ErrorCode::kBadField},
    Bad{"exit_code_negative", R"({"type":"exit","code":-1,"signal":null})", ErrorCode::kBadField},
    Bad{"started_short_session", R"({"type":"started","session":"ab","unit":"opencode-pty-ab.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111"})", ErrorCode::kBadField},
    Bad{"started_unit_mismatch", R"({"type":"started","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"other.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111"})", ErrorCode::kBadField},
    Bad{"started_missing_source", R"({"type":"started","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff"})", ErrorCode::kMissingField},
    Bad{"started_upper_hex", R"({"type":"started","session":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","unit":"opencode-pty-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111"})", ErrorCode::kBadField},
    Bad{"attached_no_cursor", R"({"type":"attached","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111","dropped":0,"next":5,"pid":null})", ErrorCode::kMissingField},
    Bad{"attached_negative_dropped", R"({"type":"attached","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111","cursor":0,"dropped":-1,"next":5,"pid":null})", ErrorCode::kBadField},
    Bad{"attached_no_invocation", R"({"type":"attached","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111","cursor":0,"dropped":0,"next":5,"pid":null})", ErrorCode::kMissingField},
    Bad{"attached_no_pid", R"({"type":"attached","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111","cursor":0,"dropped":0,"next":5})", ErrorCode::kMissingField},
    Bad{"attached_unit_mismatch", R"({"type":"attached","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"x.service","invocation":"00000000000000000000000000000000","revision":"ffffffffffffffffffffffffffffffffffffffff","source":"1111111111111111111111111111111111111111111111111111111111111111","cursor":0,"dropped":0,"next":5,"pid":null})", ErrorCode::kBadField},
    Bad{"session_bad_state", R"({"type":"session","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","state":"gone","started":1,"grace":60,"scrollback":65536,"first":0,"next":5,"exited":false,"code":null,"signal":null,"pid":null})", ErrorCode::kBadField},
    Bad{"session_exited_not_bool", R"({"type":"session","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","state":"detached","started":1,"grace":60,"scrollback":65536,"first":0,"next":5,"exited":1,"code":null,"signal":null,"pid":null})", ErrorCode::kBadField},
    Bad{"session_no_signal", R"({"type":"session","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","state":"detached","started":1,"grace":60,"scrollback":65536,"first":0,"next":5,"exited":false,"code":null,"pid":null})", ErrorCode::kMissingField},
    Bad{"session_string_pid", R"({"type":"session","session":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","unit":"opencode-pty-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.service","state":"detached","started":1,"grace":60,"scrollback":65536,"first":0,"next":5,"exited":false,"code":null,"signal":null,"pid":"1"})", ErrorCode::kBadField},
    Bad{"listed_negative", R"({"type":"listed","count":-1})", ErrorCode::kBadField},
    Bad{"listed_no_count", R"({"type":"listed"})", ErrorCode::kMissingField},
    Bad{"oversize", "{\"type\":\"notice\",\"code\":\"" + std::string(limits::kMaxEnvelopeBytes, 'x') + "\"}", ErrorCode::kFrameTooLarge}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace opencode
