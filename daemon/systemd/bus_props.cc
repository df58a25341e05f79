// a{sv} decoding for GetAll replies (see bus_props.h). The sender is systemd
// (the reply's destination is guaranteed by the bus daemon), but the decoder is
// still strict: it is fuzzed and it is what the identity check stands on.
#include "daemon/systemd/bus_props.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/absl_compat.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

absl::Status Bad(int r, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed property map (", AV(what), "): ",
                                                 r < 0 ? strerror(-r) : "unexpected end"));
}

absl::StatusOr<std::vector<std::string>> ReadStrv(sd_bus_message* m) {
  char** strv = nullptr;
  int r = sd_bus_message_read_strv(m, &strv);
  if (r < 0) return Bad(r, "as");
  std::vector<std::string> out;
  for (char** s = strv; s && *s; ++s) out.emplace_back(*s);
  for (char** s = strv; s && *s; ++s) free(*s);
  free(strv);
  return out;
}

absl::StatusOr<std::vector<ExecCommand>> ReadExecCommands(sd_bus_message* m) {
  std::vector<ExecCommand> out;
  int r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "(sasbttttuii)");
  if (r <= 0) return Bad(r, "ExecCommand array");
  for (;;) {
    r = sd_bus_message_enter_container(m, SD_BUS_TYPE_STRUCT, "sasbttttuii");
    if (r < 0) return Bad(r, "ExecCommand");
    if (r == 0) break;
    ExecCommand cmd;
    const char* path = nullptr;
    if ((r = sd_bus_message_read(m, "s", &path)) <= 0) return Bad(r, "ExecCommand path");
    cmd.path = path;
    ASSIGN_OR_RETURN(cmd.argv, ReadStrv(m));
    int ignore = 0;
    uint64_t t1, t2, t3, t4;
    uint32_t pid;
    int32_t code, status;
    r = sd_bus_message_read(m, "bttttuii", &ignore, &t1, &t2, &t3, &t4, &pid, &code, &status);
    if (r <= 0) return Bad(r, "ExecCommand fields");
    cmd.ignore_failure = ignore != 0;
    if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "ExecCommand end");
    out.push_back(std::move(cmd));
  }
  if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "ExecCommand array end");
  return out;
}

// Reads the value inside a variant whose signature is `sig`.
absl::StatusOr<PropValue> ReadValue(sd_bus_message* m, const char* sig) {
  int r;
  std::string_view s(sig);
  if (s == "b") {
    int v = 0;
    if ((r = sd_bus_message_read_basic(m, 'b', &v)) <= 0) return Bad(r, "b");
    return PropValue(v != 0);
  }
  if (s == "i") {
    int32_t v = 0;
    if ((r = sd_bus_message_read_basic(m, 'i', &v)) <= 0) return Bad(r, "i");
    return PropValue(v);
  }
  if (s == "u") {
    uint32_t v = 0;
    if ((r = sd_bus_message_read_basic(m, 'u', &v)) <= 0) return Bad(r, "u");
    return PropValue(v);
  }
  if (s == "x") {
    int64_t v = 0;
    if ((r = sd_bus_message_read_basic(m, 'x', &v)) <= 0) return Bad(r, "x");
    return PropValue(v);
  }
  if (s == "t") {
    uint64_t v = 0;
    if ((r = sd_bus_message_read_basic(m, 't', &v)) <= 0) return Bad(r, "t");
    return PropValue(v);
  }
  if (s == "s") {
    const char* v = nullptr;
    if ((r = sd_bus_message_read_basic(m, 's', &v)) <= 0) return Bad(r, "s");
    return PropValue(std::string(v));
  }
  if (s == "o") {
    const char* v = nullptr;
    if ((r = sd_bus_message_read_basic(m, 'o', &v)) <= 0) return Bad(r, "o");
    return PropValue(ObjectPath{v});
  }
  if (s == "as") {
    ASSIGN_OR_RETURN(auto v, ReadStrv(m));
    return PropValue(std::move(v));
  }
  if (s == "ay") {
    const void* p = nullptr;
    size_t n = 0;
    if ((r = sd_bus_message_read_array(m, 'y', &p, &n)) < 0) return Bad(r, "ay");
    const auto* b = static_cast<const uint8_t*>(p);
    return PropValue(std::vector<uint8_t>(b, b + n));
  }
  if (s == "a(sasbttttuii)") {
    ASSIGN_OR_RETURN(auto v, ReadExecCommands(m));
    return PropValue(std::move(v));
  }
  if (s == "(uo)") {
    uint32_t id = 0;
    const char* path = nullptr;
    if ((r = sd_bus_message_read(m, "(uo)", &id, &path)) <= 0) return Bad(r, "(uo)");
    return PropValue(JobRef{id, ObjectPath{path}});
  }
  if ((r = sd_bus_message_skip(m, sig)) < 0) return Bad(r, sig);
  return PropValue(OtherType{std::string(sig)});
}

template <typename T>
constexpr const char* TypeName() {
  if constexpr (std::is_same_v<T, bool>) return "b";
  else if constexpr (std::is_same_v<T, int32_t>) return "i";
  else if constexpr (std::is_same_v<T, uint32_t>) return "u";
  else if constexpr (std::is_same_v<T, int64_t>) return "x";
  else if constexpr (std::is_same_v<T, uint64_t>) return "t";
  else if constexpr (std::is_same_v<T, std::string>) return "s";
  else if constexpr (std::is_same_v<T, ObjectPath>) return "o";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "as";
  else if constexpr (std::is_same_v<T, std::vector<uint8_t>>) return "ay";
  else if constexpr (std::is_same_v<T, std::vector<ExecCommand>>) return "a(sasbttttuii)";
  else if constexpr (std::is_same_v<T, JobRef>) return "(uo)";
  else return "?";
}

}  // namespace

namespace {

absl::StatusOr<PropMap> ReadProperties(sd_bus_message* m, const PropNameSet* wanted) {
  PropMap out;
  int r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
  if (r <= 0) return Bad(r, "a{sv}");
  for (;;) {
    r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv");
    if (r < 0) return Bad(r, "{sv}");
    if (r == 0) break;
    const char* name = nullptr;
    if ((r = sd_bus_message_read_basic(m, 's', &name)) <= 0) return Bad(r, "property name");
    if (wanted != nullptr && !wanted->contains(std::string_view(name))) {
      if ((r = sd_bus_message_skip(m, "v")) < 0) return Bad(r, "variant");
      if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "{sv} end");
      continue;
    }
    std::string key(name);
    const char* contents = nullptr;
    if ((r = sd_bus_message_peek_type(m, nullptr, &contents)) <= 0 || contents == nullptr)
      return Bad(r, "variant type");
    std::string sig(contents);  // `contents` is only valid until the next read
    if ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, sig.c_str())) <= 0)
      return Bad(r, "variant");
    ASSIGN_OR_RETURN(PropValue value, ReadValue(m, sig.c_str()));
    if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "variant end");
    if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "{sv} end");
    if (!out.emplace(std::move(key), std::move(value)).second)
      return absl::InvalidArgumentError(absl::StrCat("property ", name, " appears twice"));
  }
  if ((r = sd_bus_message_exit_container(m)) < 0) return Bad(r, "a{sv} end");
  return out;
}

}  // namespace

absl::StatusOr<PropMap> ReadPropertyMap(sd_bus_message* m) { return ReadProperties(m, nullptr); }

absl::StatusOr<PropMap> ReadPropertyMap(sd_bus_message* m, const PropNameSet& wanted) {
  return ReadProperties(m, &wanted);
}

template <typename T>
absl::StatusOr<T> GetProp(const PropMap& props, std::string_view name) {
  auto it = props.find(name);
  if (it == props.end()) return absl::NotFoundError(absl::StrCat("property ", AV(name), " missing"));
  const T* v = std::get_if<T>(&it->second);
  if (v == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("property ", AV(name), " is not of type ",
                                                   TypeName<T>()));
  return *v;
}

template absl::StatusOr<bool> GetProp<bool>(const PropMap&, std::string_view);
template absl::StatusOr<int32_t> GetProp<int32_t>(const PropMap&, std::string_view);
template absl::StatusOr<uint32_t> GetProp<uint32_t>(const PropMap&, std::string_view);
template absl::StatusOr<int64_t> GetProp<int64_t>(const PropMap&, std::string_view);
template absl::StatusOr<uint64_t> GetProp<uint64_t>(const PropMap&, std::string_view);
template absl::StatusOr<std::string> GetProp<std::string>(const PropMap&, std::string_view);
template absl::StatusOr<ObjectPath> GetProp<ObjectPath>(const PropMap&, std::string_view);
template absl::StatusOr<std::vector<std::string>> GetProp<std::vector<std::string>>(
    const PropMap&, std::string_view);
template absl::StatusOr<std::vector<uint8_t>> GetProp<std::vector<uint8_t>>(const PropMap&,
                                                                           std::string_view);
template absl::StatusOr<std::vector<ExecCommand>> GetProp<std::vector<ExecCommand>>(
    const PropMap&, std::string_view);
template absl::StatusOr<JobRef> GetProp<JobRef>(const PropMap&, std::string_view);

std::string DescribeValue(const PropValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int32_t i) const { return absl::StrCat(i); }
    std::string operator()(uint32_t i) const { return absl::StrCat(i); }
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(uint64_t i) const { return absl::StrCat(i); }
    std::string operator()(const std::string& s) const { return absl::StrCat("\"", s, "\""); }
    std::string operator()(const ObjectPath& p) const { return p.value; }
    std::string operator()(const std::vector<std::string>& l) const {
      return absl::StrCat("[", absl::StrJoin(l, ","), "]");
    }
    std::string operator()(const std::vector<uint8_t>& b) const {
      return absl::StrCat("(", b.size(), " bytes)");
    }
    std::string operator()(const std::vector<ExecCommand>& c) const {
      // argv is encoded launcher arguments; report only the shape.
      std::string out = "[";
      for (const auto& e : c) absl::StrAppend(&out, "(", e.path, ", ", e.argv.size(), " args)");
      return out + "]";
    }
    std::string operator()(const JobRef& j) const { return absl::StrCat("job ", j.id); }
    std::string operator()(const OtherType& o) const { return absl::StrCat("<", o.signature, ">"); }
  };
  return std::visit(Visitor{}, v);
}

}  // namespace opencode::daemon
