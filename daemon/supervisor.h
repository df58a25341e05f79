// The supervisor's owner of everything: the event loop's sources, the
// connection to systemd, the listener, every session, start-up recovery, graceful shutdown and
// sd_notify. Invariants: READY=1 is sent once, never from inside the
// recovery loop, and only after every leftover opencode-pty-*.service of an
// earlier process was stopped and proven gone (or its bound was hit, or its
// reaper could not start, and it was logged and kept on the retry list); sessions are destroyed only from a
// deferred source, never inside their own callbacks; at shutdown nothing new
// is accepted and the process exits only when every session's unit is proven
// gone or the shutdown bound passed. A unit that was not proven gone within
// its bound is never forgotten: it stays on the retry list (and counts against
// kMaxSessions) until a later attempt proves it gone; attempts run every
// kUnprovenRetryIntervalUsec and at once when systemd reappears on the bus.
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/auth/peer_auth.h"
#include "daemon/base/lingerer.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/listener.h"
#include "daemon/session/session.h"
#include "daemon/systemd/reaper.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/systemd_connection.h"
#include "daemon/systemd/unit_tracker.h"

namespace opencode::daemon {

class Supervisor final : public Listener::Delegate, public SessionObserver {
 public:
  Supervisor(sd_event* event, UniqueFd listen_socket);
  ~Supervisor();

  // Connects to systemd (its private socket), subscribes, recovers, then
  // starts accepting.
  absl::Status Start();
  // The same without a bus: unit calls and authentication are injected
  // (tests/supervisor_test.cc; the bus path is proven in vm-tests).
  absl::Status StartWith(std::unique_ptr<SystemdApi> systemd,
                         std::unique_ptr<Authenticator> authenticator);

  // Listener::Delegate. Units on the retry list hold a slot like sessions:
  // the cap bounds PTY units that may still exist, not only connections.
  size_t SessionCount() const noexcept override { return sessions_.size() + unproven_.size(); }
  size_t HandshakeCount() const noexcept override;
  const MainPidCache* main_pid_cache() const noexcept override { return &main_pid_cache_; }
  void OnConnection(UniqueFd conn) noexcept override;

  // Units not (yet) proven gone, retried until they are.
  const std::set<std::string>& unproven() const noexcept { return unproven_; }
  // Starts a new stop-and-prove attempt for every listed unit that has none
  // running (the retry timer; systemd reappearing on the bus; tests).
  void RetryUnproven() noexcept;

  // SessionObserver
  void OnSessionChanged(Session* s) noexcept override;
  void OnSessionFinished(Session* s) noexcept override;
  void ForEachSession(absl::FunctionRef<void(Session&)> fn) noexcept override;

 private:
  static int OnSignal(sd_event_source* s, const struct signalfd_siginfo* si, void* userdata) noexcept;
  static int OnDefer(sd_event_source* s, void* userdata) noexcept;
  static int OnShutdownDeadline(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  absl::Status StartCommon();
  static int OnRetryTimer(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  void Recover(std::vector<std::string> units) noexcept;
  // Stops `unit` and proves it gone; `retry`: it is on the retry list.
  void Reap(const std::string& unit, bool retry) noexcept;
  void OnReaped(const std::string& unit, bool retry, absl::Status status) noexcept;
  void KeepUnproven(const std::string& unit) noexcept;
  void ArmRetry() noexcept;
  void BecomeReady() noexcept;
  void Shutdown() noexcept;
  void ScheduleHousekeeping() noexcept;
  void Housekeeping() noexcept;
  void UpdateStatus() noexcept;

  sd_event* event_;
  std::unique_ptr<SystemdConnection> connection_;
  std::unique_ptr<SystemdApi> systemd_;
  std::unique_ptr<Authenticator> authenticator_;
  UnitTracker tracker_;
  MainPidCache main_pid_cache_;
  // Before the listener and the sessions, which hand it connections: it is
  // destroyed after them.
  Lingerer lingerer_;
  Listener listener_;
  SessionContext context_;

  std::map<Session*, std::unique_ptr<Session>> sessions_;
  std::vector<std::unique_ptr<Session>> finished_;
  // Start-up recovery and retries: one Reaper per unit at a time.
  std::map<std::string, std::unique_ptr<Reaper>> reapers_;
  std::set<std::string> unproven_;
  Pending list_call_;

  EventSourcePtr sigterm_, sigint_, defer_, shutdown_deadline_, retry_timer_;
  // Until the recovery loop has started a reaper for every leftover: no
  // reaper's end may declare readiness before then.
  bool recovering_ = true;
  bool ready_ = false;
  bool shutting_down_ = false;
  std::string last_status_;
};

}  // namespace opencode::daemon
