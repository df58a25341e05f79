// 'a' + unpadded URL-safe base64. Invariant: DecodeArg accepts exactly the
// strings EncodeArg produces, so every byte string has one accepted spelling.
#include "common/base64url.h"

#include <cstdint>

namespace opencode {
namespace {

constexpr char kAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// Value of an alphabet character, or -1.
int Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

void EncodeArg(std::string_view raw, std::string* out) {
  out->reserve(out->size() + EncodedArgLength(raw.size()));
  out->push_back('a');
  size_t i = 0;
  for (; i + 3 <= raw.size(); i += 3) {
    uint32_t v = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8) | uint8_t(raw[i + 2]);
    out->push_back(kAlphabet[(v >> 18) & 63]);
    out->push_back(kAlphabet[(v >> 12) & 63]);
    out->push_back(kAlphabet[(v >> 6) & 63]);
    out->push_back(kAlphabet[v & 63]);
  }
  size_t rest = raw.size() - i;
  if (rest == 1) {
    uint32_t v = uint8_t(raw[i]) << 16;
    out->push_back(kAlphabet[(v >> 18) & 63]);
    out->push_back(kAlphabet[(v >> 12) & 63]);
  } else if (rest == 2) {
    uint32_t v = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8);
    out->push_back(kAlphabet[(v >> 18) & 63]);
    out->push_back(kAlphabet[(v >> 12) & 63]);
    out->push_back(kAlphabet[(v >> 6) & 63]);
  }
}

ErrorCode DecodeArg(std::string_view encoded, std::string* out) {
  out->clear();
  if (encoded.empty() || encoded[0] != 'a') return ErrorCode::kBadPrefix;
  std::string_view body = encoded.substr(1);
  for (unsigned char c : body)
    if (Value(c) < 0) return ErrorCode::kBadAlphabet;
  if (body.size() % 4 == 1) return ErrorCode::kBadLength;
  out->reserve(body.size() / 4 * 3 + 2);
  size_t i = 0;
  for (; i + 4 <= body.size(); i += 4) {
    uint32_t v = (Value(body[i]) << 18) | (Value(body[i + 1]) << 12) |
                 (Value(body[i + 2]) << 6) | Value(body[i + 3]);
    out->push_back(char(v >> 16));
    out->push_back(char((v >> 8) & 0xff));
    out->push_back(char(v & 0xff));
  }
  size_t rest = body.size() - i;
  if (rest == 2) {
    uint32_t v = (Value(body[i]) << 18) | (Value(body[i + 1]) << 12);
    if (v & 0xffff) { out->clear(); return ErrorCode::kNonCanonical; }
    out->push_back(char(v >> 16));
  } else if (rest == 3) {
    uint32_t v = (Value(body[i]) << 18) | (Value(body[i + 1]) << 12) | (Value(body[i + 2]) << 6);
    if (v & 0xff) { out->clear(); return ErrorCode::kNonCanonical; }
    out->push_back(char(v >> 16));
    out->push_back(char((v >> 8) & 0xff));
  }
  return ErrorCode::kOk;
}

}  // namespace opencode
