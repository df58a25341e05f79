// The direct connection to systemd and its reconnection (see
// systemd_connection.h).
#include "daemon/systemd/systemd_connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/base/journal.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

uint64_t NowUsec(sd_event* event) {
  uint64_t now = 0;
  sd_event_now(event, CLOCK_MONOTONIC, &now);
  return now;
}

}  // namespace

SystemdConnection::SystemdConnection(sd_event* event, std::string address, pid_t peer_pid,
                                     uid_t peer_uid)
    : event_(event), address_(std::move(address)), peer_pid_(peer_pid), peer_uid_(peer_uid) {}

SystemdConnection::~SystemdConnection() = default;

absl::Status SystemdConnection::Connect() {
  ASSIGN_OR_RETURN(bus_, Open());
  return absl::OkStatus();
}

namespace {
// Until the peer is proven, a refused connection is closed without the
// flush BusPtr does (which would wait for an authentication that an
// unexpected peer may never answer).
struct CloseUnref {
  void operator()(sd_bus* b) const noexcept { sd_bus_close_unref(b); }
};
}  // namespace

absl::StatusOr<BusPtr> SystemdConnection::Open() {
  sd_bus* raw = nullptr;
  int r = sd_bus_new(&raw);
  if (r < 0) return SdError(r, "sd_bus_new");
  std::unique_ptr<sd_bus, CloseUnref> bus(raw);
  if ((r = sd_bus_set_address(raw, address_.c_str())) < 0) return SdError(r, "sd_bus_set_address");
  if ((r = sd_bus_set_description(raw, "systemd")) < 0) return SdError(r, "sd_bus_set_description");
  // Connects at once (a Unix socket); the authentication goes on in the
  // event loop, and calls sent meanwhile wait in sd-bus's queue.
  if ((r = sd_bus_start(raw)) < 0)
    return SdError(r, absl::StrCat("cannot connect to systemd at ", address_));
  // Only PID 1 as root can have bound /run/systemd/private; say so by the
  // kernel's word too, before anything is sent.
  struct ucred peer {};
  socklen_t len = sizeof(peer);
  int fd = sd_bus_get_fd(raw);
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0)
    return absl::UnavailableError(absl::StrCat("SO_PEERCRED of ", address_, ": ", strerror(errno)));
  if (peer.pid != peer_pid_ || peer.uid != peer_uid_)
    return absl::PermissionDeniedError(absl::StrCat("the peer at ", address_, " is pid ", peer.pid,
                                                    " uid ", peer.uid, ", not systemd (pid ",
                                                    peer_pid_, " uid ", peer_uid_, ")"));
  // sd-bus synthesizes this local signal when the connection ends (it never
  // comes from the peer).
  sd_bus_slot* slot = nullptr;
  r = sd_bus_match_signal(raw, &slot, nullptr, "/org/freedesktop/DBus/Local",
                          "org.freedesktop.DBus.Local", "Disconnected",
                          &SystemdConnection::OnDisconnected, this);
  if (r < 0) return SdError(r, "match Disconnected");
  disconnected_match_.reset(slot);
  if ((r = sd_bus_attach_event(raw, event_, kBusPriority)) < 0)
    return SdError(r, "sd_bus_attach_event");
  return BusPtr(bus.release());
}

int SystemdConnection::OnDisconnected(sd_bus_message* /*m*/, void* userdata,
                                      sd_bus_error* /*error*/) noexcept {
  auto* self = static_cast<SystemdConnection*>(userdata);
  if (self->lost_) return 0;
  self->lost_ = true;
  self->lost_at_usec_ = NowUsec(self->event_);
  self->attempts_ = 0;
  Log(LOG_NOTICE, "the connection to systemd ended (daemon-reexec or a restart of systemd): reconnecting");
  // Not from inside the old connection's own dispatch: from the loop.
  sd_event_source* s = nullptr;
  int r = sd_event_add_time_relative(self->event_, &s, CLOCK_MONOTONIC, 0, 0,
                                     &SystemdConnection::OnRetry, self);
  if (r < 0) {
    Log(LOG_ERR, absl::StrCat("cannot schedule the reconnection to systemd: ", strerror(-r)));
    sd_event_exit(self->event_, EXIT_FAILURE);
    return 0;
  }
  self->retry_.reset(s);
  return 0;
}

int SystemdConnection::OnRetry(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  static_cast<SystemdConnection*>(userdata)->Reconnect();
  return 0;
}

void SystemdConnection::Reconnect() noexcept {
  ++attempts_;
  disconnected_match_.reset();
  absl::StatusOr<BusPtr> next = Open();
  if (next.ok()) {
    bus_ = std::move(*next);  // the old one is closed; calls still holding it get errors
    lost_ = false;
    retry_.reset();
    ++reconnections_;
    Log(LOG_NOTICE, absl::StrCat("reconnected to systemd after ", attempts_, " attempt(s), ",
                                 (NowUsec(event_) - lost_at_usec_) / 1000,
                                 " ms: re-subscribing and re-querying every unit"));
    if (on_reconnected_) on_reconnected_();
    return;
  }
  if (NowUsec(event_) - lost_at_usec_ >= limits::kSystemdReconnectDeadlineUsec) {
    Log(LOG_ERR, absl::StrCat("cannot reconnect to systemd: ", next.status().message(),
                              "; exiting (the restart's recovery stops every leftover unit)"));
    sd_event_exit(event_, EXIT_FAILURE);
    return;
  }
  ArmTimerIfOff(retry_.get(), limits::kSystemdReconnectIntervalUsec);
}

}  // namespace opencode::daemon
