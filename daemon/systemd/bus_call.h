// One asynchronous D-Bus method call, owned by whoever waits for its answer.
// Invariant: a pending call is a slot owned by a PendingCall; destroying the
// handle cancels the call so its callback can never run for a dead owner, and
// the callback runs at most once, after the handle has released its slot.
#pragma once

#include <systemd/sd-bus.h>

#include <functional>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/base/sd_ptr.h"

namespace opencode::daemon {

// Receives the reply: a method return or an error message (sd-bus turns a
// timeout or a lost connection into an error reply too). It may destroy the
// PendingCall that delivered it.
using ReplyHandler = std::function<void(sd_bus_message* reply)>;

class PendingCall {
 public:
  virtual ~PendingCall() = default;
};
using Pending = std::unique_ptr<PendingCall>;

// Where calls to systemd go: the supervisor's current connection
// (SystemdConnection replaces it when systemd drops it). Users ask for it at
// each call and never keep it.
class BusSource {
 public:
  virtual ~BusSource() = default;
  virtual sd_bus* bus() const noexcept = 0;
};
// One bus that never changes (tests).
class FixedBus final : public BusSource {
 public:
  explicit FixedBus(sd_bus* bus) : bus_(bus) {}
  sd_bus* bus() const noexcept override { return bus_; }

 private:
  sd_bus* bus_;
};

// Sends `call` with the supervisor's bus timeout (limits::kBusCallTimeoutUsec).
// The caller keeps no reference to `call` afterwards unless it wants to: sd-bus
// holds its own until the message is written. When kMaxBusCallsInFlight calls
// already wait for replies, the call waits (FIFO) and is sent when one ends;
// destroying the handle removes it from the queue. A queued call that can no
// longer be sent (its connection ended meanwhile) gets an error reply, from
// the event loop, like a call the connection lost in flight.
absl::StatusOr<Pending> CallAsync(sd_bus* bus, sd_bus_message* call, ReplyHandler handler);
// Calls waiting for a reply, and calls queued behind them (for tests and STATUS=).
size_t BusCallsInFlight();
size_t BusCallsWaiting();

// Builds a method call to systemd's manager object.
absl::StatusOr<MessagePtr> NewManagerCall(sd_bus* bus, const char* member);
// Builds org.freedesktop.DBus.Properties.GetAll(interface) on `path`.
absl::StatusOr<MessagePtr> NewGetAllCall(sd_bus* bus, const char* path, const char* interface);

// OK for a method return; otherwise a status naming the D-Bus error (name and
// message: both come from systemd or sd-bus, never from a peer).
absl::Status ReplyStatus(sd_bus_message* reply);
// True if `reply` is the error `name` (e.g. "org.freedesktop.systemd1.NoSuchUnit").
bool ReplyIsError(sd_bus_message* reply, const char* name);
// True if `status` came from ReplyStatus() of the D-Bus error `name`.
bool IsBusError(const absl::Status& status, std::string_view name);
// The D-Bus error name of an error reply ("" for a method return).
std::string_view ReplyErrorName(sd_bus_message* reply);

}  // namespace opencode::daemon
