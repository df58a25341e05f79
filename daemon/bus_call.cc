// Asynchronous D-Bus calls with owned slots (see bus_call.h). The slot's
// userdata is the PendingCall itself, so no allocation outlives its owner.
#include "daemon/bus_call.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/constants.h"
#include "daemon/status_macros.h"

namespace opencode::daemon {
namespace {

class DbusCall final : public PendingCall {
 public:
  explicit DbusCall(ReplyHandler handler) : handler_(std::move(handler)) {}

  absl::Status Send(sd_bus* bus, sd_bus_message* call) {
    sd_bus_slot* slot = nullptr;
    int r = sd_bus_call_async(bus, &slot, call, &DbusCall::OnReply, this,
                              limits::kBusCallTimeoutUsec);
    if (r < 0) return SdError(r, "sd_bus_call_async");
    slot_.reset(slot);
    return absl::OkStatus();
  }

 private:
  static int OnReply(sd_bus_message* reply, void* userdata, sd_bus_error* /*ret_error*/) noexcept {
    auto* self = static_cast<DbusCall*>(userdata);
    // The call is over: release our slot first (sd-bus keeps its own reference
    // while dispatching), then move the handler out so that it may destroy
    // *self without destroying the function it is running.
    self->slot_.reset();
    ReplyHandler handler = std::move(self->handler_);
    if (handler) handler(reply);
    return 0;
  }

  SlotPtr slot_;
  ReplyHandler handler_;
};

}  // namespace

absl::StatusOr<Pending> CallAsync(sd_bus* bus, sd_bus_message* call, ReplyHandler handler) {
  auto pending = std::make_unique<DbusCall>(std::move(handler));
  RETURN_IF_ERROR(pending->Send(bus, call));
  return Pending(std::move(pending));
}

absl::StatusOr<MessagePtr> NewManagerCall(sd_bus* bus, const char* member) {
  sd_bus_message* m = nullptr;
  int r = sd_bus_message_new_method_call(bus, &m, kSystemdService, kSystemdPath,
                                         kManagerInterface, member);
  if (r < 0) return SdError(r, absl::StrCat("new call ", member));
  return MessagePtr(m);
}

absl::StatusOr<MessagePtr> NewGetAllCall(sd_bus* bus, const char* path, const char* interface) {
  sd_bus_message* raw = nullptr;
  int r = sd_bus_message_new_method_call(bus, &raw, kSystemdService, path,
                                         kPropertiesInterface, "GetAll");
  if (r < 0) return SdError(r, "new call GetAll");
  MessagePtr m(raw);
  r = sd_bus_message_append(m.get(), "s", interface);
  if (r < 0) return SdError(r, "append GetAll interface");
  return m;
}

absl::Status ReplyStatus(sd_bus_message* reply) {
  if (reply == nullptr) return absl::InternalError("no reply");
  if (!sd_bus_message_is_method_error(reply, nullptr)) return absl::OkStatus();
  const sd_bus_error* e = sd_bus_message_get_error(reply);
  int err = sd_bus_message_get_errno(reply);
  std::string text = absl::StrCat(e && e->name ? e->name : "(unnamed D-Bus error)", ": ",
                                  e && e->message ? e->message : "");
  return absl::ErrnoToStatus(err > 0 ? err : EIO, text);
}

bool ReplyIsError(sd_bus_message* reply, const char* name) {
  return reply != nullptr && sd_bus_message_is_method_error(reply, name) > 0;
}

bool IsBusError(const absl::Status& status, std::string_view name) {
  // ReplyStatus() formats "<error name>: <message>".
  std::string_view m = SV(status.message());
  return !status.ok() && m.size() > name.size() && m.substr(0, name.size()) == name &&
         m[name.size()] == ':';
}

std::string_view ReplyErrorName(sd_bus_message* reply) {
  if (reply == nullptr || !sd_bus_message_is_method_error(reply, nullptr)) return {};
  const sd_bus_error* e = sd_bus_message_get_error(reply);
  return e && e->name ? std::string_view(e->name) : std::string_view();
}

}  // namespace opencode::daemon
