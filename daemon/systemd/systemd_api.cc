// Real SystemdApi over sd-bus (see systemd_api.h). Every method builds one
// message, sends it with an owned slot and drops the message at return.
#include "daemon/systemd/systemd_api.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/constants.h"

namespace opencode::daemon {

absl::StatusOr<std::string> UnitObjectPath(const std::string& unit) {
  char* path = nullptr;
  int r = sd_bus_path_encode(kUnitPathPrefix, unit.c_str(), &path);
  if (r < 0) return SdError(r, "sd_bus_path_encode");
  std::string out(path);
  free(path);
  return out;
}

namespace {

// Two GetAll calls in parallel; answers when both are in.
class SnapshotCall final : public PendingCall {
 public:
  explicit SnapshotCall(SystemdApi::SnapshotDone done) : done_(std::move(done)) {}

  absl::Status Send(sd_bus* bus, const std::string& path) {
    ASSIGN_OR_RETURN(MessagePtr unit_call, NewGetAllCall(bus, path.c_str(), kUnitInterface));
    ASSIGN_OR_RETURN(MessagePtr service_call, NewGetAllCall(bus, path.c_str(), kServiceInterface));
    ASSIGN_OR_RETURN(unit_call_, CallAsync(bus, unit_call.get(), [this](sd_bus_message* m) {
                       unit_call_.reset();
                       Take(m, &unit_, SnapshotPropertyNames(Interface::kUnit));
                     }));
    ASSIGN_OR_RETURN(service_call_, CallAsync(bus, service_call.get(), [this](sd_bus_message* m) {
                       service_call_.reset();
                       Take(m, &service_, SnapshotPropertyNames(Interface::kService));
                     }));
    return absl::OkStatus();
  }

 private:
  void Take(sd_bus_message* m, std::optional<absl::StatusOr<PropMap>>* slot,
            const PropNameSet& wanted) {
    absl::Status st = ReplyStatus(m);
    if (st.ok())
      *slot = ReadPropertyMap(m, wanted);
    else
      *slot = st;
    if (!unit_ || !service_ || !done_) return;
    SystemdApi::SnapshotDone done = std::move(done_);
    done_ = nullptr;
    if (!unit_->ok()) return done(unit_->status());
    if (!service_->ok()) return done(service_->status());
    done(UnitSnapshot{std::move(**unit_), std::move(**service_)});  // may destroy *this
  }

  SystemdApi::SnapshotDone done_;
  Pending unit_call_, service_call_;
  std::optional<absl::StatusOr<PropMap>> unit_, service_;
};

class BusSystemdApi final : public SystemdApi {
 public:
  explicit BusSystemdApi(const BusSource* source) : source_(source) {}

  absl::StatusOr<Pending> StartUnit(const UnitRequest& req, int stream_fd, int dir_fd,
                                    Done done) override {
    ASSIGN_OR_RETURN(MessagePtr m, NewManagerCall(bus(), "StartTransientUnit"));
    RETURN_IF_ERROR(AppendStartTransientUnit(m.get(), req, stream_fd, dir_fd));
    // Our `m` is released when this returns; CallAsync keeps a reference only
    // while the call waits for a place, sd-bus only until it is written.
    return CallAsync(bus(), m.get(), [done = std::move(done)](sd_bus_message* reply) {
      done(ReplyStatus(reply));
    });
  }

  absl::StatusOr<Pending> QueryUnit(const std::string& unit, SnapshotDone done) override {
    ASSIGN_OR_RETURN(std::string path, UnitObjectPath(unit));
    auto call = std::make_unique<SnapshotCall>(std::move(done));
    RETURN_IF_ERROR(call->Send(bus(), path));
    return Pending(std::move(call));
  }

  absl::StatusOr<Pending> QueryGone(const std::string& unit, GoneDone done) override {
    ASSIGN_OR_RETURN(MessagePtr m, NewManagerCall(bus(), "GetUnit"));
    int r = sd_bus_message_append(m.get(), "s", unit.c_str());
    if (r < 0) return SdError(r, "append GetUnit");
    return CallAsync(bus(), m.get(), [done = std::move(done)](sd_bus_message* reply) {
      if (ReplyIsError(reply, "org.freedesktop.systemd1.NoSuchUnit")) return done(true);
      absl::Status st = ReplyStatus(reply);
      if (!st.ok()) return done(st);
      done(false);
    });
  }

  absl::StatusOr<Pending> StopUnit(const std::string& unit, Done done) override {
    return Simple("StopUnit", std::move(done), "ss", unit.c_str(), "replace");
  }
  absl::StatusOr<Pending> ResetFailedUnit(const std::string& unit, Done done) override {
    return Simple("ResetFailedUnit", std::move(done), "s", unit.c_str());
  }

  absl::StatusOr<Pending> SetCpuWeight(const std::string& unit, uint64_t weight, Done done) override {
    // runtime = true: systemd keeps it as a drop-in under /run, gone with the unit.
    return Simple("SetUnitProperties", std::move(done), "sba(sv)", unit.c_str(), 1, 1u, "CPUWeight",
                  "t", weight);
  }

  absl::StatusOr<Pending> ListSessionUnits(ListDone done) override {
    ASSIGN_OR_RETURN(MessagePtr m, NewManagerCall(bus(), "ListUnitsByPatterns"));
    int r = sd_bus_message_append(m.get(), "asas", 0, 1, kSessionUnitPattern);
    if (r < 0) return SdError(r, "append ListUnitsByPatterns");
    return CallAsync(bus(), m.get(), [done = std::move(done)](sd_bus_message* reply) {
      absl::Status st = ReplyStatus(reply);
      if (!st.ok()) return done(st);
      done(ReadUnitNames(reply));
    });
  }

 private:
  template <typename... Args>
  absl::StatusOr<Pending> Simple(const char* member, Done done, const char* sig, Args... args) {
    ASSIGN_OR_RETURN(MessagePtr m, NewManagerCall(bus(), member));
    int r = sd_bus_message_append(m.get(), sig, args...);
    if (r < 0) return SdError(r, absl::StrCat("append ", member));
    return CallAsync(bus(), m.get(), [done = std::move(done)](sd_bus_message* reply) {
      done(ReplyStatus(reply));
    });
  }

  static absl::StatusOr<std::vector<std::string>> ReadUnitNames(sd_bus_message* reply) {
    std::vector<std::string> names;
    int r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(ssssssouso)");
    if (r <= 0) return absl::InvalidArgumentError("ListUnitsByPatterns: malformed reply");
    const char *name = nullptr, *s1, *s2, *s3, *s4, *s5, *s6;
    const char *o1, *o2;
    uint32_t job = 0;
    while ((r = sd_bus_message_read(reply, "(ssssssouso)", &name, &s1, &s2, &s3, &s4, &s5, &o1,
                                    &job, &s6, &o2)) > 0) {
      if (IsSessionUnitName(name)) names.emplace_back(name);
    }
    if (r < 0) return absl::InvalidArgumentError("ListUnitsByPatterns: malformed entry");
    return names;
  }

  sd_bus* bus() const noexcept { return source_->bus(); }

  const BusSource* source_;
};

}  // namespace

std::unique_ptr<SystemdApi> NewBusSystemdApi(const BusSource* source) {
  return std::make_unique<BusSystemdApi>(source);
}

}  // namespace opencode::daemon
