// Envelope JSON: writer for the supervisor, strict reader for everyone else.
// Invariant: the reader accepts one flat object of scalar values, at most
// kMaxEnvelopeBytes, every string valid UTF-8 after unescaping, no duplicate
// key, nothing after the closing brace; then it checks the per-type fields.
#include "common/envelope.h"

#include <cstdio>
#include <limits>

#include "common/limits.h"
#include "common/utf8.h"

namespace opencode {
namespace {

void AppendQuoted(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  ErrorCode ParseObject(Envelope* env) {
    SkipWs();
    if (!Eat('{')) return ErrorCode::kBadJson;
    SkipWs();
    bool first = true;
    bool have_type = false;
    while (!Eat('}')) {
      if (!first && !Eat(',')) return ErrorCode::kBadJson;
      SkipWs();
      std::string key;
      if (!ParseString(&key)) return ErrorCode::kBadJson;
      SkipWs();
      if (!Eat(':')) return ErrorCode::kBadJson;
      SkipWs();
      JsonValue value;
      if (!ParseValue(&value)) return ErrorCode::kBadJson;
      if (key == "type") {
        if (have_type) return ErrorCode::kBadJson;
        auto* t = std::get_if<std::string>(&value);
        if (t == nullptr) return ErrorCode::kBadField;
        env->type = *t;
        have_type = true;
      } else if (!env->fields.emplace(std::move(key), std::move(value)).second) {
        return ErrorCode::kBadJson;  // duplicate key
      }
      SkipWs();
      first = false;
    }
    SkipWs();
    if (pos_ != s_.size()) return ErrorCode::kBadJson;  // trailing bytes
    return have_type ? ErrorCode::kOk : ErrorCode::kMissingField;
  }

 private:
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  void SkipWs() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }
  bool ParseValue(JsonValue* v) {
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '"') { std::string str; if (!ParseString(&str)) return false; *v = std::move(str); return true; }
    if (c == 't') { *v = true; return Literal("true"); }
    if (c == 'f') { *v = false; return Literal("false"); }
    if (c == 'n') { *v = nullptr; return Literal("null"); }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseInt(v);
    return false;  // objects, arrays and floats are not part of an envelope
  }
  bool ParseInt(JsonValue* v) {
    bool neg = Eat('-');
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return false;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      return false;  // leading zero
    uint64_t mag = 0;
    const uint64_t limit = neg ? uint64_t(std::numeric_limits<int64_t>::max()) + 1
                               : uint64_t(std::numeric_limits<int64_t>::max());
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      uint64_t d = uint64_t(s_[pos_++] - '0');
      if (mag > (limit - d) / 10) return false;  // overflow
      mag = mag * 10 + d;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) return false;
    *v = neg ? int64_t(0 - mag) : int64_t(mag);
    return true;
  }
  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool Hex4(uint32_t* out) {
    if (s_.size() - pos_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = Hex(s_[pos_ + i]);
      if (h < 0) return false;
      v = (v << 4) | uint32_t(h);
    }
    pos_ += 4;
    *out = v;
    return true;
  }
  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) { out->push_back(char(cp)); }
    else if (cp < 0x800) { out->push_back(char(0xC0 | (cp >> 6))); out->push_back(char(0x80 | (cp & 63))); }
    else if (cp < 0x10000) {
      out->push_back(char(0xE0 | (cp >> 12))); out->push_back(char(0x80 | ((cp >> 6) & 63)));
      out->push_back(char(0x80 | (cp & 63)));
    } else {
      out->push_back(char(0xF0 | (cp >> 18))); out->push_back(char(0x80 | ((cp >> 12) & 63)));
      out->push_back(char(0x80 | ((cp >> 6) & 63))); out->push_back(char(0x80 | (cp & 63)));
    }
  }
  bool ParseString(std::string* out) {
    if (!Eat('"')) return false;
    while (pos_ < s_.size()) {
      unsigned char c = s_[pos_++];
      if (c == '"') {
        return IsValidUtf8(std::span<const uint8_t>(
            reinterpret_cast<const uint8_t*>(out->data()), out->size()));
      }
      if (c < 0x20) return false;  // raw control characters must be escaped
      if (c != '\\') { out->push_back(char(c)); continue; }
      if (pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // lone low surrogate
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (!Literal("\\u") || !Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default: return false;
      }
    }
    return false;  // unterminated
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool IsHex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Per-type required fields. A value of the wrong JSON type is kBadField.
ErrorCode CheckFields(const Envelope& env) {
  auto str = [&env](const char* k, const std::string** v) -> ErrorCode {
    auto it = env.fields.find(k);
    if (it == env.fields.end()) return ErrorCode::kMissingField;
    *v = std::get_if<std::string>(&it->second);
    return *v ? ErrorCode::kOk : ErrorCode::kBadField;
  };
  // A non-negative integer (cursors, counts, times).
  auto count = [&env](const char* k) -> ErrorCode {
    auto it = env.fields.find(k);
    if (it == env.fields.end()) return ErrorCode::kMissingField;
    const int64_t* n = std::get_if<int64_t>(&it->second);
    return n && *n >= 0 ? ErrorCode::kOk : ErrorCode::kBadField;
  };
  auto session_unit = [&]() -> ErrorCode {
    const std::string* id = nullptr;
    const std::string* unit = nullptr;
    ErrorCode e;
    if ((e = str("session", &id)) != ErrorCode::kOk) return e;
    if ((e = str("unit", &unit)) != ErrorCode::kOk) return e;
    if (!IsHex(*id, 32) || *unit != "opencode-pty-" + *id + ".service") return ErrorCode::kBadField;
    return ErrorCode::kOk;
  };
  const std::string* v = nullptr;
  ErrorCode e;
  // docs/PROTOCOL.md section 10.4.
  // A key that must be present: an integer of at least 1, or null (pid, code).
  auto int_or_null = [&env](const char* k) -> ErrorCode {
    auto it = env.fields.find(k);
    if (it == env.fields.end()) return ErrorCode::kMissingField;
    if (std::holds_alternative<std::nullptr_t>(it->second)) return ErrorCode::kOk;
    const int64_t* n = std::get_if<int64_t>(&it->second);
    return n && *n >= 0 ? ErrorCode::kOk : ErrorCode::kBadField;
  };
  if (env.type == "attached") {
    if ((e = session_unit()) != ErrorCode::kOk) return e;
    struct { const char* key; size_t hex; } want[] = {{"invocation", 32}, {"revision", 40}, {"source", 64}};
    for (auto& w : want) {
      if ((e = str(w.key, &v)) != ErrorCode::kOk) return e;
      if (!IsHex(*v, w.hex)) return ErrorCode::kBadField;
    }
    for (const char* k : {"cursor", "dropped", "next"})
      if ((e = count(k)) != ErrorCode::kOk) return e;
    return int_or_null("pid");
  }
  if (env.type == "session") {
    if ((e = session_unit()) != ErrorCode::kOk) return e;
    if ((e = str("state", &v)) != ErrorCode::kOk) return e;
    if (*v != "attached" && *v != "detached") return ErrorCode::kBadField;
    for (const char* k : {"started", "grace", "scrollback", "first", "next"})
      if ((e = count(k)) != ErrorCode::kOk) return e;
    auto exited = env.fields.find("exited");
    if (exited == env.fields.end()) return ErrorCode::kMissingField;
    if (!std::holds_alternative<bool>(exited->second)) return ErrorCode::kBadField;
    if ((e = int_or_null("code")) != ErrorCode::kOk || (e = int_or_null("pid")) != ErrorCode::kOk) return e;
    auto sig = env.fields.find("signal");
    if (sig == env.fields.end()) return ErrorCode::kMissingField;
    bool sig_ok = std::holds_alternative<std::nullptr_t>(sig->second) ||
                  std::holds_alternative<std::string>(sig->second);
    return sig_ok ? ErrorCode::kOk : ErrorCode::kBadField;
  }
  if (env.type == "listed") return count("count");
  if (env.type == "started") {
    struct { const char* key; size_t hex; } want[] = {
        {"session", 32}, {"unit", 0}, {"invocation", 32}, {"revision", 40}, {"source", 64}};
    for (auto& w : want) {
      if ((e = str(w.key, &v)) != ErrorCode::kOk) return e;
      if (w.hex && !IsHex(*v, w.hex)) return ErrorCode::kBadField;
    }
    str("unit", &v);
    const std::string& session = std::get<std::string>(env.fields.at("session"));
    if (*v != "opencode-pty-" + session + ".service") return ErrorCode::kBadField;
    return ErrorCode::kOk;
  }
  if (env.type == "exit") {
    auto code = env.fields.find("code");
    auto sig = env.fields.find("signal");
    if (code == env.fields.end() || sig == env.fields.end()) return ErrorCode::kMissingField;
    bool code_int = std::holds_alternative<int64_t>(code->second);
    bool code_null = std::holds_alternative<std::nullptr_t>(code->second);
    bool sig_str = std::holds_alternative<std::string>(sig->second);
    bool sig_null = std::holds_alternative<std::nullptr_t>(sig->second);
    if (!(code_int || code_null) || !(sig_str || sig_null)) return ErrorCode::kBadField;
    if (code_int == sig_str) return ErrorCode::kBadField;  // exactly one of them is set
    if (code_int) {
      int64_t c = std::get<int64_t>(code->second);
      if (c < 0 || c > 255) return ErrorCode::kBadField;
    }
    return ErrorCode::kOk;
  }
  if (env.type == "error") {
    if ((e = str("code", &v)) != ErrorCode::kOk) return e;
    if (v->empty()) return ErrorCode::kBadField;
    return str("message", &v);
  }
  if (env.type == "notice") {
    if ((e = str("code", &v)) != ErrorCode::kOk) return e;
    return v->empty() ? ErrorCode::kBadField : ErrorCode::kOk;
  }
  return ErrorCode::kBadField;  // unknown envelope type
}

}  // namespace

EnvelopeWriter::EnvelopeWriter(std::string_view type) {
  out_ = "{\"type\":";
  AppendQuoted(type, &out_);
}

void EnvelopeWriter::Key(std::string_view key) {
  out_.push_back(',');
  AppendQuoted(key, &out_);
  out_.push_back(':');
}

EnvelopeWriter& EnvelopeWriter::Str(std::string_view key, std::string_view value) {
  Key(key);
  AppendQuoted(value, &out_);
  return *this;
}

EnvelopeWriter& EnvelopeWriter::Int(std::string_view key, int64_t value) {
  Key(key);
  out_.append(std::to_string(value));
  return *this;
}

EnvelopeWriter& EnvelopeWriter::Bool(std::string_view key, bool value) {
  Key(key);
  out_.append(value ? "true" : "false");
  return *this;
}

EnvelopeWriter& EnvelopeWriter::Null(std::string_view key) {
  Key(key);
  out_.append("null");
  return *this;
}

std::string EnvelopeWriter::Finish() {
  out_.push_back('}');
  return std::move(out_);
}

ErrorCode ParseEnvelope(std::string_view json, Envelope* out) {
  *out = Envelope{};
  if (json.size() > limits::kMaxEnvelopeBytes) return ErrorCode::kFrameTooLarge;
  Envelope env;
  ErrorCode e = Reader(json).ParseObject(&env);
  if (e != ErrorCode::kOk) return e;
  e = CheckFields(env);
  if (e != ErrorCode::kOk) return e;
  *out = std::move(env);
  return ErrorCode::kOk;
}

}  // namespace opencode
