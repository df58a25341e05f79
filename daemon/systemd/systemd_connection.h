// The supervisor's one connection to systemd: direct, on systemd's private
// socket (/run/systemd/private, the one systemctl and systemd-run use as
// root), not through the system bus. One hop instead of two, and none of the
// bus daemon's per-connection quotas (match rules, pending replies) on either
// side: with the system bus, every session cost systemd one match rule on its
// own bus connection (AddRef), and 512 of them pushed systemd off the bus.
//
// Invariants: the peer is proven to be PID 1 running as root (SO_PEERCRED of
// the connected socket) before anything is sent; nothing else can send on
// this connection, so every message on it is systemd's own. systemd drops the
// connection when it re-executes (daemon-reexec, an upgrade): the connection
// is then opened again at once and every kSystemdReconnectIntervalUsec until
// kSystemdReconnectDeadlineUsec, when the supervisor gives up and exits (its
// restart's recovery stops every leftover unit). Calls in flight when the
// connection drops get an error reply from sd-bus (their owners' ordinary
// error paths); after a reconnection the owner re-subscribes and re-queries
// every watched unit (SetOnReconnected).
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/bus_call.h"

namespace opencode::daemon {

// systemd's private socket, as sd-bus addresses it.
inline constexpr char kSystemdPrivateAddress[] = "unix:path=/run/systemd/private";

class SystemdConnection final : public BusSource {
 public:
  // `address` and the peer's credentials are fixed in production
  // (kSystemdPrivateAddress, PID 1, uid 0); tests connect to a stand-in
  // server of their own process.
  explicit SystemdConnection(sd_event* event, std::string address = kSystemdPrivateAddress,
                             pid_t peer_pid = 1, uid_t peer_uid = 0);
  ~SystemdConnection() override;
  SystemdConnection(const SystemdConnection&) = delete;
  SystemdConnection& operator=(const SystemdConnection&) = delete;

  // The first connection; an error if systemd cannot be reached or is not
  // the peer.
  absl::Status Connect();
  // The current connection (replaced after a reconnection: ask at each call).
  sd_bus* bus() const noexcept override { return bus_.get(); }
  // Runs after every successful reconnection (not after Connect).
  void SetOnReconnected(std::function<void()> cb) { on_reconnected_ = std::move(cb); }
  size_t reconnections() const noexcept { return reconnections_; }
  bool connected() const noexcept { return !lost_; }

 private:
  absl::StatusOr<BusPtr> Open();
  static int OnDisconnected(sd_bus_message* m, void* userdata, sd_bus_error* error) noexcept;
  static int OnRetry(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  void Reconnect() noexcept;

  sd_event* event_;
  std::string address_;
  pid_t peer_pid_;
  uid_t peer_uid_;
  BusPtr bus_;
  SlotPtr disconnected_match_;
  EventSourcePtr retry_;
  std::function<void()> on_reconnected_;
  bool lost_ = false;
  uint64_t lost_at_usec_ = 0;
  size_t attempts_ = 0;
  size_t reconnections_ = 0;
};

}  // namespace opencode::daemon
