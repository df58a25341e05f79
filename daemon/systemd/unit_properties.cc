// The PTY unit's property table (see unit_properties.h and the "Supervisor"
// section of docs/SECURITY.md, which gives the reason for every line).
#include "daemon/systemd/unit_properties.h"

#include <array>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base64url.h"
#include "common/launch.h"
#include "common/limits.h"
#include "daemon/base/absl_compat.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/constants.h"

namespace opencode::daemon {
namespace {

absl::Status AppendOne(sd_bus_message* m, const PropertySpec& spec) {
  int r = sd_bus_message_open_container(m, SD_BUS_TYPE_STRUCT, "sv");
  if (r < 0) return SdError(r, "open (sv)");
  if ((r = sd_bus_message_append_basic(m, 's', spec.name)) < 0) return SdError(r, "append name");
  struct Visitor {
    sd_bus_message* m;
    int operator()(bool b) const { return sd_bus_message_append(m, "v", "b", (int)b); }
    int operator()(int32_t v) const { return sd_bus_message_append(m, "v", "i", v); }
    int operator()(uint32_t v) const { return sd_bus_message_append(m, "v", "u", v); }
    int operator()(int64_t v) const { return sd_bus_message_append(m, "v", "x", v); }
    int operator()(uint64_t v) const { return sd_bus_message_append(m, "v", "t", v); }
    int operator()(const std::string& s) const { return sd_bus_message_append(m, "v", "s", s.c_str()); }
    int operator()(const ObjectPath& p) const { return sd_bus_message_append(m, "v", "o", p.value.c_str()); }
    int operator()(const std::vector<std::string>& l) const {
      int r = sd_bus_message_open_container(m, SD_BUS_TYPE_VARIANT, "as");
      if (r < 0) return r;
      if ((r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "s")) < 0) return r;
      for (const auto& s : l)
        if ((r = sd_bus_message_append_basic(m, 's', s.c_str())) < 0) return r;
      if ((r = sd_bus_message_close_container(m)) < 0) return r;
      return sd_bus_message_close_container(m);
    }
    int operator()(const std::vector<uint8_t>&) const { return -EINVAL; }
    // The request form of ExecStart is a(sasb); systemd reports a(sasbttttuii).
    int operator()(const std::vector<ExecCommand>& cmds) const {
      int r = sd_bus_message_open_container(m, SD_BUS_TYPE_VARIANT, "a(sasb)");
      if (r < 0) return r;
      if ((r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "(sasb)")) < 0) return r;
      for (const auto& c : cmds) {
        if ((r = sd_bus_message_open_container(m, SD_BUS_TYPE_STRUCT, "sasb")) < 0) return r;
        if ((r = sd_bus_message_append_basic(m, 's', c.path.c_str())) < 0) return r;
        if ((r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "s")) < 0) return r;
        for (const auto& a : c.argv)
          if ((r = sd_bus_message_append_basic(m, 's', a.c_str())) < 0) return r;
        if ((r = sd_bus_message_close_container(m)) < 0) return r;
        int ignore = c.ignore_failure;
        if ((r = sd_bus_message_append_basic(m, 'b', &ignore)) < 0) return r;
        if ((r = sd_bus_message_close_container(m)) < 0) return r;
      }
      if ((r = sd_bus_message_close_container(m)) < 0) return r;
      return sd_bus_message_close_container(m);
    }
    int operator()(const JobRef&) const { return -EINVAL; }
    int operator()(const OtherType&) const { return -EINVAL; }
  };
  r = std::visit(Visitor{m}, spec.value);
  if (r < 0) return SdError(r, absl::StrCat("append value of ", spec.name));
  if ((r = sd_bus_message_close_container(m)) < 0) return SdError(r, "close (sv)");
  return absl::OkStatus();
}

absl::Status AppendFd(sd_bus_message* m, const char* name, int fd) {
  int r = sd_bus_message_append(m, "(sv)", name, "h", fd);
  if (r < 0) return SdError(r, absl::StrCat("append ", name));
  return absl::OkStatus();
}

}  // namespace

std::string SessionUnitName(std::string_view session_id) {
  return absl::StrCat(AV(kSessionUnitPrefix), AV(session_id), AV(kSessionUnitSuffix));
}

bool IsSessionUnitName(std::string_view name) {
  if (name.size() != kSessionUnitPrefix.size() + kSessionIdHexChars + kSessionUnitSuffix.size())
    return false;
  if (name.substr(0, kSessionUnitPrefix.size()) != kSessionUnitPrefix) return false;
  if (name.substr(name.size() - kSessionUnitSuffix.size()) != kSessionUnitSuffix) return false;
  std::string_view hex = name.substr(kSessionUnitPrefix.size(), kSessionIdHexChars);
  return std::all_of(hex.begin(), hex.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<PropertySpec> BuildPropertySpecs(const UnitRequest& req) {
  ExecCommand exec{kLauncherPath, {kLauncherPath}, false};
  for (const auto& arg : req.argv) {
    std::string encoded;
    EncodeArg(arg, &encoded);
    exec.argv.push_back(std::move(encoded));
  }
  using I = Interface;
  // Every line's reason is in docs/SECURITY.md ("PTY unit properties").
  return {
      // First, so a refusal names the drop-in rather than the first property
      // it changed: no drop-in (service.d/, opencode-pty-.service.d/, ...)
      // added anything the table does not read, and the unit is the transient
      // file systemd wrote from this request.
      {"DropInPaths", std::vector<std::string>{}, I::kUnit, false},
      {"FragmentPath", absl::StrCat("/run/systemd/transient/", req.unit_name), I::kUnit, false},
      {"Description", absl::StrCat("opencode PTY session ", req.session_id), I::kUnit},
      // No reference holds a PTY unit (none can: see VerifyReadBack): systemd
      // collects it once inactive, and keeps a failed one (its Result and
      // ExecMain* readable) until the supervisor's ResetFailedUnit.
      {"CollectMode", std::string("inactive"), I::kUnit},
      {"Slice", std::string(kSessionSlice), I::kService},
      {"Type", std::string("exec"), I::kService},
      {"User", absl::StrCat(req.uid), I::kService},
      {"ExecStart", std::vector<ExecCommand>{std::move(exec)}, I::kService},
      {"Environment",
       std::vector<std::string>{absl::StrCat(kColumnsEnvName, "=", req.cols),
                                absl::StrCat(kLinesEnvName, "=", req.rows)},
       I::kService},
      {"RemainAfterExit", false, I::kService},
      {"KillMode", std::string("control-group"), I::kService},
      {"SendSIGKILL", true, I::kService},
      {"SendSIGHUP", true, I::kService},
      {"TimeoutStopUSec", uint64_t{limits::kUnitStopTimeoutUsec}, I::kService},
      {"TasksMax", uint64_t{limits::kUnitTasksMax}, I::kService},
      // Lowered to kUnitCpuWeight at the command's exec (Session::LowerCpuWeight).
      {"CPUWeight", uint64_t{limits::kUnitStartCpuWeight}, I::kService},
      {"LimitCORE", uint64_t{0}, I::kService},
      {"LimitCORESoft", uint64_t{0}, I::kService, /*request=*/false},
      {"IgnoreSIGPIPE", false, I::kService},
      {"NoNewPrivileges", true, I::kService},
      {"LockPersonality", true, I::kService},
      {"RestrictRealtime", true, I::kService},
      {"RestrictSUIDSGID", true, I::kService},
      // Read-back only: the unit systemd made is the one we asked for.
      {"Id", req.unit_name, I::kUnit, false},
      {"LoadState", std::string("loaded"), I::kUnit, false},
      {"Transient", true, I::kUnit, false},
      // What systemd 252 and 257 report for descriptor stdio (the descriptors
      // themselves are no property): a drop-in's StandardInput=tty or
      // StandardOutput=file:... would read back differently.
      {"StandardInput", std::string("null"), I::kService, false},
      {"StandardOutput", std::string("journal"), I::kService, false},
      {"StandardError", std::string("inherit"), I::kService, false},
  };
}

absl::Status AppendStartTransientUnit(sd_bus_message* m, const UnitRequest& req, int stream_fd,
                                      int dir_fd) {
  int r = sd_bus_message_append(m, "ss", req.unit_name.c_str(), "fail");
  if (r < 0) return SdError(r, "append name/mode");
  if ((r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "(sv)")) < 0)
    return SdError(r, "open properties");
  for (const PropertySpec& spec : BuildPropertySpecs(req))
    if (spec.request) RETURN_IF_ERROR(AppendOne(m, spec));
  RETURN_IF_ERROR(AppendFd(m, "StandardInputFileDescriptor", stream_fd));
  RETURN_IF_ERROR(AppendFd(m, "StandardOutputFileDescriptor", stream_fd));
  RETURN_IF_ERROR(AppendFd(m, "StandardErrorFileDescriptor", dir_fd));
  if ((r = sd_bus_message_close_container(m)) < 0) return SdError(r, "close properties");
  if ((r = sd_bus_message_append(m, "a(sa(sv))", 0)) < 0) return SdError(r, "append aux");
  return absl::OkStatus();
}

const PropNameSet& SnapshotPropertyNames(Interface iface) {
  static const auto* sets = [] {
    auto* both = new std::array<PropNameSet, 2>();
    // Spec names are string literals; the request's values do not matter.
    for (const PropertySpec& spec : BuildPropertySpecs(UnitRequest{}))
      (*both)[spec.iface == Interface::kUnit ? 0 : 1].insert(spec.name);
    for (std::string_view n : {"Refs", "Job", "ActiveState", "InvocationID"}) (*both)[0].insert(n);
    for (std::string_view n : {"ExecMainStartTimestampMonotonic", "ExecMainCode", "ExecMainStatus",
                               "Result"})
      (*both)[1].insert(n);
    return both;
  }();
  return (*sets)[iface == Interface::kUnit ? 0 : 1];
}

absl::Status VerifyReadBack(const std::vector<PropertySpec>& specs, const PropMap& unit,
                            const PropMap& service) {
  for (const PropertySpec& spec : specs) {
    const PropMap& props = spec.iface == Interface::kUnit ? unit : service;
    auto it = props.find(spec.name);
    if (it == props.end())
      return absl::FailedPreconditionError(absl::StrCat("property ", spec.name, " not reported"));
    bool equal;
    if (const auto* want = std::get_if<std::vector<ExecCommand>>(&spec.value)) {
      // Compare path, argv and the ignore flag; the rest is runtime status.
      const auto* got = std::get_if<std::vector<ExecCommand>>(&it->second);
      equal = got != nullptr && *got == *want;
    } else {
      equal = it->second == spec.value;
    }
    if (!equal)
      return absl::FailedPreconditionError(absl::StrCat("property ", spec.name, " is ",
                                                        DescribeValue(it->second), ", requested ",
                                                        DescribeValue(spec.value)));
  }
  // Nothing may pin the unit: the supervisor's connection to systemd is
  // direct (no bus name to reference it by), and a reference taken by anyone
  // else would keep the unit loaded after its end, which the proof of
  // cleanup (GetUnit until NoSuchUnit) would then never see.
  auto refs = GetProp<std::vector<std::string>>(unit, "Refs");
  if (!refs.ok()) return absl::FailedPreconditionError(refs.status().message());
  if (!refs->empty())
    return absl::FailedPreconditionError(absl::StrCat("the unit is referenced (Refs ", refs->front(), ")"));
  return absl::OkStatus();
}

}  // namespace opencode::daemon
