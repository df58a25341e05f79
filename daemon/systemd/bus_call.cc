// Asynchronous D-Bus calls with owned slots (see bus_call.h). The slot's
// userdata is the PendingCall itself, so no allocation outlives its owner.
#include "daemon/systemd/bus_call.h"

#include <list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/base/journal.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/constants.h"

namespace opencode::daemon {
namespace {

// At most limits::kMaxBusCallsInFlight calls wait for a reply; the others
// wait here, oldest first, and are sent as replies free places. One sd-event
// loop and one thread: plain static state, no locking.
class DbusCall;
struct Throttle {
  size_t in_flight = 0;
  std::list<DbusCall*> waiting;
};
Throttle& Calls() {
  static Throttle t;
  return t;
}

struct BusUnref {
  void operator()(sd_bus* b) const noexcept { sd_bus_unref(b); }
};

class DbusCall final : public PendingCall {
 public:
  DbusCall(sd_bus* bus, sd_bus_message* call, ReplyHandler handler)
      : bus_(sd_bus_ref(bus)), call_(sd_bus_message_ref(call)), handler_(std::move(handler)) {}

  ~DbusCall() override {
    if (failed_) {
      failed_.reset();  // its error reply has not run yet; it never will
    } else if (queued_) {
      Calls().waiting.erase(pos_);
    } else if (slot_) {  // cancelled while in flight: its place is free again
      slot_.reset();
      ReleasePlace();
    }
  }

  absl::Status Start() {
    if (Calls().in_flight >= limits::kMaxBusCallsInFlight) {
      pos_ = Calls().waiting.insert(Calls().waiting.end(), this);
      queued_ = true;
      return absl::OkStatus();
    }
    return Send();
  }

 private:
  absl::Status Send() {
    sd_bus_slot* slot = nullptr;
    int r = sd_bus_call_async(bus_.get(), &slot, call_.get(), &DbusCall::OnReply, this,
                              limits::kBusCallTimeoutUsec);
    // sd-bus holds its own reference until the message is written; ours would
    // keep any descriptor the message carries (a PTY stream end) alive.
    call_.reset();
    if (r < 0) return SdError(r, "sd_bus_call_async");
    slot_.reset(slot);
    ++Calls().in_flight;
    return absl::OkStatus();
  }

  // A reply arrived or an in-flight call was cancelled: send waiting calls.
  static void ReleasePlace() noexcept {
    Throttle& t = Calls();
    --t.in_flight;
    while (!t.waiting.empty() && t.in_flight < limits::kMaxBusCallsInFlight) {
      DbusCall* next = t.waiting.front();
      t.waiting.pop_front();
      next->queued_ = false;
      absl::Status st = next->Send();
      if (!st.ok()) next->FailLater(st);
    }
  }

  // The connection the call was made for ended while it waited (systemd
  // re-executed): its owner gets an error reply from the loop, never from
  // inside another call's handler, like a call lost in flight.
  void FailLater(const absl::Status& why) noexcept {
    static LogLimiter limiter;
    LogLimited(limiter, LOG_WARNING, absl::StrCat("a queued call to systemd was not sent: ", why.message()));
    sd_event* e = sd_bus_get_event(bus_.get());
    sd_event_source* s = nullptr;
    if (e == nullptr || sd_event_add_defer(e, &s, &DbusCall::OnFailed, this) < 0) {
      Log(LOG_ERR, "cannot report a failed queued call: exiting");
      if (e != nullptr) sd_event_exit(e, -EIO);
      return;
    }
    failed_.reset(s);
    sd_event_source_set_priority(s, kBusPriority);
  }

  static int OnFailed(sd_event_source* /*s*/, void* userdata) noexcept {
    auto* self = static_cast<DbusCall*>(userdata);
    self->failed_.reset();
    ReplyHandler handler = std::move(self->handler_);
    if (handler) handler(nullptr);  // ReplyStatus(nullptr): "no reply"
    return 0;
  }

  static int OnReply(sd_bus_message* reply, void* userdata, sd_bus_error* /*ret_error*/) noexcept {
    auto* self = static_cast<DbusCall*>(userdata);
    // The call is over: release our slot first (sd-bus keeps its own reference
    // while dispatching), then move the handler out so that it may destroy
    // *self without destroying the function it is running.
    self->slot_.reset();
    ReleasePlace();
    ReplyHandler handler = std::move(self->handler_);
    if (handler) handler(reply);
    return 0;
  }

  std::unique_ptr<sd_bus, BusUnref> bus_;
  MessagePtr call_;
  SlotPtr slot_;
  ReplyHandler handler_;
  EventSourcePtr failed_;
  bool queued_ = false;
  std::list<DbusCall*>::iterator pos_;
};

}  // namespace

size_t BusCallsInFlight() { return Calls().in_flight; }
size_t BusCallsWaiting() { return Calls().waiting.size(); }

absl::StatusOr<Pending> CallAsync(sd_bus* bus, sd_bus_message* call, ReplyHandler handler) {
  auto pending = std::make_unique<DbusCall>(bus, call, std::move(handler));
  RETURN_IF_ERROR(pending->Start());
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
