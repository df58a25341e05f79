// Fuzzes the supervisor's D-Bus identity decoder (daemon/auth/identity.cc,
// daemon/systemd/bus_props.cc). sd-bus cannot parse a message from a buffer through
// its public API, so the fuzz bytes are a program (read by Program below):
// one byte choosing GetUnitByPIDFD's (o, s, ay) or the two GetAll replies;
// for each reply a body shape, then entries (a property name from a
// dictionary or any string, a variant type among 20, a value), appended to a
// message on a bus that is never connected, sealed and rewound; last the
// peer's facts for CheckIdentity. The harness keeps its own model of what it
// appended. Invariants: ReadPropertyMap returns exactly the model (every
// value with its exact type; a repeated name fails the reply), and with a
// set of wanted names exactly the model's wanted entries (a repeated wanted
// name fails it, other names may repeat); DecodeIdentity succeeds iff
// identity.h's rules hold on the model of the names it wants (each property from its
// exact interface with its exact type, InvocationID 16 bytes, no ControlGroup
// on Unit) and then returns the model's values; CheckIdentity accepts only a
// live, non-root MainPID of an active/running unit in its cgroup;
// DecodeUnitByPidfd agrees with its model.
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/auth/identity.h"
#include "daemon/systemd/bus_props.h"
#include "fuzz/fuzz_check.h"

namespace opencode::daemon {
namespace {

// The fuzz bytes, read front to back; past the end every read is 0, so every
// program terminates (all loops are bounded by a count read from it).
class Program {
 public:
  Program(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Bool() { return Byte() & 1; }
  size_t Pick(size_t count) { return Byte() % count; }  // 0..count-1
  template <typename T>
  T Int() {  // sizeof(T) bytes, big-endian
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v = (v << 8) | Byte();
    return static_cast<T>(v);
  }
  double Double() { return std::bit_cast<double>(Int<uint64_t>()); }
  std::vector<uint8_t> Take(size_t n) {
    std::vector<uint8_t> out;
    while (n-- > 0 && pos_ < size_) out.push_back(data_[pos_++]);
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// One bus for the whole process: messages can only be created on a bus in an
// "open" state, so it gets one end of a socketpair and starts (it sends its
// AUTH line into the socket, which nobody reads). It never carries a message.
sd_bus* TheBus() {
  static sd_bus* bus = [] {
    sd_bus* b = nullptr;
    int sv[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    FUZZ_CHECK(sd_bus_new(&b) >= 0);
    FUZZ_CHECK(sd_bus_set_fd(b, sv[0], sv[0]) >= 0);
    FUZZ_CHECK(sd_bus_start(b) >= 0);
    return b;  // sv[1] stays open so the AUTH write never fails
  }();
  return bus;
}

struct MessageUnref {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using Message = std::unique_ptr<sd_bus_message, MessageUnref>;

Message NewMessage() {
  sd_bus_message* m = nullptr;
  FUZZ_CHECK(sd_bus_message_new_method_call(TheBus(), &m, "org.freedesktop.systemd1", "/x",
                                            "org.freedesktop.DBus.Properties", "GetAll") >= 0);
  return Message(m);
}

// Seals and rewinds so the decoder reads it like a received reply.
bool Seal(sd_bus_message* m) {
  return sd_bus_message_seal(m, 1, 0) >= 0 && sd_bus_message_rewind(m, 1) >= 0;
}

constexpr const char* kNames[] = {"ActiveState", "SubState", "InvocationID", "MainPID",
                                  "ControlGroup", "Id", "ExecMainPID", "Job", "ExecStart"};
constexpr const char* kStates[] = {"active", "running", "inactive", "dead", "activating"};

// A unit state from the dictionary, or a length byte (mod 65) and that many
// bytes. sd-bus accepts valid UTF-8 only (else the append fails and the input
// is dropped); a NUL cuts the string, as C strings do.
std::string Str(Program& p) {
  if (p.Bool()) return kStates[p.Pick(std::size(kStates))];
  std::vector<uint8_t> b = p.Take(p.Pick(65));
  std::string s(b.begin(), b.end());
  return s.substr(0, s.find('\0'));
}

// A syntactically valid object path: "/" or "/seg/seg..." of [A-Za-z0-9_]:
// a segment count byte (mod 4), per segment a length byte (1 + mod 8) and a
// byte per character.
std::string Path(Program& p) {
  static constexpr char kChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
  std::string path;
  for (size_t seg = p.Pick(4); seg > 0; --seg) {
    path.push_back('/');
    for (size_t n = 1 + p.Pick(8); n > 0; --n) path.push_back(kChars[p.Pick(sizeof kChars - 1)]);
  }
  return path.empty() ? "/" : path;
}

// A flag byte (odd: 16 bytes, the InvocationID size), else a length byte
// (mod 41); then the bytes.
std::vector<uint8_t> Bytes(Program& p) {
  size_t n = p.Bool() ? 16 : p.Pick(41);
  return p.Take(n);
}

// Appends one variant chosen by the program to `m`; returns the value
// ReadPropertyMap must report, or nullopt if sd-bus refused the append.
std::optional<PropValue> AppendVariant(Program& p, sd_bus_message* m) {
  auto ok = [](int r) { return r >= 0; };
  switch (p.Pick(20)) {
    case 0: { bool v = p.Bool();
      if (!ok(sd_bus_message_append(m, "v", "b", int(v)))) return std::nullopt;
      return PropValue(v); }
    case 1: { int32_t v = p.Int<int32_t>();
      if (!ok(sd_bus_message_append(m, "v", "i", v))) return std::nullopt;
      return PropValue(v); }
    case 2: { uint32_t v = p.Int<uint32_t>();
      if (!ok(sd_bus_message_append(m, "v", "u", v))) return std::nullopt;
      return PropValue(v); }
    case 3: { int64_t v = p.Int<int64_t>();
      if (!ok(sd_bus_message_append(m, "v", "x", v))) return std::nullopt;
      return PropValue(v); }
    case 4: { uint64_t v = p.Int<uint64_t>();
      if (!ok(sd_bus_message_append(m, "v", "t", v))) return std::nullopt;
      return PropValue(v); }
    case 5: { std::string v = Str(p);
      if (!ok(sd_bus_message_append(m, "v", "s", v.c_str()))) return std::nullopt;
      return PropValue(v); }
    case 6: { std::string v = Path(p);
      if (!ok(sd_bus_message_append(m, "v", "o", v.c_str()))) return std::nullopt;
      return PropValue(ObjectPath{v}); }
    case 7: {
      std::vector<std::string> v;
      for (size_t n = p.Pick(5); n > 0; --n) v.push_back(Str(p));
      if (!ok(sd_bus_message_open_container(m, 'v', "as")) ||
          !ok(sd_bus_message_open_container(m, 'a', "s")))
        return std::nullopt;
      for (const auto& s : v)
        if (!ok(sd_bus_message_append_basic(m, 's', s.c_str()))) return std::nullopt;
      if (!ok(sd_bus_message_close_container(m)) || !ok(sd_bus_message_close_container(m)))
        return std::nullopt;
      return PropValue(std::move(v)); }
    case 8: { std::vector<uint8_t> v = Bytes(p);
      if (!ok(sd_bus_message_open_container(m, 'v', "ay")) ||
          !ok(sd_bus_message_append_array(m, 'y', v.data(), v.size())) ||
          !ok(sd_bus_message_close_container(m)))
        return std::nullopt;
      return PropValue(std::move(v)); }
    case 9: {
      std::vector<ExecCommand> v;
      if (!ok(sd_bus_message_open_container(m, 'v', "a(sasbttttuii)")) ||
          !ok(sd_bus_message_open_container(m, 'a', "(sasbttttuii)")))
        return std::nullopt;
      for (size_t n = p.Pick(4); n > 0; --n) {
        ExecCommand c;
        c.path = Str(p);
        for (size_t k = p.Pick(4); k > 0; --k) c.argv.push_back(Str(p));
        c.ignore_failure = p.Bool();
        if (!ok(sd_bus_message_open_container(m, 'r', "sasbttttuii")) ||
            !ok(sd_bus_message_append_basic(m, 's', c.path.c_str())) ||
            !ok(sd_bus_message_open_container(m, 'a', "s")))
          return std::nullopt;
        for (const auto& s : c.argv)
          if (!ok(sd_bus_message_append_basic(m, 's', s.c_str()))) return std::nullopt;
        if (!ok(sd_bus_message_close_container(m)) ||
            !ok(sd_bus_message_append(m, "bttttuii", int(c.ignore_failure),
                                      p.Int<uint64_t>(), p.Int<uint64_t>(),
                                      p.Int<uint64_t>(), p.Int<uint64_t>(),
                                      p.Int<uint32_t>(), p.Int<int32_t>(),
                                      p.Int<int32_t>())) ||
            !ok(sd_bus_message_close_container(m)))
          return std::nullopt;
        v.push_back(std::move(c));
      }
      if (!ok(sd_bus_message_close_container(m)) || !ok(sd_bus_message_close_container(m)))
        return std::nullopt;
      return PropValue(std::move(v)); }
    case 10: { JobRef v{p.Int<uint32_t>(), ObjectPath{Path(p)}};
      if (!ok(sd_bus_message_append(m, "v", "(uo)", v.id, v.path.value.c_str()))) return std::nullopt;
      return PropValue(v); }
    // Types the supervisor never reads: kept as "present, other type".
    case 11: if (!ok(sd_bus_message_append(m, "v", "y", p.Int<uint8_t>()))) return std::nullopt;
      return PropValue(OtherType{"y"});
    case 12: if (!ok(sd_bus_message_append(m, "v", "n", p.Int<int16_t>()))) return std::nullopt;
      return PropValue(OtherType{"n"});
    case 13: if (!ok(sd_bus_message_append(m, "v", "q", p.Int<uint16_t>()))) return std::nullopt;
      return PropValue(OtherType{"q"});
    case 14: if (!ok(sd_bus_message_append(m, "v", "d", p.Double()))) return std::nullopt;
      return PropValue(OtherType{"d"});
    case 15: if (!ok(sd_bus_message_append(m, "v", "g", p.Bool() ? "a{sv}" : "s"))) return std::nullopt;
      return PropValue(OtherType{"g"});
    case 16: { std::string s = Str(p);  // a variant inside the variant
      if (!ok(sd_bus_message_append(m, "v", "v", "s", s.c_str()))) return std::nullopt;
      return PropValue(OtherType{"v"}); }
    case 17: { std::string k = Str(p), s = Str(p);  // a nested property map
      if (!ok(sd_bus_message_append(m, "v", "a{sv}", 1, k.c_str(), "s", s.c_str()))) return std::nullopt;
      return PropValue(OtherType{"a{sv}"}); }
    case 18: { std::string a = Str(p), b = Str(p);
      if (!ok(sd_bus_message_append(m, "v", "(ss)", a.c_str(), b.c_str()))) return std::nullopt;
      return PropValue(OtherType{"(ss)"}); }
    default: { std::vector<uint8_t> b = Bytes(p);  // "ai": an array that is not "ay"
      if (!ok(sd_bus_message_append(m, "v", "ai", int(b.size() / 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)))
        return std::nullopt;
      return PropValue(OtherType{"ai"}); }
  }
}

// The model of one GetAll reply: the map ReadPropertyMap must return, or
// nullopt when it must fail (body not a{sv}, or a name twice).
struct Built {
  Message msg;
  std::optional<PropMap> model;
  bool is_map = false;                 // the body is an a{sv}
  PropMap first;                       // each name's first value
  std::map<std::string, int> counts;   // how often each name appeared
};

// What ReadPropertyMap(m, wanted) must return: the entries of wanted names,
// or nullopt when the body is not an a{sv} or a wanted name appears twice
// (other names may repeat: they are skipped, not decoded).
std::optional<PropMap> FilteredModel(const Built& b, const PropNameSet& wanted) {
  if (!b.is_map) return std::nullopt;
  PropMap out;
  for (const auto& [name, value] : b.first) {
    if (!wanted.contains(name)) continue;
    if (b.counts.at(name) > 1) return std::nullopt;
    out.emplace(name, value);
  }
  return out;
}

// Builds one reply from the program; nullopt if sd-bus refused an append.
std::optional<Built> BuildReply(Program& p) {
  Built out{NewMessage(), PropMap{}, false, {}, {}};
  sd_bus_message* m = out.msg.get();
  int shape = static_cast<int>(p.Pick(8));
  if (shape >= 5) {  // not an a{sv} body at all
    out.model.reset();
    if (shape == 5 && sd_bus_message_append(m, "a{ss}", 1, "MainPID", "1") < 0) return std::nullopt;
    if (shape == 6 && sd_bus_message_append(m, "s", "active") < 0) return std::nullopt;
    // shape 7: empty body
  } else {
    if (sd_bus_message_open_container(m, 'a', "{sv}") < 0) return std::nullopt;
    bool twice = false;
    for (size_t n = p.Pick(13); n > 0; --n) {
      size_t pick = p.Pick(std::size(kNames) + 1);  // the last: any name
      std::string name = pick < std::size(kNames) ? kNames[pick] : Str(p);
      if (sd_bus_message_open_container(m, 'e', "sv") < 0 ||
          sd_bus_message_append_basic(m, 's', name.c_str()) < 0)
        return std::nullopt;
      std::optional<PropValue> v = AppendVariant(p, m);
      if (!v || sd_bus_message_close_container(m) < 0) return std::nullopt;
      out.first.emplace(name, *v);
      ++out.counts[name];
      twice |= !out.model->emplace(name, std::move(*v)).second;
    }
    out.is_map = true;
    if (sd_bus_message_close_container(m) < 0) return std::nullopt;
    // Trailing data after the map is not the decoder's to judge.
    if (shape == 4 && sd_bus_message_append(m, "u", 7u) < 0) return std::nullopt;
    if (twice) out.model.reset();
  }
  if (!Seal(m)) return std::nullopt;
  return out;
}

// identity.h's rules, written again from its comments, on the models.
std::optional<Identity> ExpectedIdentity(const std::optional<PropMap>& unit,
                                         const std::optional<PropMap>& service) {
  if (!unit || !service || unit->contains("ControlGroup")) return std::nullopt;
  auto get = [](const PropMap& m, const char* k) -> const PropValue* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
  };
  const auto* active = get(*unit, "ActiveState");
  const auto* sub = get(*unit, "SubState");
  const auto* inv = get(*unit, "InvocationID");
  const auto* pid = get(*service, "MainPID");
  const auto* cg = get(*service, "ControlGroup");
  if (!active || !sub || !inv || !pid || !cg) return std::nullopt;
  const auto* active_s = std::get_if<std::string>(active);
  const auto* sub_s = std::get_if<std::string>(sub);
  const auto* inv_b = std::get_if<std::vector<uint8_t>>(inv);
  const auto* pid_u = std::get_if<uint32_t>(pid);
  const auto* cg_s = std::get_if<std::string>(cg);
  if (!active_s || !sub_s || !inv_b || !pid_u || !cg_s || inv_b->size() != 16) return std::nullopt;
  Identity id;
  id.active_state = *active_s;
  id.sub_state = *sub_s;
  std::copy(inv_b->begin(), inv_b->end(), id.invocation_id.begin());
  id.main_pid = *pid_u;
  id.control_group = *cg_s;
  return id;
}

// The names DecodeIdentity wants from each interface (daemon/auth/identity.cc).
const PropNameSet kUnitWanted = {"ControlGroup", "ActiveState", "SubState", "InvocationID"};
const PropNameSet kServiceWanted = {"MainPID", "ControlGroup"};

void CheckPropertyMap(const Built& b) {
  sd_bus_message* m = b.msg.get();
  absl::StatusOr<PropMap> got = ReadPropertyMap(m);
  FUZZ_CHECK(got.ok() == b.model.has_value());
  if (got.ok()) {
    FUZZ_CHECK(*got == *b.model);
    for (const auto& [name, value] : *got) FUZZ_CHECK(!DescribeValue(value).empty());
  }
  FUZZ_CHECK(sd_bus_message_rewind(m, 1) >= 0);
  // The same reply through the filter, with each interface's wanted names.
  for (const PropNameSet* wanted : {&kUnitWanted, &kServiceWanted}) {
    absl::StatusOr<PropMap> some = ReadPropertyMap(m, *wanted);
    std::optional<PropMap> want = FilteredModel(b, *wanted);
    FUZZ_CHECK(some.ok() == want.has_value());
    if (some.ok()) FUZZ_CHECK(*some == *want);
    FUZZ_CHECK(sd_bus_message_rewind(m, 1) >= 0);
  }
}

// GetUnitByPIDFD's (o, s, ay), sometimes with the wrong shape.
void FuzzUnitByPidfd(Program& p) {
  Message msg = NewMessage();
  sd_bus_message* m = msg.get();
  std::string path = Path(p), id = Str(p);
  std::vector<uint8_t> inv = Bytes(p);
  int shape = static_cast<int>(p.Pick(4));
  int r;
  switch (shape) {
    case 0: r = sd_bus_message_append(m, "os", path.c_str(), id.c_str());
            if (r >= 0) r = sd_bus_message_append_array(m, 'y', inv.data(), inv.size()); break;
    case 1: r = sd_bus_message_append(m, "os", path.c_str(), id.c_str()); break;    // no ay
    case 2: r = sd_bus_message_append(m, "ss", path.c_str(), id.c_str()); break;    // s, not o
    default: r = sd_bus_message_append(m, "osai", path.c_str(), id.c_str(), 1, 16); break;
  }
  if (r < 0 || !Seal(m)) return;
  absl::StatusOr<PidfdUnit> got = DecodeUnitByPidfd(m);
  bool expect_ok = shape == 0 && inv.size() == 16;
  FUZZ_CHECK(got.ok() == expect_ok);
  if (got.ok()) {
    FUZZ_CHECK(got->path == path && got->id == id);
    FUZZ_CHECK(std::equal(inv.begin(), inv.end(), got->invocation_id.begin()));
  }
}

}  // namespace
}  // namespace opencode::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace opencode::daemon;
  Program p(data, size);
  if (p.Bool()) {
    FuzzUnitByPidfd(p);
    return 0;
  }
  std::optional<Built> unit = BuildReply(p);
  if (!unit) return 0;
  std::optional<Built> service = BuildReply(p);
  if (!service) return 0;

  CheckPropertyMap(*unit);
  CheckPropertyMap(*service);

  absl::StatusOr<Identity> got = DecodeIdentity(unit->msg.get(), service->msg.get());
  std::optional<Identity> want =
      ExpectedIdentity(FilteredModel(*unit, kUnitWanted), FilteredModel(*service, kServiceWanted));
  FUZZ_CHECK(got.ok() == want.has_value());
  if (!got.ok()) return 0;
  FUZZ_CHECK(got->active_state == want->active_state && got->sub_state == want->sub_state &&
             got->invocation_id == want->invocation_id && got->main_pid == want->main_pid &&
             got->control_group == want->control_group);

  // The decision on a decoded identity, for a peer that claims to be it.
  PeerFacts peer;
  peer.pid = static_cast<pid_t>(p.Bool() ? got->main_pid : p.Int<uint32_t>());
  peer.uid = p.Bool() ? 1000 : p.Int<uint32_t>();
  peer.cgroup = p.Bool() ? got->control_group : Str(p);
  peer.alive_after = p.Bool();
  std::string why;
  opencode::ErrorCode e = CheckIdentity(*got, peer, &why);
  bool accept = peer.uid != 0 && got->active_state == "active" && got->sub_state == "running" &&
                got->main_pid != 0 && peer.pid > 0 && uint32_t(peer.pid) == got->main_pid &&
                !got->control_group.empty() && peer.cgroup == got->control_group &&
                peer.alive_after;
  FUZZ_CHECK((e == opencode::ErrorCode::kOk) == accept);
  FUZZ_CHECK(e == opencode::ErrorCode::kOk || !why.empty());
  FUZZ_CHECK(peer.uid != 0 || e == opencode::ErrorCode::kRootRefused);
  return 0;
}
